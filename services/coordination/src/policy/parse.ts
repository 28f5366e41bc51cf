// Policy text → the typed document (types.ts), checking its shape: which sections and fields exist, and that each
// holds the kind of value it should. What the strings mean (selectors, ports, references) is checked in validate.ts.
//
// Reference: Tailscale's policy-file syntax reference. Keys match case-insensitively, as Tailscale's Go decoder does
// (older Tailscale policies say "ACLs", "Groups", "TagOwners"). Where hse differs, on purpose:
//   - an unknown key is refused, naming it (Tailscale ignores unknown fields in places); a typo such as "dts" must not
//     silently widen or narrow access;
//   - a key given twice in one object is refused (Go keeps the last one without a word);
//   - sections Tailscale has and hse does not implement (postures, ipsets, derpMap, …) are refused with a sentence
//     saying so, rather than accepted and ignored.
import type { JsonNode, PolicyError } from './hujson.ts';
import { type LineIndex, parseHujson } from './hujson.ts';
import type { ACL, AppCapability, Grant, Located, NamedList, NodeAttr, Policy, PolicyTest, SSHRuleSpec, SSHTest } from './types.ts';

/** Collects errors for one document, positioned by offset. */
export class ErrorSink {
  readonly errors: PolicyError[] = [];
  readonly warnings: PolicyError[] = [];
  readonly lines: LineIndex;
  constructor(lines: LineIndex) {
    this.lines = lines;
  }

  error(offset: number, message: string): void {
    this.errors.push({ ...this.lines.position(offset), message });
  }

  warn(offset: number, message: string): void {
    this.warnings.push({ ...this.lines.position(offset), message });
  }
}

const TOP_LEVEL = ['groups', 'tagOwners', 'hosts', 'acls', 'grants', 'tests', 'autoApprovers', 'ssh', 'sshTests', 'nodeAttrs', 'randomizeClientPort'];

/** Tailscale sections hse does not implement, with what an operator should know. */
const UNSUPPORTED_TOP_LEVEL: Record<string, string> = {
  postures: 'device posture is not supported by hse; remove the postures section',
  defaultSrcPosture: 'device posture is not supported by hse; remove defaultSrcPosture',
  ipsets: 'IP sets are not supported by hse yet; use hosts for named addresses and CIDRs',
  derpMap: 'the relay map is configured by hse itself (HSE_DERP_MODE), not in the policy; remove derpMap',
  disableIPv4: 'disableIPv4 is not supported by hse; remove it',
  OneCGNATRoute: 'OneCGNATRoute is not supported by hse; remove it',
  attrConfig: 'attrConfig is not supported by hse; remove it',
  services: 'Tailscale services are not supported by hse; remove the services section',
};

interface Field {
  key: JsonNode;
  value: JsonNode;
}

/** The result of reading a document: the policy when its shape is right enough to check further. */
export interface ParsedPolicy {
  policy: Policy | null;
  sink: ErrorSink;
}

export function emptyPolicy(): Policy {
  return {
    groups: [],
    tagOwners: [],
    hosts: [],
    acls: [],
    grants: [],
    tests: [],
    autoApprovers: { routes: [], exitNode: [] },
    ssh: [],
    sshTests: [],
    nodeAttrs: [],
    randomizeClientPort: false,
    hasAccessRules: false,
  };
}

/** Reads the text. A syntax error stops here (the tree would only produce confusing follow-on errors). */
export function parsePolicyText(text: string): ParsedPolicy {
  const doc = parseHujson(text);
  const sink = new ErrorSink(doc.lines);
  if (doc.errors.length > 0) {
    sink.errors.push(...doc.errors);
    return { policy: null, sink };
  }
  if (!doc.root) return { policy: emptyPolicy(), sink };
  return { policy: new Reader(sink).policy(doc.root), sink };
}

class Reader {
  private readonly sink: ErrorSink;
  constructor(sink: ErrorSink) {
    this.sink = sink;
  }

  private err(node: JsonNode, message: string): void {
    this.sink.error(node.offset, message);
  }

  /** An object's fields by canonical key; unknown and repeated keys are errors that name them. */
  private fields(node: JsonNode, where: string, known: readonly string[], unsupported: Record<string, string> = {}): Map<string, Field> {
    const out = new Map<string, Field>();
    if (node.type !== 'object') {
      this.err(node, `${where} must be an object ({ … })`);
      return out;
    }
    const lower = new Map(known.map((k) => [k.toLowerCase(), k]));
    const lowerUnsupported = new Map(Object.keys(unsupported).map((k) => [k.toLowerCase(), k]));
    for (const prop of node.children ?? []) {
      const [key, value] = prop.children ?? [];
      if (!key || !value) continue;
      const name = String(key.value);
      const canonical = lower.get(name.toLowerCase());
      if (!canonical) {
        const u = lowerUnsupported.get(name.toLowerCase());
        if (u) this.err(key, unsupported[u]);
        else this.err(key, `unknown key "${name}" in ${where}; expected one of ${known.join(', ')}`);
        continue;
      }
      const prev = out.get(canonical);
      if (prev) {
        this.err(key, `"${name}" appears twice in ${where} (first on line ${this.sink.lines.position(prev.key.offset).line})`);
        continue;
      }
      out.set(canonical, { key, value });
    }
    return out;
  }

  private str(node: JsonNode, what: string): Located | null {
    if (node.type !== 'string') {
      this.err(node, `${what} must be a string in double quotes`);
      return null;
    }
    return { value: node.value as string, offset: node.offset };
  }

  private strList(node: JsonNode | undefined, what: string): Located[] {
    if (!node) return [];
    if (node.type === 'null') return [];
    if (node.type !== 'array') {
      this.err(node, `${what} must be a list of strings ([ "…" ])`);
      return [];
    }
    const out: Located[] = [];
    for (const item of node.children ?? []) {
      const s = this.str(item, `each entry of ${what}`);
      if (s) out.push(s);
    }
    return out;
  }

  /**
   * A list that should not be empty: an empty one is accepted (Tailscale accepts it; the rule then matches nothing)
   * with a warning, or refused when required. A missing one is reported by the caller.
   */
  private nonEmpty(field: Field | undefined, what: string, why: string, required = false): Located[] {
    const list = this.strList(field?.value, what);
    if (field && field.value.type === 'array' && (field.value.children ?? []).length === 0) {
      if (required) this.err(field.value, `${what} is empty; ${why}`);
      else this.sink.warn(field.value.offset, `${what} is empty; ${why}`);
    }
    return list;
  }

  private list(node: JsonNode, what: string): JsonNode[] {
    if (node.type === 'null') return [];
    if (node.type !== 'array') {
      this.err(node, `${what} must be a list ([ … ])`);
      return [];
    }
    return node.children ?? [];
  }

  /** An object whose keys are names ("group:eng", "10.0.0.0/8") and whose values are lists of strings (or one string). */
  private namedLists(node: JsonNode, what: string, single = false): NamedList[] {
    const out: NamedList[] = [];
    if (node.type !== 'object') {
      this.err(node, `${what} must be an object ({ "name": … })`);
      return out;
    }
    const seen = new Map<string, number>();
    for (const prop of node.children ?? []) {
      const [key, value] = prop.children ?? [];
      if (!key || !value) continue;
      const name = String(key.value);
      const first = seen.get(name);
      if (first !== undefined) {
        this.err(key, `${name} is defined twice in ${what} (first on line ${this.sink.lines.position(first).line})`);
        continue;
      }
      seen.set(name, key.offset);
      const located = { value: name, offset: key.offset };
      if (single) {
        const v = this.str(value, `the value of ${name} in ${what}`);
        if (v) out.push({ name: located, values: [v] });
      } else {
        out.push({ name: located, values: this.strList(value, `${name} in ${what}`) });
      }
    }
    return out;
  }

  private app(node: JsonNode | undefined, what: string): AppCapability[] {
    if (!node || node.type === 'null') return [];
    if (node.type !== 'object') {
      this.err(node, `${what} must be an object mapping capability names to lists of values`);
      return [];
    }
    const out: AppCapability[] = [];
    for (const prop of node.children ?? []) {
      const [key, value] = prop.children ?? [];
      if (!key || !value) continue;
      const name = { value: String(key.value), offset: key.offset };
      if (value.type !== 'array') {
        this.err(value, `the value of ${name.value} in ${what} must be a list of JSON values ([ { … } ])`);
        continue;
      }
      out.push({ name, values: (value.children ?? []).map(toValue) });
    }
    return out;
  }

  policy(root: JsonNode): Policy {
    const p = emptyPolicy();
    const top = this.fields(root, 'the policy', TOP_LEVEL, UNSUPPORTED_TOP_LEVEL);
    const get = (k: string) => top.get(k)?.value;
    const v = (k: string) => get(k);
    if (v('groups')) p.groups = this.namedLists(v('groups')!, 'groups');
    if (v('tagOwners')) p.tagOwners = this.namedLists(v('tagOwners')!, 'tagOwners');
    if (v('hosts')) p.hosts = this.namedLists(v('hosts')!, 'hosts', true);
    p.hasAccessRules = top.has('acls') || top.has('grants');
    if (v('acls')) p.acls = this.list(v('acls')!, 'acls').flatMap((n, i) => this.acl(n, i) ?? []);
    if (v('grants')) p.grants = this.list(v('grants')!, 'grants').flatMap((n, i) => this.grant(n, i) ?? []);
    if (v('tests')) p.tests = this.list(v('tests')!, 'tests').flatMap((n, i) => this.test(n, i) ?? []);
    if (v('ssh')) p.ssh = this.list(v('ssh')!, 'ssh').flatMap((n, i) => this.sshRule(n, i) ?? []);
    if (v('sshTests')) p.sshTests = this.list(v('sshTests')!, 'sshTests').flatMap((n, i) => this.sshTest(n, i) ?? []);
    if (v('nodeAttrs')) p.nodeAttrs = this.list(v('nodeAttrs')!, 'nodeAttrs').flatMap((n, i) => this.nodeAttr(n, i) ?? []);
    if (v('autoApprovers')) {
      const f = this.fields(v('autoApprovers')!, 'autoApprovers', ['routes', 'exitNode'], {
        services: 'auto-approving Tailscale services is not supported by hse; remove autoApprovers.services',
      });
      if (f.get('routes')) p.autoApprovers.routes = this.namedLists(f.get('routes')!.value, 'autoApprovers.routes');
      p.autoApprovers.exitNode = this.strList(f.get('exitNode')?.value, 'autoApprovers.exitNode');
    }
    const rcp = v('randomizeClientPort');
    if (rcp) {
      if (rcp.type !== 'boolean') this.err(rcp, 'randomizeClientPort must be true or false');
      else p.randomizeClientPort = rcp.value === true;
    }
    return p;
  }

  private acl(node: JsonNode, i: number): ACL | null {
    const where = `acls[${i}]`;
    const f = this.fields(node, where, ['action', 'src', 'dst', 'proto', 'users', 'ports'], {
      srcPosture: 'device posture is not supported by hse; remove srcPosture',
    });
    if (node.type !== 'object') return null;
    const action = f.get('action');
    if (!action) this.err(node, `${where} has no "action"; write "action": "accept"`);
    else {
      const a = this.str(action.value, `${where}.action`);
      if (a && a.value !== 'accept') this.err(action.value, `action "${a.value}" is not supported; rules only accept (everything not accepted is denied)`);
    }
    // "users" and "ports" are the legacy names of src and dst; Tailscale still reads them.
    const src = f.get('src') ?? f.get('users');
    const dst = f.get('dst') ?? f.get('ports');
    if (f.get('src') && f.get('users')) this.err(f.get('users')!.key, `${where} has both "src" and its old name "users"; keep src`);
    if (f.get('dst') && f.get('ports')) this.err(f.get('ports')!.key, `${where} has both "dst" and its old name "ports"; keep dst`);
    if (!src) this.err(node, `${where} has no "src" (who the rule lets in)`);
    if (!dst) this.err(node, `${where} has no "dst" (which devices and ports it opens)`);
    const proto = f.get('proto');
    return {
      offset: node.offset,
      src: this.nonEmpty(src, `${where}.src`, 'the rule would let nobody in'),
      dst: this.nonEmpty(dst, `${where}.dst`, 'the rule would open nothing'),
      proto: proto ? this.str(proto.value, `${where}.proto`) : null,
    };
  }

  private grant(node: JsonNode, i: number): Grant | null {
    const where = `grants[${i}]`;
    const f = this.fields(node, where, ['src', 'dst', 'ip', 'app'], {
      via: 'routing a grant "via" particular routers is not supported by hse yet; remove via',
      srcPosture: 'device posture is not supported by hse; remove srcPosture',
    });
    if (node.type !== 'object') return null;
    if (!f.get('src')) this.err(node, `${where} has no "src" (who the grant is for)`);
    if (!f.get('dst')) this.err(node, `${where} has no "dst" (what it gives access to)`);
    const g: Grant = {
      offset: node.offset,
      src: this.nonEmpty(f.get('src'), `${where}.src`, 'the grant would be for nobody'),
      dst: this.nonEmpty(f.get('dst'), `${where}.dst`, 'the grant would give nothing'),
      ip: this.strList(f.get('ip')?.value, `${where}.ip`),
      app: this.app(f.get('app')?.value, `${where}.app`),
    };
    if (g.ip.length === 0 && g.app.length === 0) this.err(node, `${where} gives nothing: add "ip" (ports, e.g. ["tcp:443"] or ["*"]) or "app" (capabilities)`);
    return g;
  }

  private test(node: JsonNode, i: number): PolicyTest | null {
    const where = `tests[${i}]`;
    const f = this.fields(node, where, ['src', 'proto', 'accept', 'deny'], {
      srcPostureAttrs: 'device posture is not supported by hse; remove srcPostureAttrs',
    });
    if (node.type !== 'object') return null;
    const src = f.get('src') ? this.str(f.get('src')!.value, `${where}.src`) : null;
    if (!f.get('src')) this.err(node, `${where} has no "src" (the user, group, tag, host or address the test acts as)`);
    const t: PolicyTest = {
      offset: node.offset,
      src: src ?? { value: '', offset: node.offset },
      proto: f.get('proto') ? this.str(f.get('proto')!.value, `${where}.proto`) : null,
      accept: this.strList(f.get('accept')?.value, `${where}.accept`),
      deny: this.strList(f.get('deny')?.value, `${where}.deny`),
    };
    if (t.accept.length === 0 && t.deny.length === 0) this.err(node, `${where} asserts nothing: add "accept" or "deny" (["host:port", …])`);
    return src ? t : null;
  }

  private sshRule(node: JsonNode, i: number): SSHRuleSpec | null {
    const where = `ssh[${i}]`;
    const f = this.fields(node, where, ['action', 'src', 'dst', 'users', 'checkPeriod', 'acceptEnv'], {
      srcPosture: 'device posture is not supported by hse; remove srcPosture',
      recorder: 'SSH session recording is not supported by hse; remove recorder',
      enforceRecorder: 'SSH session recording is not supported by hse; remove enforceRecorder',
    });
    if (node.type !== 'object') return null;
    const action = f.get('action') ? this.str(f.get('action')!.value, `${where}.action`) : null;
    if (!f.get('action')) this.err(node, `${where} has no "action"; write "action": "accept"`);
    if (!f.get('src')) this.err(node, `${where} has no "src" (who may log in)`);
    if (!f.get('dst')) this.err(node, `${where} has no "dst" (which devices)`);
    if (!f.get('users') || f.get('users')!.value.type === 'null') this.err(node, `${where} has no "users" (which local users, e.g. ["autogroup:nonroot"])`);
    return {
      offset: node.offset,
      action,
      src: this.nonEmpty(f.get('src'), `${where}.src`, 'the rule would let nobody log in'),
      dst: this.nonEmpty(f.get('dst'), `${where}.dst`, 'the rule would open no device'),
      users: this.nonEmpty(f.get('users'), `${where}.users`, 'name the local users, e.g. ["autogroup:nonroot"]', true),
      checkPeriod: f.get('checkPeriod') && f.get('checkPeriod')!.value.type !== 'null' ? this.str(f.get('checkPeriod')!.value, `${where}.checkPeriod`) : null,
      acceptEnv: this.strList(f.get('acceptEnv')?.value, `${where}.acceptEnv`),
    };
  }

  private sshTest(node: JsonNode, i: number): SSHTest | null {
    const where = `sshTests[${i}]`;
    const f = this.fields(node, where, ['src', 'dst', 'accept', 'deny', 'check'], {
      srcPostureAttrs: 'device posture is not supported by hse; remove srcPostureAttrs',
    });
    if (node.type !== 'object') return null;
    if (!f.get('src')) this.err(node, `${where} has no "src" (the user, group, tag or address the test acts as)`);
    if (!f.get('dst')) this.err(node, `${where} has no "dst" (the devices it logs in to)`);
    const src = f.get('src') ? this.str(f.get('src')!.value, `${where}.src`) : null;
    const t: SSHTest = {
      offset: node.offset,
      src: src ?? { value: '', offset: node.offset },
      dst: this.strList(f.get('dst')?.value, `${where}.dst`),
      accept: this.strList(f.get('accept')?.value, `${where}.accept`),
      deny: this.strList(f.get('deny')?.value, `${where}.deny`),
      check: this.strList(f.get('check')?.value, `${where}.check`),
    };
    if (t.accept.length + t.deny.length + t.check.length === 0) this.err(node, `${where} asserts nothing: add "accept" or "deny" (local user names)`);
    return src ? t : null;
  }

  private nodeAttr(node: JsonNode, i: number): NodeAttr | null {
    const where = `nodeAttrs[${i}]`;
    const f = this.fields(node, where, ['target', 'attr', 'app'], {
      ipPool: 'IP pools are not supported by hse; remove ipPool',
    });
    if (node.type !== 'object') return null;
    if (!f.get('target')) this.err(node, `${where} has no "target" (which devices get the attributes)`);
    const a: NodeAttr = {
      offset: node.offset,
      target: this.strList(f.get('target')?.value, `${where}.target`),
      attr: this.strList(f.get('attr')?.value, `${where}.attr`),
      app: this.app(f.get('app')?.value, `${where}.app`),
    };
    if (a.attr.length === 0 && a.app.length === 0) this.sink.warn(node.offset, `${where} gives nothing: add "attr" (["drive:share", …]) or "app"`);
    return a;
  }
}

/** A JSON subtree as a plain value (capability values are passed through to clients untouched). */
function toValue(node: JsonNode): unknown {
  switch (node.type) {
    case 'object': {
      const o: Record<string, unknown> = {};
      for (const prop of node.children ?? []) {
        const [k, v] = prop.children ?? [];
        if (k && v) o[String(k.value)] = toValue(v);
      }
      return o;
    }
    case 'array':
      return (node.children ?? []).map(toValue);
    default:
      return node.value ?? null;
  }
}
