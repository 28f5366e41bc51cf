// Property tests of the compiler. For random tailnets and random policies:
//   - "may A reach B on proto/port" read from B's compiled filter (evaluated here as wgengine/filter evaluates it,
//     with this file's own matcher, and by the engine's mayReach) equals the answer a deliberately simple evaluator
//     gives straight from the policy object;
//   - B is in A's peers exactly when one of them may send the other anything (packets or capabilities, to its
//     addresses or into routes it serves);
//   - the routes A is given through router B are exactly the ones a rule lets A use.
// The simple evaluator below shares no code with the engine: it reads the policy as written, walks every rule for
// every question, and parses addresses with ipaddr.js.
import test from 'ava';
import fc from 'fast-check';
import ipaddr from 'ipaddr.js';
import { compilePolicy, formatPolicyError } from '../../services/coordination/src/policy/index.ts';
import type { FilterRule } from '../../services/coordination/src/tailcfg/tailcfg.ts';

// ---- the world ----

interface User {
  id: number;
  name: string;
  email: string | null;
  idpGroups: string[];
}

interface Node {
  id: number;
  ipv4: string;
  ipv6: string;
  userId: number;
  tags: string[];
  approvedRoutes: string[];
}

type Rule =
  | { kind: 'acl'; src: string[]; dst: string[]; proto?: string }
  | { kind: 'grant'; src: string[]; dst: string[]; ip?: string[]; app?: Record<string, unknown[]> };

interface SSHRule {
  src: string[];
  dst: string[];
  users: string[];
}

interface World {
  users: User[];
  nodes: Node[];
  groups: Record<string, string[]>;
  hosts: Record<string, string>;
  rules: Rule[];
  ssh: SSHRule[];
}

const TAGS = ['tag:a', 'tag:b', 'tag:c'];
const ROUTES = [['10.1.0.0/16'], ['10.1.2.0/24'], ['192.168.0.0/24'], ['0.0.0.0/0', '::/0'], ['fd00:1::/64']];
const HOSTS: Record<string, string> = { web: '100.64.0.2', net: '100.64.0.0/30', lan: '10.1.0.0/16', six: 'fd7a:115c:a1e0::3' };
const SRC = [
  '*',
  'alice@',
  'bob@',
  'carol@example.com',
  'group:g1',
  'group:g2',
  ...TAGS,
  'autogroup:member',
  'autogroup:tagged',
  'web',
  'net',
  'lan',
  'six',
  '100.64.0.4',
  '10.1.2.0/24',
  'fd00:1::/64',
];
const USERISH = ['*', 'alice@', 'bob@', 'carol@example.com', 'group:g1', 'group:g2', 'autogroup:member'];
const DST = [...SRC, 'autogroup:internet', '192.168.0.0/24'];
const PORTS = ['*', '22', '80,443', '1000-2000', '53'];
const GRANT_IP = ['*', 'tcp:22', 'udp:53', '80', 'icmp:*', 'tcp:1000-2000', 'sctp:9'];

const subset = <T>(xs: readonly T[], min = 1, max = 3) => fc.uniqueArray(fc.constantFrom(...xs), { minLength: min, maxLength: max });

const userArb = fc.tuple(subset(['eng', 'ops'], 0, 2), subset(['eng', 'ops'], 0, 2), subset(['eng', 'ops'], 0, 2)).map(([a, b, c]): User[] => [
  { id: 1, name: 'alice', email: 'alice@example.org', idpGroups: a },
  { id: 2, name: 'bob', email: null, idpGroups: b },
  { id: 3, name: 'carol', email: 'carol@example.com', idpGroups: c },
]);

const nodeArb = (i: number) =>
  fc
    .record({
      owner: fc.oneof(fc.constantFrom(1, 2, 3), subset(TAGS, 1, 2)),
      routes: fc.oneof({ weight: 3, arbitrary: fc.constant([] as string[][]) }, subset(ROUTES, 1, 2)),
    })
    .map(
      ({ owner, routes }): Node => ({
        id: 10 + i,
        ipv4: `100.64.0.${i + 1}`,
        ipv6: `fd7a:115c:a1e0::${(i + 1).toString(16)}`,
        userId: typeof owner === 'number' ? owner : 1,
        tags: typeof owner === 'number' ? [] : owner,
        approvedRoutes: routes.flat(),
      }),
    );

const dstArb = (selfOk: boolean, withPorts: boolean, ports: fc.Arbitrary<string>) => {
  const sels = selfOk ? [...DST, 'autogroup:self'] : DST;
  return fc
    .uniqueArray(fc.tuple(fc.constantFrom(...sels), ports), { minLength: 1, maxLength: 3, selector: ([s]) => s })
    .map((ds) => ds.map(([s, p]) => (withPorts ? `${s}:${p}` : s)));
};

const ruleArb: fc.Arbitrary<Rule> = fc.oneof(
  // An ACL: a protocol without ports (icmp, gre) only with "*".
  fc.record({ src: subset(SRC), proto: fc.constantFrom(undefined, undefined, 'tcp', 'udp', 'icmp', '47', 'sctp') }).chain(({ src, proto }) => {
    const portless = proto === 'icmp' || proto === '47';
    return dstArb(
      src.every((s) => USERISH.includes(s)),
      true,
      portless ? fc.constant('*') : fc.constantFrom(...PORTS),
    ).map((dst): Rule => ({ kind: 'acl', src, dst, ...(proto ? { proto } : {}) }));
  }),
  // A grant: network access, a capability, or both.
  fc.record({ src: subset(SRC), ip: subset(GRANT_IP, 0, 3), cap: fc.boolean() }).chain(({ src, ip, cap }) =>
    dstArb(
      src.every((s) => USERISH.includes(s)),
      false,
      fc.constant(''),
    ).map((dst): Rule => {
      const app = cap || ip.length === 0 ? { 'example.com/cap/x': [{ n: 1 }] } : undefined;
      return {
        kind: 'grant',
        src,
        dst: app ? dst.filter((d) => d !== 'autogroup:internet').concat(dst.every((d) => d === 'autogroup:internet') ? ['*'] : []) : dst,
        ...(ip.length ? { ip } : {}),
        ...(app ? { app } : {}),
      };
    }),
  ),
);

// SSH rules: users and groups to tags or to their own devices; tags to tags (tags may not reach user-owned devices).
const sshArb: fc.Arbitrary<SSHRule> = fc.oneof(
  fc.record({
    src: subset(['alice@', 'group:g1', 'autogroup:member']),
    dst: subset(['tag:a', 'autogroup:self', 'autogroup:member']),
    users: subset(['root', 'autogroup:nonroot', 'ubuntu']),
  }),
  fc.record({ src: subset(['tag:b', 'autogroup:tagged']), dst: subset(['tag:a', 'tag:c']), users: subset(['root', 'ubuntu']) }),
);

const worldArb: fc.Arbitrary<World> = fc
  .record({
    users: userArb,
    count: fc.integer({ min: 1, max: 7 }),
    g1: subset(['alice@', 'bob@', 'idp:eng'], 0, 2),
    g2: subset(['carol@example.com', 'idp:ops', 'bob@'], 0, 2),
    rules: fc.array(ruleArb, { minLength: 1, maxLength: 4 }),
    ssh: fc.array(sshArb, { maxLength: 2 }),
  })
  .chain(({ users, count, g1, g2, rules, ssh }) =>
    fc
      .tuple(...Array.from({ length: count }, (_, i) => nodeArb(i)))
      .map((nodes) => ({ users, nodes, groups: { 'group:g1': g1, 'group:g2': g2 }, hosts: HOSTS, rules, ssh })),
  );

function policyOf(w: World): string {
  return JSON.stringify({
    groups: w.groups,
    hosts: w.hosts,
    tagOwners: Object.fromEntries(TAGS.map((t) => [t, ['alice@']])),
    acls: w.rules
      .filter((r) => r.kind === 'acl')
      .map((r) => ({ action: 'accept', src: r.src, dst: r.dst, ...(r.kind === 'acl' && r.proto ? { proto: r.proto } : {}) })),
    grants: w.rules
      .filter((r) => r.kind === 'grant')
      .map((r) => ({ src: r.src, dst: r.dst, ...(r.kind === 'grant' && r.ip ? { ip: r.ip } : {}), ...(r.kind === 'grant' && r.app ? { app: r.app } : {}) })),
    ssh: w.ssh.map((r) => ({ action: 'accept', ...r })),
  });
}

// ---- the simple evaluator ----

type Addr = { kind: 'ipv4' | 'ipv6'; big: bigint };

const addrCache = new Map<string, Addr>();

function addr(s: string): Addr {
  let v = addrCache.get(s);
  if (!v) {
    const a = ipaddr.parse(s);
    v = { kind: a.kind(), big: a.toByteArray().reduce((n, b) => n * 256n + BigInt(b), 0n) };
    addrCache.set(s, v);
  }
  return v;
}

/** A CIDR or address as [first, last] of its family. */
function block(s: string): { kind: 'ipv4' | 'ipv6'; lo: bigint; hi: bigint } {
  const [a, bits] = s.includes('/') ? ipaddr.parseCIDR(s) : [ipaddr.parse(s), ipaddr.parse(s).kind() === 'ipv4' ? 32 : 128];
  const width = a.kind() === 'ipv4' ? 32 : 128;
  const lo = addr(a.toString()).big;
  return { kind: a.kind(), lo, hi: lo + (1n << BigInt(width - bits)) - 1n };
}

const inBlock = (a: Addr, b: ReturnType<typeof block>) => a.kind === b.kind && a.big >= b.lo && a.big <= b.hi;
const overlap = (x: ReturnType<typeof block>, y: ReturnType<typeof block>) => x.kind === y.kind && x.lo <= y.hi && y.lo <= x.hi;
const isExit = (r: string) => r === '0.0.0.0/0' || r === '::/0';

class Simple {
  readonly w: World;
  constructor(w: World) {
    this.w = w;
  }

  user(n: Node): User | undefined {
    return n.tags.length ? undefined : this.w.users.find((u) => u.id === n.userId);
  }

  inGroup(u: User, g: string): boolean {
    return this.w.groups[g].some((m) => (m.startsWith('idp:') ? u.idpGroups.includes(m.slice(4)) : m === `${u.name}@` || m === u.email));
  }

  /** The literal block a selector stands for, if it is an address, CIDR or host. */
  literal(sel: string): ReturnType<typeof block> | null {
    if (sel in this.w.hosts) return block(this.w.hosts[sel]);
    if (
      /^[\d.]+(\/\d+)?$/.test(sel) ||
      (sel.includes(':') && !sel.includes('@') && !sel.startsWith('tag:') && !sel.startsWith('group:') && !sel.startsWith('autogroup:'))
    )
      return block(sel);
    return null;
  }

  /** Is the device this identity (user, group, tag, member, tagged)? */
  identity(sel: string, n: Node): boolean {
    const u = this.user(n);
    if (sel === 'autogroup:member') return !!u;
    if (sel === 'autogroup:tagged') return n.tags.length > 0;
    if (sel.startsWith('tag:')) return n.tags.includes(sel);
    if (sel.startsWith('group:')) return !!u && this.inGroup(u, sel);
    if (sel.includes('@')) return !!u && (sel === `${u.name}@` || sel === u.email);
    return false;
  }

  subnets(n: Node) {
    return n.approvedRoutes.filter((r) => !isExit(r)).map(block);
  }

  /** For packets: does the source selector admit the node's address of this family? */
  srcAdmits(sel: string, n: Node, fam: 'ipv4' | 'ipv6'): boolean {
    if (sel === '*') return true; // tailnet addresses are all inside "*"
    const lit = this.literal(sel);
    if (lit) return inBlock(addr(fam === 'ipv4' ? n.ipv4 : n.ipv6), lit);
    return this.identity(sel, n);
  }

  /** For packets: does the destination selector admit the node's own address of this family, for a source a? */
  dstAdmits(sel: string, b: Node, fam: 'ipv4' | 'ipv6', a: Node): boolean {
    if (sel === '*') return true;
    if (sel === 'autogroup:internet') return false; // a tailnet address is not on the internet
    if (sel === 'autogroup:self') return !!this.user(a) && !!this.user(b) && a.userId === b.userId;
    const lit = this.literal(sel);
    if (lit) return inBlock(addr(fam === 'ipv4' ? b.ipv4 : b.ipv6), lit);
    return this.identity(sel, b);
  }

  /** The network parts of each rule: sources, [selector, ports] destinations, protocols (null = TCP/UDP/ICMP). */
  private networkRules: { src: string[]; dst: [string, string][]; protos: number[] | null }[] | null = null;

  network(): { src: string[]; dst: [string, string][]; protos: number[] | null }[] {
    if (this.networkRules) return this.networkRules;
    const out: { src: string[]; dst: [string, string][]; protos: number[] | null }[] = [];
    const protoNum: Record<string, number> = { tcp: 6, udp: 17, icmp: 1, sctp: 132 };
    for (const r of this.w.rules) {
      const split = (d: string): [string, string] => {
        const i = d.lastIndexOf(':');
        return [d.slice(0, i), d.slice(i + 1)];
      };
      if (r.kind === 'acl') out.push({ src: r.src, dst: r.dst.map(split), protos: r.proto ? [protoNum[r.proto] ?? Number(r.proto)] : null });
      else
        for (const ip of r.ip ?? []) {
          if (ip === '*') out.push({ src: r.src, dst: r.dst.map((d) => [d, '*']), protos: null });
          else if (!ip.includes(':')) out.push({ src: r.src, dst: r.dst.map((d) => [d, ip]), protos: null });
          else out.push({ src: r.src, dst: r.dst.map((d) => [d, ip.split(':')[1]]), protos: [protoNum[ip.split(':')[0]]] });
        }
    }
    this.networkRules = out;
    return out;
  }

  static portIn(port: number, spec: string): boolean {
    if (spec === '*') return true;
    return spec.split(',').some((p) => {
      const [a, b] = p.split('-').map(Number);
      return port >= a && port <= (b ?? a);
    });
  }

  /** May a connection from a to b (their addresses of one family) on proto/port start? wgengine's rules, restated. */
  mayReach(a: Node, b: Node, proto: number, port: number, fam: 'ipv4' | 'ipv6'): boolean {
    const icmp = (fam === 'ipv4' && proto === 1) || (fam === 'ipv6' && proto === 58);
    for (const r of this.network()) {
      if (!r.src.some((s) => this.srcAdmits(s, a, fam))) continue;
      const protoOk = icmp || (r.protos ? r.protos.includes(proto) : [6, 17, 1, 58].includes(proto));
      if (!protoOk) continue;
      for (const [sel, ports] of r.dst) {
        if (!this.dstAdmits(sel, b, fam, a)) continue;
        if (icmp) return true;
        if ([6, 17, 132].includes(proto) ? Simple.portIn(port, ports) : ports === '*') return true;
      }
    }
    return false;
  }

  /** May a log in to b as the local user login? */
  sshAllows(a: Node, b: Node, login: string): boolean {
    return this.w.ssh.some((r) => {
      if (!r.src.some((s) => this.identity(s, a))) return false;
      if (!r.dst.some((d) => (d === 'autogroup:self' ? !!this.user(a) && !!this.user(b) && a.userId === b.userId : this.identity(d, b)))) return false;
      return login === 'root' ? r.users.includes('root') : r.users.includes(login) || r.users.includes('autogroup:nonroot');
    });
  }

  /** May x send y anything at all: packets or capabilities, to y's addresses or into routes y serves? */
  sends(x: Node, y: Node): boolean {
    for (const r of this.w.rules) {
      const srcHit = r.src.some((s) => {
        if (s === '*') return true;
        const lit = this.literal(s);
        if (lit) return inBlock(addr(x.ipv4), lit) || inBlock(addr(x.ipv6), lit) || this.subnets(x).some((n) => overlap(n, lit));
        return this.identity(s, x);
      });
      if (!srcHit) continue;
      for (const d of r.dst) {
        const sel = r.kind === 'acl' ? d.slice(0, d.lastIndexOf(':')) : d;
        if (sel === '*') return true;
        if (sel === 'autogroup:internet' ? y.approvedRoutes.some(isExit) : sel === 'autogroup:self' ? this.dstAdmits(sel, y, 'ipv4', x) : false) return true;
        const lit = this.literal(sel);
        if (lit ? inBlock(addr(y.ipv4), lit) || inBlock(addr(y.ipv6), lit) || this.subnets(y).some((n) => overlap(n, lit)) : this.identity(sel, y)) return true;
      }
    }
    return false;
  }

  /** Routes of router x that v may use: into them (as a source), or answering from them (as a destination). */
  routes(v: Node, x: Node): string[] {
    if (v.id === x.id) return [];
    const rules = this.network();
    const member = (sel: string, n: Node) => {
      if (sel === '*') return true;
      const lit = this.literal(sel);
      if (lit) return inBlock(addr(n.ipv4), lit) || inBlock(addr(n.ipv6), lit) || this.subnets(n).some((s) => overlap(s, lit));
      return this.identity(sel, n);
    };
    // Capability grants reach into subnets too (as [selector, ""] destinations, no protocols).
    const caps = this.w.rules.flatMap((r) =>
      r.kind === 'grant' && r.app ? [{ src: r.src, dst: r.dst.map((d): [string, string] => [d, '']), protos: null }] : [],
    );
    return x.approvedRoutes.filter((r) => {
      const rb = block(r);
      // A router never routes a prefix it serves itself through another; an exit node never uses another exit node.
      if (!isExit(r) && v.approvedRoutes.some((own) => !isExit(own) && block(own).lo === rb.lo && block(own).hi === rb.hi)) return false;
      if (isExit(r) && v.approvedRoutes.some(isExit)) return false;
      return (isExit(r) ? rules : [...rules, ...caps]).some((u) => {
        const vSrc = u.src.some((s) => member(s, v));
        if (isExit(r)) return vSrc && u.dst.some(([d]) => d === '*' || d === 'autogroup:internet');
        const into = vSrc && u.dst.some(([d]) => d === '*' || (this.literal(d) !== null && overlap(this.literal(d)!, rb)));
        // v is a destination of the rule (an exit node is one for autogroup:internet) and the rule's source lies in r.
        const vDst = u.dst.some(([d]) => d !== 'autogroup:self' && (d === 'autogroup:internet' ? v.approvedRoutes.some(isExit) : member(d, v)));
        const from = vDst && u.src.some((s) => s === '*' || (this.literal(s) !== null && overlap(this.literal(s)!, rb)));
        return into || from;
      });
    });
  }
}

// ---- a packet matcher of this file's own, as wgengine/filter reads FilterRules ----

function admitsPacket(rules: FilterRule[], src: Addr, dst: Addr, proto: number, port: number): boolean {
  const entry = (s: string): ReturnType<typeof block>[] => {
    if (s === '*') return [block('0.0.0.0/0'), block('::/0')];
    if (s.includes('-')) {
      const [a, b] = s.split('-').map(addr);
      return [{ kind: a.kind, lo: a.big, hi: b.big }];
    }
    return [block(s)];
  };
  const icmp = (src.kind === 'ipv4' && proto === 1) || (src.kind === 'ipv6' && proto === 58);
  return rules.some((r) => {
    if (!r.DstPorts) return false;
    if (!r.SrcIPs.flatMap(entry).some((b) => inBlock(src, b))) return false;
    const protos = r.IPProto?.length ? r.IPProto : [6, 17, 1, 58];
    if (!icmp && !protos.includes(proto)) return false;
    return r.DstPorts.some((d) => {
      if (!entry(d.IP).some((b) => inBlock(dst, b))) return false;
      if (icmp) return true;
      if ([6, 17, 132].includes(proto)) return port >= d.Ports.First && port <= d.Ports.Last;
      return d.Ports.First === 0 && d.Ports.Last === 65535;
    });
  });
}

/** A Tailscale SSH server's decision (ssh/tailssh): the first rule with a principal for the source address and a
 * local user for the requested one ("" = not this rule, "=" = the same name) accepts. */
function sshAccepts(
  policy: { rules: { principals: { nodeIP?: string; any?: boolean }[]; sshUsers: Record<string, string>; action: { accept?: boolean } }[] } | null,
  srcIP: string,
  login: string,
): boolean {
  for (const r of policy?.rules ?? []) {
    if (!r.principals.some((p) => p.any || p.nodeIP === srcIP)) continue;
    const local = r.sshUsers[login] ?? r.sshUsers['*'];
    if (local === undefined || local === '') continue;
    return r.action.accept === true;
  }
  return false;
}

// ---- the properties ----

const QUESTIONS: [number, number][] = [
  [6, 22],
  [6, 443],
  [17, 53],
  [6, 1500],
  [1, 0],
  [58, 0],
  [47, 0],
  [132, 9],
  [17, 22],
];

test('may A reach B: the compiled filters and the simple evaluator agree', (t) => {
  fc.assert(
    fc.property(worldArb, (w) => {
      const r = compilePolicy(policyOf(w), { nodes: w.nodes, users: w.users }, { strict: true });
      if (!r.ok) throw new Error(`generated policy refused: ${r.errors.map(formatPolicyError).join('; ')}\n${policyOf(w)}`);
      const simple = new Simple(w);
      for (const a of w.nodes)
        for (const b of w.nodes) {
          if (a === b) continue;
          const filter = r.policy.filterFor(b.id);
          for (const [proto, port] of QUESTIONS)
            for (const fam of ['ipv4', 'ipv6'] as const) {
              const want = simple.mayReach(a, b, proto, port, fam);
              const fromFilter = admitsPacket(filter, addr(fam === 'ipv4' ? a.ipv4 : a.ipv6), addr(fam === 'ipv4' ? b.ipv4 : b.ipv6), proto, port);
              const engine = r.policy.mayReach(a.id, b.id, proto, port, fam === 'ipv4' ? 4 : 6);
              if (want !== fromFilter || want !== engine)
                throw new Error(
                  `${a.id} → ${b.id} proto ${proto} port ${port} ${fam}: policy says ${want}, filter ${fromFilter}, engine ${engine}\n${policyOf(w)}\n${JSON.stringify(filter)}`,
                );
            }
        }
    }),
    { numRuns: 150 },
  );
  t.pass();
});

test('digests: after a tailnet change, every node whose view changed has a new digest', (t) => {
  fc.assert(
    fc.property(worldArb, fc.nat(), fc.nat(), (w, which, how) => {
      if (w.nodes.length < 2) return;
      // One node changes owner, tags or routes; the others stay.
      const nodes2 = w.nodes.map((n, i) => {
        if (i !== which % w.nodes.length) return n;
        const choices = [
          { ...n, tags: [], userId: (n.userId % 3) + 1 },
          { ...n, tags: ['tag:c'] },
          { ...n, approvedRoutes: n.approvedRoutes.length ? [] : ['10.1.2.0/24'] },
        ];
        return choices[how % choices.length];
      });
      const a = compilePolicy(policyOf(w), { nodes: w.nodes, users: w.users }, { strict: true });
      const b = compilePolicy(policyOf(w), { nodes: nodes2, users: w.users }, { strict: true });
      if (!a.ok || !b.ok) throw new Error('generated policy refused');
      for (const n of w.nodes) {
        const view = (p: typeof a.policy) =>
          JSON.stringify([
            p.filterFor(n.id),
            p.peersOf(n.id),
            w.nodes.map((x) => p.routesFor(n.id, x.id)),
            p.sshPolicyFor(n.id),
            Object.entries(p.capMapFor(n.id)).sort(),
          ]);
        if (view(a.policy) !== view(b.policy) && a.policy.digestOf(n.id) === b.policy.digestOf(n.id))
          throw new Error(`node ${n.id}: its view changed but its digest did not`);
      }
    }),
    { numRuns: 150 },
  );
  t.pass();
});

test("peers: B is in A's map exactly when one of them may send the other anything", (t) => {
  fc.assert(
    fc.property(worldArb, (w) => {
      const r = compilePolicy(policyOf(w), { nodes: w.nodes, users: w.users }, { strict: true });
      if (!r.ok) throw new Error('generated policy refused');
      const simple = new Simple(w);
      for (const a of w.nodes) {
        const want = w.nodes.filter((b) => b !== a && (simple.sends(a, b) || simple.sends(b, a))).map((b) => b.id);
        const got = r.policy.peersOf(a.id);
        if (JSON.stringify(want) !== JSON.stringify(got))
          throw new Error(`peers of ${a.id}: expected ${want}, got ${got}\n${policyOf(w)}\n${JSON.stringify(w.nodes)}`);
        for (const b of w.nodes) if (r.policy.isPeer(a.id, b.id) !== want.includes(b.id)) throw new Error(`isPeer(${a.id}, ${b.id}) disagrees with peersOf`);
      }
    }),
    { numRuns: 150 },
  );
  t.pass();
});

test('routes: a viewer is given exactly the routes a rule lets it use, and only from its peers', (t) => {
  fc.assert(
    fc.property(worldArb, (w) => {
      const r = compilePolicy(policyOf(w), { nodes: w.nodes, users: w.users }, { strict: true });
      if (!r.ok) throw new Error('generated policy refused');
      const simple = new Simple(w);
      for (const v of w.nodes)
        for (const x of w.nodes) {
          const want = simple.routes(v, x);
          const got = r.policy.routesFor(v.id, x.id);
          if (JSON.stringify(want) !== JSON.stringify(got))
            throw new Error(`routes of ${x.id} for ${v.id}: expected ${want}, got ${got}\n${policyOf(w)}\n${JSON.stringify(w.nodes)}`);
          if (got.length > 0 && !r.policy.isPeer(v.id, x.id)) throw new Error(`${v.id} is given routes of ${x.id} but does not see it`);
        }
    }),
    { numRuns: 150 },
  );
  t.pass();
});

test("ssh: a login from A to B as a local user is accepted by B's SSH policy exactly when an ssh rule allows it", (t) => {
  fc.assert(
    fc.property(worldArb, (w) => {
      const r = compilePolicy(policyOf(w), { nodes: w.nodes, users: w.users }, { strict: true });
      if (!r.ok) throw new Error(`generated policy refused: ${r.errors.map(formatPolicyError).join('; ')}`);
      const simple = new Simple(w);
      for (const a of w.nodes)
        for (const b of w.nodes)
          for (const login of ['root', 'ubuntu', 'alice'])
            for (const ip of [a.ipv4, a.ipv6]) {
              const want = simple.sshAllows(a, b, login);
              const got = sshAccepts(r.policy.sshPolicyFor(b.id), ip, login);
              if (want !== got)
                throw new Error(
                  `ssh ${a.id} → ${b.id} as ${login} from ${ip}: policy says ${want}, SSH policy ${got}\n${policyOf(w)}\n${JSON.stringify(r.policy.sshPolicyFor(b.id))}`,
                );
              const cap = 'https://tailscale.com/cap/ssh' in r.policy.capMapFor(b.id);
              if (got && !cap) throw new Error(`${b.id} accepts SSH but lacks the SSH capability`);
            }
    }),
    { numRuns: 150 },
  );
  t.pass();
});

test("digests: a node's digest changes exactly when its filter, peers, routes, SSH policy or CapMap change", (t) => {
  fc.assert(
    fc.property(worldArb, worldArb, (w1, w2) => {
      // Same tailnet, two policies: compare each node's view with its digest.
      const w2same = { ...w2, users: w1.users, nodes: w1.nodes };
      const a = compilePolicy(policyOf(w1), { nodes: w1.nodes, users: w1.users }, { strict: true });
      const b = compilePolicy(policyOf(w2same), { nodes: w1.nodes, users: w1.users }, { strict: true });
      if (!a.ok || !b.ok) throw new Error('generated policy refused');
      for (const n of w1.nodes) {
        const view = (p: typeof a.policy) =>
          JSON.stringify([
            p.filterFor(n.id),
            p.peersOf(n.id),
            w1.nodes.map((x) => p.routesFor(n.id, x.id)),
            p.sshPolicyFor(n.id),
            Object.entries(p.capMapFor(n.id)).sort(),
          ]);
        const sameView = view(a.policy) === view(b.policy);
        const sameDigest = a.policy.digestOf(n.id) === b.policy.digestOf(n.id);
        if (sameView !== sameDigest)
          throw new Error(
            `node ${n.id}: views ${sameView ? 'equal' : 'differ'} but digests ${sameDigest ? 'equal' : 'differ'}\n${policyOf(w1)}\n${policyOf(w2same)}`,
          );
      }
    }),
    { numRuns: 150 },
  );
  t.pass();
});
