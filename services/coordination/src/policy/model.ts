// Checks what the policy's strings mean and turns the document into the model the compiler and the test runner use:
// selectors parsed, references (groups, tags, hosts, users) resolved and checked, ACLs and grants flattened into
// "units" (one source list, destination entries with ports, one protocol set or one capability map).
//
// Reference: Tailscale's policy-file syntax reference and the refusals of its control plane (captured in headscale's
// compatibility test data); headscale's hscontrol/policy/v2/types.go for the same checks in a self-hosted server.
// hse choices:
//   - groups hold users ("alice@", "alice@example.com", "user:*@example.com") and identity-provider groups
//     ("idp:<name>", an hse form);
//     a group inside a group is refused, as Tailscale refuses it;
//   - a user selector naming nobody in the tailnet is an error only in strict mode (the console, the API and
//     `hse policy check` save with strict on). A policy already in force that names a user who was since deleted keeps
//     working when it is reloaded: that selector matches no device and a warning says so. Refusing the reload would
//     leave the old policy in force, or block every change, until someone edits the file — for a selector that can
//     only match nothing anyway;
//   - "check" SSH rules are refused: they need a recent browser sign-in, which hse does not offer yet;
//   - stricter than Tailscale where a mistake is likely: selectors with spaces around them, SSH local users that are
//     not Unix login names ("group:foo", "🚀"), the funnel attribute (hse has no public ingress relays), roles hse does
//     not have (autogroup:admin); looser where it is harmless: autogroup:self with "*" as the source in a grant
//     (Tailscale accepts that only in an ACL).
// Checked against the scenarios Tailscale's control plane was captured on (headscale's compatibility data): the same
// policies are accepted and refused, apart from the differences above.
import type { ErrorSink } from './parse.ts';
import { type Interval, isExitRoute, parsePrefix } from './ip.ts';
import {
  isAllPorts,
  PORTED_PROTOCOLS,
  type PortRange,
  parseGrantIp,
  parsePorts,
  parseProto,
  parseSelector,
  protocolName,
  type Selector,
  splitHostPort,
  sshUserProblem,
  tagNameProblem,
} from './selectors.ts';
import type { Located, Policy, TailnetUser } from './types.ts';

/** A selector with where it was written. */
export interface Sel {
  sel: Selector;
  text: string;
  offset: number;
}

/** One destination of a unit: a selector and the ports it opens (all ports for capability units). */
export interface Entry {
  dst: Sel;
  ports: PortRange[];
}

/**
 * A flattened rule. An ACL is one unit; a grant is one unit per protocol group of its "ip" list plus one unit for
 * its "app" capabilities. Each unit becomes at most one FilterRule on each destination device.
 */
export interface Unit {
  /** "acls[2]" or "grants[0]": how messages and the machine page name the rule. */
  origin: string;
  offset: number;
  src: Sel[];
  entries: Entry[];
  /** IPProto; null = the client's default (TCP, UDP, ICMP). */
  protos: number[] | null;
  /** Application capabilities (a capability unit has no network access of its own). */
  caps: Record<string, unknown[] | null> | null;
}

export interface SSHUsers {
  root: boolean;
  nonroot: boolean;
  named: string[];
  /** localpart:*@<domain>: each source user may log in as the local part of their address in that domain. */
  localpartDomains: string[];
}

export interface SSHRuleModel {
  origin: string;
  offset: number;
  src: Sel[];
  dst: Sel[];
  users: SSHUsers;
  acceptEnv: string[];
}

export interface NodeAttrModel {
  origin: string;
  target: Sel[];
  caps: Record<string, unknown[] | null>;
}

export interface ApproverRule {
  /** A readable description, e.g. `autoApprovers.routes["10.0.0.0/8"] (line 40): group:eng`. */
  describe: string;
  prefix: Interval | null;
  approvers: Sel[];
}

export interface Model {
  policy: Policy;
  /** group name → its user logins and idp group names. */
  groups: Map<string, { users: string[]; idp: string[] }>;
  hosts: Map<string, Interval>;
  tagOwners: Map<string, Sel[]>;
  units: Unit[];
  ssh: SSHRuleModel[];
  nodeAttrs: NodeAttrModel[];
  routeApprovers: ApproverRule[];
  exitApprovers: ApproverRule | null;
  /** user selector text → ids of the users it names (empty when it names nobody). */
  userIds: Map<string, number[]>;
}

/** Capability names under tailscale.com that a grant may carry; hse adds tailscale.com/cap/file-sharing (see caps.ts). */
const TAILSCALE_APP_CAPS = new Set([
  'tailscale.com/cap/drive',
  'tailscale.com/cap/relay',
  'tailscale.com/cap/webui',
  'tailscale.com/cap/kubernetes',
  'tailscale.com/cap/tsidp',
  'tailscale.com/cap/secrets',
  'tailscale.com/cap/file-sharing',
]);

type Side = 'src' | 'dst' | 'owner' | 'approver' | 'target' | 'sshSrc' | 'sshDst';

const NOT_HERE: Record<Side, Set<string>> = {
  src: new Set(['autogroup:self', 'autogroup:internet', 'autogroup:nonroot']),
  dst: new Set(['autogroup:danger-all', 'autogroup:nonroot']),
  owner: new Set(['*', 'autogroup:tagged', 'autogroup:self', 'autogroup:internet', 'autogroup:danger-all', 'autogroup:nonroot', 'host', 'prefix']),
  approver: new Set(['*', 'autogroup:self', 'autogroup:internet', 'autogroup:danger-all', 'autogroup:nonroot', 'host', 'prefix']),
  target: new Set(['autogroup:self', 'autogroup:internet', 'autogroup:danger-all', 'autogroup:nonroot']),
  sshSrc: new Set(['autogroup:self', 'autogroup:internet', 'autogroup:danger-all', 'autogroup:nonroot', 'host', 'prefix']),
  sshDst: new Set(['*', 'autogroup:internet', 'autogroup:danger-all', 'autogroup:nonroot', 'host', 'prefix']),
};

const SIDE_WORDS: Record<Side, string> = {
  src: 'a source',
  dst: 'a destination',
  owner: 'a tag owner',
  approver: 'an auto-approver',
  target: 'a nodeAttrs target',
  sshSrc: 'an SSH source',
  sshDst: 'an SSH destination',
};

function kindKey(sel: Selector): string {
  if (sel.kind === 'autogroup') return `autogroup:${sel.name}`;
  if (sel.kind === 'all') return '*';
  return sel.kind;
}

export class ModelBuilder {
  private readonly model: Model;
  private readonly usersByName = new Map<string, TailnetUser[]>();
  private readonly sink: ErrorSink;
  private readonly strict: boolean;
  private readonly users: readonly TailnetUser[];

  constructor(policy: Policy, sink: ErrorSink, users: readonly TailnetUser[], strict: boolean) {
    this.sink = sink;
    this.strict = strict;
    this.users = users;
    this.model = {
      policy,
      groups: new Map(),
      hosts: new Map(),
      tagOwners: new Map(),
      units: [],
      ssh: [],
      nodeAttrs: [],
      routeApprovers: [],
      exitApprovers: null,
      userIds: new Map(),
    };
    for (const u of users) {
      for (const key of new Set([`${u.name}@`, u.name, ...(u.email ? [u.email] : [])])) {
        const list = this.usersByName.get(key.toLowerCase()) ?? [];
        list.push(u);
        this.usersByName.set(key.toLowerCase(), list);
      }
    }
  }

  private err(offset: number, message: string): void {
    this.sink.error(offset, message);
  }

  build(): Model {
    const p = this.model.policy;
    this.hosts();
    this.groups();
    this.tagOwners();
    p.acls.forEach((a, i) => {
      this.acl(a.src, a.dst, a.proto, a.offset, i);
    });
    p.grants.forEach((g, i) => {
      this.grant(g, i);
    });
    p.ssh.forEach((r, i) => {
      this.sshRule(r, i);
    });
    p.nodeAttrs.forEach((a, i) => {
      this.nodeAttr(a, i);
    });
    this.autoApprovers();
    if (!p.hasAccessRules) {
      // No "acls" and no "grants": Tailscale opens the network (its default rule, "*" to "*:*"); the rest of the
      // policy (tags, SSH, node attributes, auto-approvers, tests) applies as written.
      const star: Sel = { sel: { kind: 'all' }, text: '*', offset: 0 };
      this.model.units.push({
        origin: 'the default rule (the policy has no acls or grants)',
        offset: 0,
        src: [star],
        entries: [{ dst: star, ports: [{ first: 0, last: 65535 }] }],
        protos: null,
        caps: null,
      });
    }
    return this.model;
  }

  /** Parses and checks a selector for one side of a rule; null (with an error) when it cannot be used there. */
  sel(l: Located, side: Side): Sel | null {
    const parsed = parseSelector(l.value);
    if (!parsed.ok) {
      this.err(l.offset, parsed.reason);
      return null;
    }
    const sel = parsed.value;
    const key = kindKey(sel);
    if (NOT_HERE[side].has(key)) {
      this.err(l.offset, this.placementMessage(l.value, sel, side));
      return null;
    }
    if (!this.exists(l, sel)) return null;
    return { sel, text: l.value, offset: l.offset };
  }

  private placementMessage(text: string, sel: Selector, side: Side): string {
    if (text === 'autogroup:self' && side === 'src')
      return 'autogroup:self cannot be a source; it is only a destination (the devices of the user who connects)';
    if (text === 'autogroup:internet') return 'autogroup:internet is only a destination of acls and grants (use of exit nodes)';
    if (text === 'autogroup:nonroot') return 'autogroup:nonroot only names local users in an SSH rule\'s "users"';
    if (text === 'autogroup:danger-all' && side === 'dst') return 'autogroup:danger-all cannot be a destination';
    if (sel.kind === 'host' || sel.kind === 'prefix') return `${text}: addresses and host names cannot be ${SIDE_WORDS[side]}`;
    return `${text} cannot be ${SIDE_WORDS[side]}`;
  }

  /** Does the selector name something the policy (or the tailnet) defines? */
  private exists(l: Located, sel: Selector): boolean {
    const p = this.model.policy;
    switch (sel.kind) {
      case 'group':
        if (!p.groups.some((g) => g.name.value === sel.name)) {
          this.err(l.offset, `${sel.name} is not defined in groups`);
          return false;
        }
        return true;
      case 'tag':
        if (!p.tagOwners.some((t) => t.name.value === sel.name)) {
          this.err(l.offset, `${sel.name} is not defined in tagOwners (every tag needs an entry there saying who may use it)`);
          return false;
        }
        return true;
      case 'host':
        if (!this.model.hosts.has(sel.name)) {
          const hint = p.hosts.length === 0 && !sel.name.includes('.') ? `; to name a user, write "${sel.name}@"` : '';
          this.err(l.offset, `${sel.name} is not defined in hosts${hint}`);
          return false;
        }
        return true;
      case 'user':
        this.user(l);
        return true;
      default:
        return true;
    }
  }

  /** Resolves a user selector to user ids; an unknown user is an error in strict mode, else a warning. */
  user(l: Located): number[] {
    const key = l.value;
    const known = this.model.userIds.get(key);
    if (known) return known;
    if (key.startsWith('user:*@')) {
      const domain = key.slice(7).toLowerCase();
      const ids = this.users.filter((u) => u.email?.toLowerCase().endsWith(`@${domain}`)).map((u) => u.id);
      this.model.userIds.set(key, ids);
      if (ids.length === 0) {
        const msg = `no user of this tailnet has an address at ${domain}`;
        if (this.strict) this.err(l.offset, msg);
        else this.sink.warn(l.offset, `${msg}; ${key} matches no device`);
      }
      return ids;
    }
    const matches = this.usersByName.get(key.toLowerCase()) ?? [];
    const ids = [...new Set(matches.map((u) => u.id))];
    this.model.userIds.set(key, ids);
    if (ids.length === 0) {
      const msg = `${key} is not a user of this tailnet`;
      if (this.strict) this.err(l.offset, msg);
      else this.sink.warn(l.offset, `${msg}; it matches no device`);
    } else if (ids.length > 1) {
      this.err(l.offset, `${key} names more than one user (${matches.map((u) => u.name).join(', ')}); use the full address`);
    }
    return ids;
  }

  private hosts(): void {
    for (const h of this.model.policy.hosts) {
      const name = h.name.value;
      if (!/^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(name) || name.includes('@') || /^\d+(\.\d+){3}$/.test(name)) {
        this.err(h.name.offset, `"${name}" cannot be a host name (letters, digits, ".", "-" and "_"; not an address)`);
        continue;
      }
      const v = h.values[0];
      const text = v.value.includes('/') ? v.value : null;
      const parsed = parsePrefix(text ?? `${v.value}/${v.value.includes(':') ? 128 : 32}`);
      if (!parsed.ok) {
        this.err(v.offset, text ? parsed.reason : `${v.value} is not an IP address or CIDR`);
        continue;
      }
      this.model.hosts.set(name, parsed.interval);
    }
  }

  private groups(): void {
    for (const g of this.model.policy.groups) {
      const name = g.name.value;
      if (!name.startsWith('group:') || name.length === 6) {
        this.err(g.name.offset, `"${name}" cannot be a group name; group names start with "group:"`);
        continue;
      }
      const users: string[] = [];
      const idp: string[] = [];
      for (const m of g.values) {
        if (m.value.startsWith('idp:')) {
          if (m.value.length === 4) this.err(m.offset, '"idp:" needs the identity provider\'s group name after it');
          else idp.push(m.value.slice(4));
          continue;
        }
        if (m.value.startsWith('group:')) {
          this.err(m.offset, `${m.value}: a group cannot contain another group; list its users instead`);
          continue;
        }
        const parsed = parseSelector(m.value);
        if (!parsed.ok || parsed.value.kind !== 'user') {
          this.err(m.offset, `${m.value} cannot be a group member; members are users ("alice@") or identity-provider groups ("idp:engineering")`);
          continue;
        }
        this.user(m);
        users.push(m.value);
      }
      this.model.groups.set(name, { users, idp });
    }
  }

  private tagOwners(): void {
    for (const t of this.model.policy.tagOwners) {
      const problem = tagNameProblem(t.name.value);
      if (problem) {
        this.err(t.name.offset, problem);
        continue;
      }
      const owners: Sel[] = [];
      for (const o of t.values) {
        const s = this.sel(o, 'owner');
        if (s) owners.push(s);
      }
      this.model.tagOwners.set(t.name.value, owners);
    }
  }

  private srcList(list: Located[]): Sel[] {
    return list.flatMap((l) => this.sel(l, 'src') ?? []);
  }

  /** autogroup:self as a destination: every source must be a user, a group, autogroup:member or "*". */
  private checkSelfSources(src: Sel[], dstText: Located): void {
    const bad = src.find(
      (s) => !(s.sel.kind === 'user' || s.sel.kind === 'group' || s.sel.kind === 'all' || (s.sel.kind === 'autogroup' && s.sel.name === 'member')),
    );
    if (bad)
      this.err(
        dstText.offset,
        `autogroup:self needs sources that are users, groups or autogroup:member (a device's own user is who it reaches), not ${bad.text}`,
      );
  }

  private checkWholeInternetCidr(sel: Sel): boolean {
    if (sel.sel.kind === 'prefix' && isExitRoute(sel.sel.interval)) {
      this.err(sel.offset, `${sel.text}: to allow every address, use "*" (everything) or "autogroup:internet" (through exit nodes)`);
      return false;
    }
    return true;
  }

  private acl(srcL: Located[], dstL: Located[], protoL: Located | null, offset: number, i: number): void {
    const where = `acls[${i}]`;
    const src = this.srcList(srcL);
    let protos: number[] | null = null;
    if (protoL) {
      const p = parseProto(protoL.value);
      if (!p.ok) this.err(protoL.offset, p.reason);
      else protos = [p.value];
    }
    const entries: Entry[] = [];
    for (const d of dstL) {
      const hp = splitHostPort(d.value);
      if (!hp.ok) {
        this.err(d.offset, hp.reason);
        continue;
      }
      const ports = parsePorts(hp.value.ports);
      if (!ports.ok) {
        this.err(d.offset, `${d.value}: ${ports.reason}`);
        continue;
      }
      if (protos && !PORTED_PROTOCOLS.has(protos[0]) && !isAllPorts(ports.value)) {
        this.err(d.offset, `${d.value}: ${protocolName(protos[0])} has no ports; write "${hp.value.host}:*"`);
        continue;
      }
      const sel = this.sel({ value: hp.value.host, offset: d.offset }, 'dst');
      if (!sel || !this.checkWholeInternetCidr(sel)) continue;
      if (sel.sel.kind === 'autogroup' && sel.sel.name === 'self') this.checkSelfSources(src, d);
      entries.push({ dst: sel, ports: ports.value });
    }
    if (src.length > 0 && entries.length > 0) this.model.units.push({ origin: where, offset, src, entries, protos, caps: null });
  }

  private grant(g: Policy['grants'][number], i: number): void {
    const where = `grants[${i}]`;
    const src = this.srcList(g.src);
    const dsts: Sel[] = [];
    for (const d of g.dst) {
      const sel = this.sel(d, 'dst');
      if (!sel || !this.checkWholeInternetCidr(sel)) continue;
      if (sel.sel.kind === 'autogroup' && sel.sel.name === 'self') this.checkSelfSources(src, d);
      if (sel.sel.kind === 'autogroup' && sel.sel.name === 'internet' && g.app.length > 0) {
        this.err(d.offset, 'application capabilities (app) cannot be granted to autogroup:internet');
        continue;
      }
      dsts.push(sel);
    }
    // One unit per protocol, as Tailscale sends one FilterRule per IPProto set.
    const byProto = new Map<string, { protos: number[] | null; ports: PortRange[] }>();
    for (const ip of g.ip) {
      const spec = parseGrantIp(ip.value);
      if (!spec.ok) {
        this.err(ip.offset, spec.reason);
        continue;
      }
      const key = spec.value.proto === null ? '' : String(spec.value.proto);
      const group = byProto.get(key) ?? { protos: spec.value.proto === null ? null : [spec.value.proto], ports: [] };
      group.ports.push(...spec.value.ports);
      byProto.set(key, group);
    }
    const caps: Record<string, unknown[] | null> = {};
    for (const c of g.app) {
      const problem = capNameProblem(c.name.value);
      if (problem) this.err(c.name.offset, problem);
      else caps[c.name.value] = c.values;
    }
    if (src.length === 0 || dsts.length === 0) return;
    for (const group of byProto.values()) {
      this.model.units.push({
        origin: where,
        offset: g.offset,
        src,
        entries: dsts.map((dst) => ({ dst, ports: group.ports })),
        protos: group.protos,
        caps: null,
      });
    }
    if (Object.keys(caps).length > 0) {
      this.model.units.push({ origin: where, offset: g.offset, src, entries: dsts.map((dst) => ({ dst, ports: [] })), protos: null, caps });
    }
  }

  private sshRule(r: Policy['ssh'][number], i: number): void {
    const where = `ssh[${i}]`;
    if (r.action?.value === 'check') {
      this.err(r.action.offset, 'check mode needs a recent browser sign-in, which hse does not offer yet; use accept');
    } else if (r.action && r.action.value !== 'accept') {
      this.err(r.action.offset, `"${r.action.value}" is not an SSH action; use accept`);
    }
    if (r.checkPeriod && r.action?.value !== 'check') this.err(r.checkPeriod.offset, 'checkPeriod only applies to check rules');
    const src = r.src.flatMap((l) => this.sel(l, 'sshSrc') ?? []);
    const dst = r.dst.flatMap((l) => this.sel(l, 'sshDst') ?? []);
    const users: SSHUsers = { root: false, nonroot: false, named: [], localpartDomains: [] };
    for (const u of r.users) {
      const problem = sshUserProblem(u.value);
      if (problem) {
        this.err(u.offset, problem);
        continue;
      }
      if (u.value === 'root') users.root = true;
      else if (u.value === 'autogroup:nonroot') users.nonroot = true;
      else if (u.value.startsWith('localpart:')) {
        const m = /^localpart:\*@([^\s@*]+)$/.exec(u.value);
        if (!m) this.err(u.offset, `${u.value}: write "localpart:*@<domain>"`);
        else users.localpartDomains.push(m[1].toLowerCase());
      } else users.named.push(u.value);
    }
    for (const e of r.acceptEnv) {
      if (e.value === '') this.err(e.offset, 'an acceptEnv entry cannot be empty');
    }
    // Tailscale's rules for who may log in to whose devices: tags cannot reach user-owned devices, a user's devices
    // only by that user, autogroup:self only from users and groups.
    const userOwnedDst = dst.find((d) => d.sel.kind === 'user' || (d.sel.kind === 'autogroup' && (d.sel.name === 'member' || d.sel.name === 'self')));
    const tagSrc = src.find((s) => s.sel.kind === 'tag' || (s.sel.kind === 'autogroup' && s.sel.name === 'tagged') || s.sel.kind === 'all');
    if (userOwnedDst && tagSrc)
      this.err(tagSrc.offset, `${tagSrc.text} cannot log in to user-owned devices (${userOwnedDst.text}); tagged devices may only reach tagged devices`);
    for (const d of dst) {
      if (d.sel.kind === 'user') {
        const other = src.find((s) => s.text !== d.text);
        if (other)
          this.err(
            d.offset,
            `${d.text} as an SSH destination allows only ${d.text} as the source, not ${other.text}; use autogroup:self for "each user's own devices"`,
          );
      }
    }
    if (src.length > 0 && dst.length > 0) this.model.ssh.push({ origin: where, offset: r.offset, src, dst, users, acceptEnv: r.acceptEnv.map((e) => e.value) });
  }

  private nodeAttr(a: Policy['nodeAttrs'][number], i: number): void {
    const target = a.target.flatMap((l) => this.sel(l, 'target') ?? []);
    const caps: Record<string, unknown[] | null> = {};
    for (const attr of a.attr) {
      if (attr.value.trim() === '' || attr.value !== attr.value.trim()) this.err(attr.offset, `"${attr.value}" is not an attribute name`);
      // Funnel needs Tailscale's public ingress relays; a device told it may funnel would offer a feature that cannot work.
      else if (attr.value === 'funnel')
        this.err(attr.offset, "Funnel (public ingress through Tailscale's relays) is not available with hse; remove the funnel attribute");
      else caps[attr.value] = null;
    }
    for (const c of a.app) {
      if (c.name.value.trim() === '') this.err(c.name.offset, 'a capability name cannot be empty');
      else caps[c.name.value] = c.values;
    }
    if (target.length > 0) this.model.nodeAttrs.push({ origin: `nodeAttrs[${i}]`, target, caps });
  }

  private autoApprovers(): void {
    const aa = this.model.policy.autoApprovers;
    const line = (offset: number) => this.sink.lines.position(offset).line;
    for (const r of aa.routes) {
      const p = parsePrefix(r.name.value.includes('/') ? r.name.value : `${r.name.value}/${r.name.value.includes(':') ? 128 : 32}`);
      if (!p.ok) {
        this.err(r.name.offset, `autoApprovers.routes: ${p.reason}`);
        continue;
      }
      const approvers = r.values.flatMap((l) => this.sel(l, 'approver') ?? []);
      this.model.routeApprovers.push({
        describe: `autoApprovers.routes["${r.name.value}"] (line ${line(r.name.offset)})`,
        prefix: p.interval,
        approvers,
      });
    }
    if (aa.exitNode.length > 0) {
      const approvers = aa.exitNode.flatMap((l) => this.sel(l, 'approver') ?? []);
      this.model.exitApprovers = { describe: `autoApprovers.exitNode (line ${line(aa.exitNode[0].offset)})`, prefix: null, approvers };
    }
  }
}

/** Grant capability names: "{domain}/{path}", no URL scheme, and under tailscale.com only the ones clients define. */
export function capNameProblem(name: string): string | null {
  if (/^[a-z]+:\/\//i.test(name)) return `${name}: write capability names without a scheme, as {domain}/{path}`;
  const slash = name.indexOf('/');
  if (slash <= 0 || slash === name.length - 1 || !name.slice(0, slash).includes('.')) return `${name}: a capability name has the form {domain}/{path}`;
  const domain = name.slice(0, slash).toLowerCase();
  if ((domain === 'tailscale.com' || domain.endsWith('.tailscale.com')) && !TAILSCALE_APP_CAPS.has(name)) {
    return `${name}: capabilities under tailscale.com are Tailscale's own; only ${[...TAILSCALE_APP_CAPS].join(', ')} can be granted`;
  }
  return null;
}
