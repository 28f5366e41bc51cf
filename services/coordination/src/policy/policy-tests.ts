// The policy's own tests and sshTests, evaluated when the policy is checked. A failing test refuses the policy, with
// the line and column of the assertion that failed.
//
// Reference: Tailscale's tests and sshTests sections (a test names one source and host:port destinations that must,
// or must not, be reachable; an SSH test names local users that may, or may not, log in) and the outcomes its control
// plane gives (headscale's compatibility captures). Tailscale evaluates them against the policy, by identity, not
// only against devices that happen to exist; headscale evaluates them against existing devices' addresses. hse
// evaluates them by identity, both ways:
//   - "accept" must hold for a device that has nothing but the named identity: a new device of alice@, a device
//     tagged only tag:db, a member of group:eng we know nothing else about. That is the weakest such device, so every
//     existing one passes too (rules only ever allow);
//   - "deny" must hold for that device and for every existing device with the identity (which may carry more tags,
//     be in more groups, or have an address some rule names).
// A test without "proto" asks about TCP. Destinations are one host and one port (a CIDR, a port range or "*" is
// refused, even a /32), except autogroup:internet:*, which asks whether exit nodes may be used.
import type { IPSet, Interval } from './ip.ts';
import type { Model, Sel } from './model.ts';
import type { ErrorSink } from './parse.ts';
import type { Resolver } from './resolve.ts';
import { parseProto, parseSelector, protocolName, type Selector, splitHostPort } from './selectors.ts';
import type { Located } from './types.ts';

/** A device as a test sees it: an identity, maybe addresses, maybe a concrete node. */
interface Principal {
  /** How messages name it: "alice@", "a device tagged tag:db", "bob@'s device 100.64.0.7". */
  name: string;
  /** The owning user of an untagged device (null: unknown or tagged). */
  userId: number | null;
  /** A hypothetical member of this group (user unknown). */
  group: string | null;
  /** Owned by a user (untagged) or by its tags (tagged); an address that is no device is neither. */
  untagged: boolean;
  tagged: boolean;
  tags: readonly string[];
  addrs: readonly Interval[];
  internet: boolean;
  /** For autogroup:self destinations: the source principal whose own device this is. */
  selfOf: Principal | null;
  /** An existing device (named in messages), not a hypothetical one. */
  concrete: boolean;
}

const base = (name: string): Principal => ({
  name,
  userId: null,
  group: null,
  untagged: false,
  tagged: false,
  tags: [],
  addrs: [],
  internet: false,
  selfOf: null,
  concrete: false,
});

/** One assertion of tests or sshTests and its outcome, for the console's list of test results. */
export interface TestResult {
  /** "tests[2]" or "sshTests[0]". */
  origin: string;
  line: number;
  column: number;
  /** What was asserted: "alice@ → tag:db:5432 accept", "bob@ → tag:server as root deny". */
  assertion: string;
  passed: boolean;
  /** Why it failed (the same sentence as the error), or where the access comes from when it passed. */
  detail: string;
}

export class PolicyTestRunner {
  /** Every assertion evaluated, passed or not. */
  readonly results: TestResult[] = [];
  private origin = '';
  private readonly model: Model;
  private readonly r: Resolver;
  private readonly sink: ErrorSink;

  constructor(model: Model, r: Resolver, sink: ErrorSink) {
    this.model = model;
    this.r = r;
    this.sink = sink;
  }

  private err(l: Located, message: string): void {
    this.sink.error(l.offset, message);
  }

  private record(l: Located, assertion: string, passed: boolean, detail: string): void {
    const { line, column } = this.sink.lines.position(l.offset);
    this.results.push({ origin: this.origin, line, column, assertion, passed, detail });
    if (!passed) this.sink.error(l.offset, detail);
  }

  private line(offset: number): number {
    return this.sink.lines.position(offset).line;
  }

  run(): void {
    this.model.policy.tests.forEach((t, i) => {
      this.origin = `tests[${i}]`;
      let proto = 6;
      if (t.proto) {
        const p = parseProto(t.proto.value);
        if (!p.ok || ![6, 17, 132].includes(p.value)) {
          this.err(t.proto, `a test's proto is tcp, udp or sctp, not ${t.proto.value}`);
          return;
        }
        proto = p.value;
      }
      const src = this.principals(t.src, 'test source');
      if (!src) return;
      for (const [list, want] of [
        [t.accept, true],
        [t.deny, false],
      ] as const) {
        for (const d of list) this.networkAssertion(src, d, proto, want);
      }
    });
    this.model.policy.sshTests.forEach((t, i) => {
      this.origin = `sshTests[${i}]`;
      const src = this.principals(t.src, 'SSH test source');
      if (!src) return;
      for (const c of t.check) this.err(c, 'check mode needs a recent browser sign-in, which hse does not offer yet; there are no check rules to test');
      for (const d of t.dst) {
        const dst = this.sshTestDestination(d);
        if (!dst) continue;
        for (const u of t.accept) this.sshAssertion(src, dst, d, u, true);
        for (const u of t.deny) this.sshAssertion(src, dst, d, u, false);
      }
    });
  }

  // ---- principals ----

  /** The principals a test's src stands for: [0] the hypothetical one, then each distinct existing device. */
  private principals(l: Located, what: string): Principal[] | null {
    const parsed = parseSelector(l.value);
    if (!parsed.ok) {
      this.err(l, `${what}: ${parsed.reason}`);
      return null;
    }
    return this.identity(l, parsed.value, what);
  }

  private identity(l: Located, sel: Selector, what: string): Principal[] | null {
    const s: Sel = { sel, text: l.value, offset: l.offset };
    switch (sel.kind) {
      case 'user': {
        if (l.value.startsWith('user:')) {
          this.err(l, `${what}: a test acts as one user, not every user of a domain; name one ("alice@")`);
          return null;
        }
        const ids = this.model.userIds.get(l.value) ?? this.lookupUser(l);
        if (ids.length !== 1) {
          this.err(l, `${what}: ${l.value} is not a user of this tailnet`);
          return null;
        }
        return [{ ...base(l.value), userId: ids[0], untagged: true }, ...this.devicesOf(s)];
      }
      case 'group':
        if (!this.model.groups.has(sel.name)) {
          this.err(l, `${what}: ${sel.name} is not defined in groups`);
          return null;
        }
        return [{ ...base(`a member of ${sel.name}`), group: sel.name, untagged: true }, ...this.devicesOf(s)];
      case 'tag':
        if (!this.model.tagOwners.has(sel.name)) {
          this.err(l, `${what}: ${sel.name} is not defined in tagOwners`);
          return null;
        }
        return [{ ...base(`a device tagged ${sel.name}`), tagged: true, tags: [sel.name] }, ...this.devicesOf(s)];
      case 'autogroup':
        if (sel.name === 'member') return [{ ...base("a member's device"), untagged: true }, ...this.devicesOf(s)];
        if (sel.name === 'tagged') return [{ ...base('a tagged device'), tagged: true }, ...this.devicesOf(s)];
        this.err(l, `${what}: ${l.value} cannot be a test source`);
        return null;
      case 'host':
      case 'prefix': {
        const iv = sel.kind === 'host' ? this.model.hosts.get(sel.name) : sel.interval;
        if (!iv) {
          this.err(l, `${what}: ${l.value} is not defined in hosts`);
          return null;
        }
        if (iv.lo !== iv.hi) {
          this.err(l, `${what}: ${l.value} is a range of addresses; a test names one device or address`);
          return null;
        }
        const devices = this.devicesOf(s);
        return devices.length > 0 ? devices : [{ ...base(l.value), addrs: [iv] }];
      }
      default:
        this.err(l, `${what}: ${l.value} cannot be a test source; name a user, group, tag, host or address`);
        return null;
    }
  }

  private lookupUser(l: Located): number[] {
    const lower = l.value.toLowerCase();
    const ids: number[] = [];
    for (const u of this.r.tn.users.values()) {
      if (`${u.name}@`.toLowerCase() === lower || u.name.toLowerCase() === lower || u.email?.toLowerCase() === lower) ids.push(u.id);
    }
    return ids;
  }

  /**
   * Existing devices a selector covers, one per distinct way rules could see them (same user, same tags, same
   * address-selector matches), so a test on a group of a thousand devices stays quick.
   */
  private devicesOf(s: Sel): Principal[] {
    return this.devices(this.r.devices(s).toArray());
  }

  private devices(indices: Iterable<number>): Principal[] {
    const tn = this.r.tn;
    const literals = this.addressSelectors();
    const seen = new Set<string>();
    const out: Principal[] = [];
    for (const i of indices) {
      const node = tn.nodes[i];
      const addrs: Interval[] = [];
      if (!Number.isNaN(tn.v4[i])) addrs.push({ family: 4, lo: BigInt(tn.v4[i]), hi: BigInt(tn.v4[i]) });
      if (tn.v6[i] !== null) addrs.push({ family: 6, lo: tn.v6[i]!, hi: tn.v6[i]! });
      const hits = literals.filter((iv) => addrs.some((a) => a.family === iv.family && iv.lo <= a.lo && a.hi <= iv.hi));
      const key = `${tn.tagged[i] ? '' : node.userId}|${[...node.tags].sort().join(',')}|${hits.map((h) => `${h.lo}-${h.hi}`).join(',')}`;
      if (seen.has(key)) continue;
      seen.add(key);
      const owner = tn.tagged[i] ? `tagged ${node.tags.join(',')}` : `${tn.users.get(node.userId)?.name ?? node.userId}@'s`;
      out.push({
        ...base(`${owner} device ${tn.v4Text[i] || tn.v6Text[i]}`),
        userId: tn.tagged[i] ? null : node.userId,
        untagged: !tn.tagged[i],
        tagged: tn.tagged[i] === 1,
        tags: node.tags,
        addrs,
        concrete: true,
      });
    }
    return out;
  }

  private literalCache: Interval[] | null = null;

  private addressSelectors(): Interval[] {
    if (!this.literalCache) {
      const out: Interval[] = [];
      const add = (s: Sel) => {
        const iv = this.r.interval(s);
        if (iv) out.push(iv);
      };
      for (const u of this.model.units) {
        u.src.forEach(add);
        for (const e of u.entries) add(e.dst);
      }
      this.literalCache = out;
    }
    return this.literalCache;
  }

  /** autogroup:self as a test destination: a new device of the source's user, then the user's existing devices. */
  private ownDevices(p: Principal): Principal[] {
    const own: Principal = { ...base(`${p.name}'s own device`), userId: p.userId, group: p.group, untagged: p.untagged, selfOf: p };
    if (p.userId === null) return [own];
    return [own, ...this.devices(this.r.tn.untaggedByUser.get(p.userId) ?? [])];
  }

  // ---- matching ----

  private userIn(p: Principal, s: Sel): boolean {
    if (!p.untagged) return false;
    if (s.sel.kind === 'group' && p.group === s.sel.name) return true;
    return p.userId !== null && this.r.userIdsOf(s).includes(p.userId);
  }

  /** Does a rule's selector stand for this principal? */
  private matches(s: Sel, p: Principal, src: Principal | null): boolean {
    const sel = s.sel;
    switch (sel.kind) {
      case 'all':
        return p.internet || p.untagged || p.tagged || p.addrs.some((a) => this.starHas(a));
      case 'user':
      case 'group':
        return this.userIn(p, s);
      case 'tag':
        return p.tags.includes(sel.name);
      case 'host':
      case 'prefix': {
        const iv = this.r.interval(s);
        return iv !== null && p.addrs.some((a) => a.family === iv.family && iv.lo <= a.lo && a.hi <= iv.hi);
      }
      case 'autogroup':
        switch (sel.name) {
          case 'member':
            return p.untagged;
          case 'tagged':
            return p.tagged;
          case 'danger-all':
            return true;
          case 'internet':
            return p.internet;
          case 'self':
            if (!src || !p.untagged || !src.untagged) return false;
            if (p.selfOf === src) return true;
            return src.userId !== null && p.userId === src.userId;
          default:
            return false;
        }
    }
  }

  private starHas(a: Interval): boolean {
    const star: IPSet = this.r.star();
    return star.has(a.family, a.lo);
  }

  /** The first unit letting src reach dst on proto/port, or null. */
  private reach(src: Principal, dst: Principal, proto: number, port: number): string | null {
    for (const u of this.model.units) {
      if (u.caps) continue;
      if (u.protos ? !u.protos.includes(proto) : proto !== 6 && proto !== 17) continue;
      if (!u.src.some((s) => this.matches(s, src, null))) continue;
      const hit = u.entries.some((e) => this.matches(e.dst, dst, src) && e.ports.some((r) => (dst.internet ? true : r.first <= port && port <= r.last)));
      if (hit) return `${u.origin} (line ${this.line(u.offset)})`;
    }
    return null;
  }

  // ---- assertions ----

  private destination(d: Located, src: Principal[]): { principals: (p: Principal) => Principal[]; port: number; text: string } | null {
    const hp = splitHostPort(d.value);
    if (!hp.ok) {
      this.err(d, hp.reason);
      return null;
    }
    const host = hp.value.host;
    const portText = hp.value.ports;
    if (host === 'autogroup:internet') {
      if (portText !== '*') {
        this.err(d, `${d.value}: autogroup:internet is tested as a whole (may the source use exit nodes?): write autogroup:internet:*`);
        return null;
      }
      const internet = { ...base('the internet'), internet: true };
      return { principals: () => [internet], port: 0, text: d.value };
    }
    if (!/^\d{1,5}$/.test(portText) || Number(portText) < 1 || Number(portText) > 65535) {
      this.err(d, `${d.value}: a test destination has one port (1-65535), not "${portText}"`);
      return null;
    }
    const port = Number(portText);
    if (host === 'autogroup:self') {
      if (!src[0].untagged) {
        this.err(d, `${d.value}: autogroup:self needs a user or group as the test's source`);
        return null;
      }
      return { principals: (p) => this.ownDevices(p), port, text: d.value };
    }
    const l = { value: host, offset: d.offset };
    const parsed = parseSelector(host);
    if (!parsed.ok) {
      this.err(d, parsed.reason);
      return null;
    }
    if (parsed.value.kind === 'prefix' ? host.includes('/') : parsed.value.kind === 'all') {
      this.err(d, `${d.value}: a test destination is one device or address, not a range`);
      return null;
    }
    const ps = this.identity(l, parsed.value, 'test destination');
    if (!ps) return null;
    return { principals: () => ps, port, text: d.value };
  }

  private networkAssertion(src: Principal[], d: Located, proto: number, want: boolean): void {
    const dst = this.destination(d, src);
    if (!dst) return;
    const what = `${dst.text}${proto === 6 ? '' : ` (${protocolName(proto)})`}`;
    const assertion = `${src[0].name} → ${what} ${want ? 'accept' : 'deny'}`;
    if (want) {
      const p = src[0];
      const q = dst.principals(p)[0];
      const via = this.reach(p, q, proto, dst.port);
      if (via) this.record(d, assertion, true, `allowed by ${via}`);
      else this.record(d, assertion, false, `test failed: ${p.name} cannot reach ${what}, but the test says accept`);
      return;
    }
    for (const p of src) {
      for (const q of dst.principals(p)) {
        const via = this.reach(p, q, proto, dst.port);
        if (via) {
          this.record(
            d,
            assertion,
            false,
            `test failed: ${p.name} can reach ${what}${q.concrete ? ` (${q.name})` : ''} through ${via}, but the test says deny`,
          );
          return;
        }
      }
    }
    this.record(d, assertion, true, 'no rule allows it');
  }

  // ---- SSH tests ----

  private sshTestDestination(d: Located): Sel | null {
    const parsed = parseSelector(d.value);
    if (!parsed.ok) {
      this.err(d, `SSH test destination: ${parsed.reason}`);
      return null;
    }
    const sel = parsed.value;
    if (
      (sel.kind === 'prefix' && sel.interval.lo !== sel.interval.hi) ||
      sel.kind === 'all' ||
      (sel.kind === 'autogroup' && (sel.name === 'internet' || sel.name === 'danger-all'))
    ) {
      this.err(d, `${d.value} cannot be an SSH test destination; name a device: a tag, a user, a host or an address`);
      return null;
    }
    return { sel, text: d.value, offset: d.offset };
  }

  private sshAllows(p: Principal, q: Principal, login: string): string | null {
    const tn = this.r.tn;
    for (const rule of this.model.ssh) {
      if (!rule.src.some((s) => this.matches(s, p, null))) continue;
      if (!rule.dst.some((s) => this.matches(s, q, p))) continue;
      const u = rule.users;
      let ok = login === 'root' ? u.root : u.nonroot || u.named.includes(login);
      if (!ok && login !== 'root' && p.userId !== null) {
        const email = tn.users.get(p.userId)?.email?.toLowerCase();
        ok = u.localpartDomains.some((dom) => email === `${login.toLowerCase()}@${dom}`);
      }
      if (ok) return `${rule.origin} (line ${this.line(rule.offset)})`;
    }
    return null;
  }

  private sshAssertion(src: Principal[], dstSel: Sel, d: Located, login: Located, want: boolean): void {
    if (login.value === '' || login.value === '*') {
      this.err(login, `"${login.value}" is not a local user name`);
      return;
    }
    const dsts = (p: Principal): Principal[] | null => {
      if (dstSel.sel.kind === 'autogroup' && dstSel.sel.name === 'self') return this.ownDevices(p);
      return this.identity({ value: dstSel.text, offset: dstSel.offset }, dstSel.sel, 'SSH test destination');
    };
    const assertion = `${src[0].name} → ${d.value} as ${login.value} ${want ? 'accept' : 'deny'}`;
    if (want) {
      const p = src[0];
      const q = dsts(p);
      if (!q) return;
      const via = this.sshAllows(p, q[0], login.value);
      if (via) this.record(login, assertion, true, `allowed by ${via}`);
      else this.record(login, assertion, false, `SSH test failed: ${p.name} cannot log in to ${d.value} as ${login.value}, but the test says accept`);
      return;
    }
    for (const p of src) {
      for (const q of dsts(p) ?? []) {
        const via = this.sshAllows(p, q, login.value);
        if (via) {
          this.record(login, assertion, false, `SSH test failed: ${p.name} can log in to ${d.value} as ${login.value} through ${via}, but the test says deny`);
          return;
        }
      }
    }
    this.record(login, assertion, true, 'no rule allows it');
  }
}
