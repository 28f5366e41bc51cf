// The compiler: a checked policy model and a tailnet snapshot in, per-node answers out (compiled-policy.ts).
//
// Reference: Tailscale's control plane as its published captures show it (headscale's compatibility data), and
// headscale's hscontrol/policy/v2 (filter.go, policyutil/reduce.go, types/node.go CanAccessRoute):
//   - a node's PacketFilter holds only rules admitting traffic to it: DstPorts name its own addresses (or "*" when
//     the rule's destination is "*", or the CIDR as written when a CIDR destination contains it or overlaps a subnet
//     route it serves), and an exit node gets autogroup:internet as the public address ranges;
//   - SrcIPs are merged into as few addresses, CIDRs and ranges as possible;
//   - an app grant becomes a CapGrant rule on the destination; tailscale.com/cap/drive and /relay also put their
//     companion capability (drive-sharer, relay-target) on the sources, as Tailscale does;
//   - peers: nodes either side of any rule (network or capability), plus subnet routers and exit nodes whose routes the
//     node may use — a route is usable when a rule lets the node reach into it, or lets it be reached from it; a
//     router is not given a prefix it serves itself, nor an exit node another exit node.
// Checked against those captures: every accepted ACL, grant and route scenario gives each node the same filter (as
// sets of sources, destinations, ports and protocols), the same peers and the same usable routes (one capture
// contradicts the others and is not followed; the primary router of a prefix shared by two is, in Tailscale's maps,
// also handed the prefix through the other — primary routes are the map layer's business). hse differences: a CIDR destination inside the internet
// (8.8.8.0/24) is not served by exit nodes — only autogroup:internet and "*" are (a node that may use an exit node
// needs internet access anyway); a rule whose sources are nobody is left out (Tailscale sends it with empty SrcIPs);
// companion capabilities share one rule; hse's own extension tailscale.com/cap/file-sharing turns on Taildrop between
// the grant's sources and destinations (caps.ts).
//
// How it stays fast (10,000 nodes, each reaching ~50): every selector and source list is resolved once into a bitset
// of nodes and a merged address list; nodes whose matches are the same share one filter template (instantiated with
// the node's own addresses), one peer list, one SSH policy and one CapMap, each hashed once for the digests.
import { createHash } from 'node:crypto';
import type { FilterRule, NetPortRange, NodeCapMap, SSHPolicy } from '../tailcfg/tailcfg.ts';
import { buildCaps, COMPANIONS, capName } from './caps.ts';
import type { CompiledPolicy, Reacher, ViewDigest } from './compiled-policy.ts';
import { describeReachers } from './describe.ts';
import { FilterMatcher } from './filter-match.ts';
import { formatInterval, INTERNET_RANGES, type Interval, isExitRoute, overlaps, parsePrefix } from './ip.ts';
import type { Model, Sel, Unit } from './model.ts';
import { Resolver, type SrcIPs } from './resolve.ts';
import type { PortRange } from './selectors.ts';
import { SSHCompiler } from './ssh.ts';
import { Bitset, type TailnetIndex } from './tailnet-index.ts';

export function hash(s: string): string {
  return createHash('sha1').update(s).digest('base64url');
}

const INTERNET_STRINGS = Object.freeze(INTERNET_RANGES.map(formatInterval));

/** How a matched destination entry names the node in DstPorts / CapGrant.Dsts. */
type Target = { kind: 'own' } | { kind: 'star' } | { kind: 'literal'; text: string; cidr: string } | { kind: 'internet' };

/** Every (unit, entry) pair, numbered. */
interface Flat {
  unit: number;
  entry: number;
  target: Target;
}

interface DstTemplate {
  target: Target;
  ports: readonly PortRange[];
}

/**
 * Where a template rule's SrcIPs come from: a list shared by every node, or one that depends on the node's user (the
 * sources of an autogroup:self entry that are the user's own devices; all of the user's devices, for the companion
 * of a self grant). The per-user ones are looked up when the template is instantiated, so nodes of different users
 * still share one template.
 */
type SrcRef = { fixed: SrcIPs } | { selfOf: number } | { userDevices: true };

interface RuleTemplate {
  src: SrcRef;
  protos: number[] | null;
  dsts: DstTemplate[];
  /** Set for capability rules. */
  capMap: Record<string, unknown[] | null> | null;
}

interface FilterTemplate {
  rules: RuleTemplate[];
  hash: string;
  /** Some rule's sources depend on the node's user (see SrcRef). */
  perUser: boolean;
}

interface PeerGroup {
  peers: Int32Array;
  /** setHash of the peers' ids. */
  hash: [number, number];
}

export interface CompileOptions {
  /** Taildrop between a user's own devices (the file-sharing capability on every node). Default on. */
  taildrop?: boolean;
}

export class Compiled implements CompiledPolicy {
  readonly allowAll = false;
  readonly nodeIds: readonly number[];
  private readonly r: Resolver;
  private readonly units: readonly Unit[];
  private readonly flat: Flat[] = [];
  /** "flat index:user id" → the user's devices among the sources of that autogroup:self entry. */
  private readonly selfMembers = new Map<string, number[]>();
  /** Per node: its filter template and peer group. */
  private readonly filterTemplateOf: FilterTemplate[];
  private readonly filterCache: (FilterRule[] | undefined)[];
  private readonly matcherCache = new Map<number, FilterMatcher>();
  private readonly peerGroupOf: PeerGroup[];
  private readonly selfPeerSrc: Bitset;
  private readonly srcBits: Bitset[] = [];
  private readonly dstBits: Bitset[] = [];
  private readonly routeUsers = new Map<string, Bitset>();
  /** The distinct approved subnet routes, sorted; and a hash of which router serves which routes. */
  private routeOrder: string[] = [];
  /** Route text → the nodes serving it. */
  private readonly routeServers = new Map<string, number[]>();
  private routeLayout = '';
  private readonly exitUsers: Bitset;
  private readonly ssh: SSHCompiler;
  private readonly caps: ReturnType<typeof buildCaps>;
  private readonly digestCache: (ViewDigest | undefined)[];
  readonly model: Model;
  readonly tn: TailnetIndex;
  private readonly lineOf: (offset: number) => number;

  constructor(model: Model, tn: TailnetIndex, lineOf: (offset: number) => number, opts: CompileOptions = {}) {
    this.model = model;
    this.tn = tn;
    this.lineOf = lineOf;
    this.r = new Resolver(model, tn);
    this.units = model.units;
    this.nodeIds = tn.nodes.map((n) => n.id);
    const n = tn.n;
    this.filterCache = new Array(n);
    this.digestCache = new Array(n);
    this.flattenEntries();
    this.unitBitsets();
    this.filterTemplateOf = this.buildFilterTemplates();
    this.selfPeerSrc = this.selfSources();
    this.peerGroupOf = this.buildPeerGroups();
    this.exitUsers = new Bitset(n);
    this.buildRouteUsers();
    this.ssh = new SSHCompiler(model, this.r, hash);
    this.caps = buildCaps(model, this.r, this.ssh, opts.taildrop !== false, hash);
  }

  // ---- destinations and filters ----

  private targetOf(s: Sel): Target {
    const sel = s.sel;
    if (sel.kind === 'all') return { kind: 'star' };
    if (sel.kind === 'autogroup' && sel.name === 'internet') return { kind: 'internet' };
    if (sel.kind === 'host' || sel.kind === 'prefix') {
      const iv = this.r.interval(s)!;
      const text = formatInterval(iv);
      const bits = iv.family === 4 ? 32 : 128;
      return { kind: 'literal', text, cidr: text.includes('/') ? text : `${text}/${bits}` };
    }
    return { kind: 'own' };
  }

  private flattenEntries(): void {
    this.units.forEach((u, ui) => {
      u.entries.forEach((e, ei) => {
        this.flat.push({ unit: ui, entry: ei, target: this.targetOf(e.dst) });
      });
    });
  }

  private isSelf(s: Sel): boolean {
    return s.sel.kind === 'autogroup' && s.sel.name === 'self';
  }

  /** Per unit: the nodes on its source side and on its (non-self) destination side, for peers and routes. */
  private unitBitsets(): void {
    const n = this.tn.n;
    for (const u of this.units) {
      this.srcBits.push(this.r.union(u.src));
      const dsts = u.entries.filter((e) => !this.isSelf(e.dst)).map((e) => e.dst);
      this.dstBits.push(dsts.length > 0 ? this.r.union(dsts) : new Bitset(n));
    }
  }

  /** The sources of self rules that are untagged devices (only those can be "a user's own device"). */
  private selfSourceNodes(u: Unit): Bitset {
    return this.r
      .union(u.src, (s) => this.r.devices(s))
      .clone()
      .and(this.tn.untagged());
  }

  private buildFilterTemplates(): FilterTemplate[] {
    const tn = this.tn;
    const n = tn.n;
    // Per node, in policy order: matched destination entries (flat indices), autogroup:self entries whose sources
    // include some of the node's user's devices (flat indices), and companion capabilities (2·unit, or 2·unit+1 for
    // a self grant's companion).
    const ents: number[][] = new Array(n);
    const selfs: number[][] = new Array(n);
    const comps: number[][] = new Array(n);
    const push = (lists: number[][], i: number, v: number) => {
      const l = lists[i];
      if (l) l.push(v);
      else lists[i] = [v];
    };
    this.flat.forEach((f, fi) => {
      const e = this.units[f.unit].entries[f.entry];
      if (!this.isSelf(e.dst)) {
        for (const i of this.r.nodes(e.dst).toArray()) push(ents, i, fi);
        return;
      }
      // autogroup:self: each user whose own devices are among the sources, on each of that user's devices.
      const src = this.selfSourceNodes(this.units[f.unit]);
      for (const [userId, devices] of tn.untaggedByUser) {
        const members = devices.filter((i) => src.has(i));
        if (members.length === 0) continue;
        this.selfMembers.set(`${fi}:${userId}`, members);
        for (const i of devices) push(selfs, i, fi);
      }
    });
    // Companion capabilities go to the grant's sources.
    this.units.forEach((u, ui) => {
      if (!u.caps || !Object.keys(u.caps).some((c) => COMPANIONS[c])) return;
      const hasOther = u.entries.some((e) => !this.isSelf(e.dst));
      const hasSelf = u.entries.some((e) => this.isSelf(e.dst));
      for (const i of this.r.union(u.src, (s) => this.r.devices(s)).toArray()) {
        if (hasOther) push(comps, i, 2 * ui);
        if (hasSelf && !tn.tagged[i]) push(comps, i, 2 * ui + 1);
      }
    });
    const templates = new Map<string, FilterTemplate>();
    const out: FilterTemplate[] = new Array(n);
    for (let i = 0; i < n; i++) {
      const key = `${ents[i]?.join(',') ?? ''}|${selfs[i]?.join(',') ?? ''}|${comps[i]?.join(',') ?? ''}`;
      let t = templates.get(key);
      if (!t) {
        t = this.template(ents[i] ?? [], selfs[i] ?? [], comps[i] ?? []);
        templates.set(key, t);
      }
      out[i] = t;
    }
    return out;
  }

  /** Builds one filter template from what a node matched, in policy order. */
  private template(ents: number[], selfs: number[], comps: number[]): FilterTemplate {
    const units = new Set<number>();
    for (const fi of ents) units.add(this.flat[fi].unit);
    for (const fi of selfs) units.add(this.flat[fi].unit);
    for (const c of comps) units.add(c >> 1);
    const rules: RuleTemplate[] = [];
    for (const ui of [...units].sort((a, b) => a - b)) {
      const u = this.units[ui];
      const caps = u.caps ? mainCaps(u.caps) : null;
      const mine = ents.filter((fi) => this.flat[fi].unit === ui);
      if (mine.length > 0) {
        const src = this.r.srcStrings(u.src);
        const dsts = mine.map((fi): DstTemplate => ({ target: this.flat[fi].target, ports: u.entries[this.flat[fi].entry].ports }));
        // A rule whose sources are no device (a group with nobody in it yet) admits nothing: leave it out.
        if (src.strings.length > 0) rules.push({ src: { fixed: src }, protos: u.protos, dsts, capMap: caps });
      }
      // Self entries of one unit share their sources (the node's user's devices among the unit's sources): one rule.
      const self = selfs.filter((fi) => this.flat[fi].unit === ui);
      if (self.length > 0) {
        rules.push({
          src: { selfOf: self[0] },
          protos: u.protos,
          dsts: self.map((fi) => ({ target: { kind: 'own' }, ports: u.entries[this.flat[fi].entry].ports })),
          capMap: caps,
        });
      }
      if (u.caps && comps.includes(2 * ui)) {
        const dsts = u.entries.filter((e) => !this.isSelf(e.dst)).map((e) => e.dst);
        const src = this.r.srcStrings(dsts);
        if (src.strings.length > 0)
          rules.push({ src: { fixed: src }, protos: null, dsts: [{ target: { kind: 'own' }, ports: [] }], capMap: companionCaps(u.caps) });
      }
      if (u.caps && comps.includes(2 * ui + 1)) {
        rules.push({ src: { userDevices: true }, protos: null, dsts: [{ target: { kind: 'own' }, ports: [] }], capMap: companionCaps(u.caps) });
      }
    }
    return { rules, hash: hash(rules.map(ruleKey).join('\n')), perUser: rules.some((r) => !('fixed' in r.src)) };
  }

  /** A template rule's SrcIPs for node i. */
  private srcFor(ref: SrcRef, i: number): SrcIPs {
    if ('fixed' in ref) return ref.fixed;
    const userId = this.tn.nodes[i].userId;
    if ('selfOf' in ref) return this.r.nodeStrings(`self ${ref.selfOf} ${userId}`, this.selfMembers.get(`${ref.selfOf}:${userId}`) ?? []);
    return this.r.nodeStrings(`user ${userId}`, this.tn.untaggedByUser.get(userId) ?? []);
  }

  private idx(nodeId: number): number {
    const i = this.tn.indexOf.get(nodeId);
    if (i === undefined) throw new Error(`node ${nodeId} is not in the compiled snapshot`);
    return i;
  }

  filterFor(nodeId: number): FilterRule[] {
    const i = this.idx(nodeId);
    const cached = this.filterCache[i];
    if (cached) return cached;
    const out = this.filterTemplateOf[i].rules.map((t) => this.instantiate(t, i));
    this.filterCache[i] = out;
    return out;
  }

  private instantiate(t: RuleTemplate, i: number): FilterRule {
    const tn = this.tn;
    const own = [tn.v4Text[i], tn.v6Text[i]].filter((a) => a !== '');
    if (t.capMap) {
      const dsts: string[] = [];
      for (const d of t.dsts) {
        if (d.target.kind === 'literal') dsts.push(d.target.cidr);
        else for (const a of own) dsts.push(a.includes(':') ? `${a}/128` : `${a}/32`);
      }
      return { SrcIPs: this.srcFor(t.src, i).strings as string[], CapGrant: [{ Dsts: [...new Set(dsts)], CapMap: t.capMap }] };
    }
    const ports: NetPortRange[] = [];
    const push = (ip: string, p: readonly PortRange[]) => {
      for (const r of p) ports.push({ IP: ip, Ports: { First: r.first, Last: r.last } });
    };
    for (const a of own) for (const d of t.dsts) if (d.target.kind === 'own') push(a, d.ports);
    for (const d of t.dsts) {
      if (d.target.kind === 'star') push('*', d.ports);
      else if (d.target.kind === 'literal') push(d.target.text, d.ports);
      else if (d.target.kind === 'internet') for (const s of INTERNET_STRINGS) push(s, d.ports);
    }
    const rule: FilterRule = { SrcIPs: this.srcFor(t.src, i).strings as string[], DstPorts: ports };
    if (t.protos) rule.IPProto = t.protos;
    return rule;
  }

  // ---- peers ----

  private selfSources(): Bitset {
    const b = new Bitset(this.tn.n);
    for (const u of this.units) if (u.entries.some((e) => this.isSelf(e.dst))) b.or(this.selfSourceNodes(u));
    return b;
  }

  private buildPeerGroups(): PeerGroup[] {
    const n = this.tn.n;
    // Per node, the units that have it on their source side and on their destination side (ascending): its key.
    const srcUnits: number[][] = new Array(n);
    const dstUnits: number[][] = new Array(n);
    const add = (lists: number[][], i: number, ui: number) => {
      const l = lists[i];
      if (l) l.push(ui);
      else lists[i] = [ui];
    };
    this.units.forEach((_, ui) => {
      for (const i of this.srcBits[ui].toArray()) add(srcUnits, i, ui);
      for (const i of this.dstBits[ui].toArray()) add(dstUnits, i, ui);
    });
    const groups = new Map<string, PeerGroup>();
    const out: PeerGroup[] = new Array(n);
    const ids = this.nodeIds;
    const none: number[] = [];
    for (let i = 0; i < n; i++) {
      const src = srcUnits[i] ?? none;
      const dst = dstUnits[i] ?? none;
      const key = `${src.join(',')}|${dst.join(',')}`;
      let g = groups.get(key);
      if (!g) {
        const b = new Bitset(n);
        for (const ui of src) b.or(this.dstBits[ui]);
        for (const ui of dst) b.or(this.srcBits[ui]);
        const peers = b.toArray();
        // Hashed by node id, not index: indices shift when a node joins, ids do not.
        g = { peers, hash: setHash(Array.from(peers, (j) => ids[j])) };
        groups.set(key, g);
      }
      out[i] = g;
    }
    return out;
  }

  /** Devices of the node's user that reach it, or that it reaches, through autogroup:self rules. */
  private selfPeers(i: number): number[] {
    if (this.tn.tagged[i]) return [];
    const devices = this.tn.untaggedByUser.get(this.tn.nodes[i].userId) ?? [];
    const all = this.selfPeerSrc.has(i);
    return devices.filter((j) => j !== i && (all || this.selfPeerSrc.has(j)));
  }

  peersOf(nodeId: number): number[] {
    const i = this.idx(nodeId);
    const ids = this.nodeIds;
    const base = this.peerGroupOf[i].peers;
    const extra = this.selfPeers(i);
    const out: number[] = [];
    if (extra.length === 0) {
      for (let k = 0; k < base.length; k++) if (base[k] !== i) out.push(ids[base[k]]);
      return out;
    }
    // Merge the shared list with the node's own user's devices (both ascending), leaving the node itself out.
    let k = 0;
    for (const j of base) {
      while (k < extra.length && extra[k] < j) out.push(ids[extra[k++]]);
      if (k < extra.length && extra[k] === j) k++;
      if (j !== i) out.push(ids[j]);
    }
    while (k < extra.length) out.push(ids[extra[k++]]);
    return out;
  }

  isPeer(a: number, b: number): boolean {
    const i = this.idx(a);
    const j = this.idx(b);
    if (i === j) return false;
    return sortedHas(this.peerGroupOf[i].peers, j) || this.selfPeers(i).includes(j);
  }

  // ---- routes ----

  /**
   * Who may use each approved subnet route: the sources of rules (packets or capabilities) whose destination reaches
   * into it, and the destinations of rules whose source lies in it (they answer through the router). Exit routes: the
   * sources of network rules to "*" or autogroup:internet. A router is never given a prefix it serves itself, nor an
   * exit node another exit node's routes (as Tailscale's captures show).
   */
  private buildRouteUsers(): void {
    const tn = this.tn;
    const seen = new Map<string, Interval>();
    for (const i of tn.routers) {
      for (const iv of tn.subnetRoutes[i]) {
        const text = formatInterval(iv);
        seen.set(text, iv);
        const servers = this.routeServers.get(text) ?? [];
        servers.push(i);
        this.routeServers.set(text, servers);
      }
    }
    const network = this.units.map((u, ui) => ({ u, ui })).filter(({ u }) => u.caps === null);
    for (const { u, ui } of network) {
      if (u.entries.some((e) => e.dst.sel.kind === 'all' || (e.dst.sel.kind === 'autogroup' && e.dst.sel.name === 'internet')))
        this.exitUsers.or(this.srcBits[ui]);
    }
    // Capability grants count too: a capability given into a subnet is used through its router.
    const all = this.units.map((u, ui) => ({ u, ui }));
    for (const [text, route] of seen) {
      const b = new Bitset(tn.n);
      for (const { u, ui } of all) {
        const reachesInto = u.entries.some((e) => e.dst.sel.kind === 'all' || this.selOverlaps(e.dst, route));
        const comesFrom = u.src.some((s) => s.sel.kind === 'all' || (s.sel.kind === 'autogroup' && s.sel.name === 'danger-all') || this.selOverlaps(s, route));
        if (reachesInto) b.or(this.srcBits[ui]);
        if (comesFrom) b.or(this.dstBits[ui]);
      }
      this.routeUsers.set(text, b);
    }
    this.routeOrder = [...this.routeUsers.keys()].sort();
    const layout = new Set([...tn.routers, ...tn.exitNodes]);
    this.routeLayout = hash(
      [...layout]
        .map((i) => `${this.nodeIds[i]}:${tn.nodes[i].approvedRoutes.join(',')}`)
        .sort()
        .join(';'),
    );
  }

  private selOverlaps(s: Sel, route: Interval): boolean {
    const iv = this.r.interval(s);
    return iv !== null && overlaps(iv, route);
  }

  /** In the order the router's routes were approved. */
  routesFor(viewerId: number, routerId: number): string[] {
    const v = this.idx(viewerId);
    const x = this.idx(routerId);
    if (v === x) return [];
    const tn = this.tn;
    const out: string[] = [];
    // An exit node does not leave through another exit node.
    const exit = tn.exitRoutes[x].length > 0 && tn.exitRoutes[v].length === 0 && this.exitUsers.has(v);
    for (const r of tn.nodes[x].approvedRoutes) {
      if (tn.exitRoutes[x].includes(r)) {
        if (exit) out.push(r);
        continue;
      }
      const k = tn.subnetRouteText[x].indexOf(r);
      if (k < 0) continue;
      const text = formatInterval(tn.subnetRoutes[x][k]);
      // A router that serves the same prefix itself routes it itself, not through another router.
      if (this.routeServers.get(text)!.includes(v)) continue;
      if (this.routeUsers.get(text)?.has(v)) out.push(r);
    }
    return out;
  }

  // ---- SSH, capabilities, approvals, tags ----

  sshPolicyFor(nodeId: number): SSHPolicy | null {
    return this.ssh.policyFor(this.idx(nodeId));
  }

  needsSSHCapability(nodeId: number): boolean {
    return this.ssh.isDestination(this.idx(nodeId));
  }

  capMapFor(nodeId: number): NodeCapMap {
    return this.caps.capMapFor(this.idx(nodeId));
  }

  /** Does the approver selector stand for this node? Tagged nodes are their tags; others, their user. */
  private approverMatches(s: Sel, i: number): boolean {
    const node = this.tn.nodes[i];
    const tagged = this.tn.tagged[i] === 1;
    switch (s.sel.kind) {
      case 'tag':
        return tagged && node.tags.includes(s.sel.name);
      case 'user':
      case 'group':
        return !tagged && this.r.userIdsOf(s).includes(node.userId);
      case 'autogroup':
        return s.sel.name === 'member' ? !tagged : s.sel.name === 'tagged' ? tagged : false;
      default:
        return false;
    }
  }

  autoApprover(nodeId: number, prefix: string): string | null {
    const i = this.idx(nodeId);
    const p = parsePrefix(prefix);
    if (!p.ok) return null;
    if (isExitRoute(p.interval)) {
      const rule = this.model.exitApprovers;
      const a = rule?.approvers.find((s) => this.approverMatches(s, i));
      return rule && a ? `${rule.describe}: ${a.text}` : null;
    }
    for (const rule of this.model.routeApprovers) {
      if (!rule.prefix || rule.prefix.family !== p.interval.family || rule.prefix.lo > p.interval.lo || rule.prefix.hi < p.interval.hi) continue;
      const a = rule.approvers.find((s) => this.approverMatches(s, i));
      if (a) return `${rule.describe}: ${a.text}`;
    }
    return null;
  }

  definedTags(): string[] {
    return [...this.model.tagOwners.keys()].sort();
  }

  mayOwnTag(userId: number, tag: string): boolean {
    const owners = this.model.tagOwners.get(tag);
    if (!owners || !this.tn.users.has(userId)) return false;
    return owners.some((s) => {
      if (s.sel.kind === 'user' || s.sel.kind === 'group') return this.r.userIdsOf(s).includes(userId);
      return s.sel.kind === 'autogroup' && s.sel.name === 'member';
    });
  }

  tagsMayOwnTag(tags: readonly string[], tag: string): boolean {
    const owners = this.model.tagOwners.get(tag);
    return !!owners && owners.some((s) => s.sel.kind === 'tag' && tags.includes(s.sel.name));
  }

  // ---- questions about the result ----

  reachersOf(nodeId: number): Reacher[] {
    const i = this.idx(nodeId);
    return describeReachers(this.units, this.matchedUnits(i), this.ssh.rulesFor(i), this.model.ssh, this.lineOf, this.tn);
  }

  /** Units with an entry matching node i, with the entries, for the machine page. */
  private matchedUnits(i: number): { unit: number; entries: number[]; selfUser: number | null }[] {
    const out = new Map<number, { unit: number; entries: number[]; selfUser: number | null }>();
    const tn = this.tn;
    for (const f of this.flat) {
      const e = this.units[f.unit].entries[f.entry];
      let hit = false;
      let selfUser: number | null = null;
      if (this.isSelf(e.dst)) {
        if (!tn.tagged[i]) {
          const src = this.selfSourceNodes(this.units[f.unit]);
          hit = (tn.untaggedByUser.get(tn.nodes[i].userId) ?? []).some((j) => src.has(j));
          selfUser = tn.nodes[i].userId;
        }
      } else hit = this.r.nodes(e.dst).has(i);
      if (!hit) continue;
      const slot = out.get(f.unit) ?? { unit: f.unit, entries: [], selfUser: null };
      slot.entries.push(f.entry);
      if (selfUser !== null) slot.selfUser = selfUser;
      out.set(f.unit, slot);
    }
    return [...out.values()];
  }

  mayReach(srcId: number, dstId: number, proto: number, port: number, family?: 4 | 6): boolean {
    const s = this.idx(srcId);
    const d = this.idx(dstId);
    let m = this.matcherCache.get(d);
    if (!m) {
      m = new FilterMatcher(this.filterFor(dstId));
      this.matcherCache.set(d, m);
    }
    const tn = this.tn;
    const try4 = family !== 6 && !Number.isNaN(tn.v4[s]) && !Number.isNaN(tn.v4[d]);
    const try6 = family !== 4 && tn.v6[s] !== null && tn.v6[d] !== null;
    if (try4 && m.admits(4, BigInt(tn.v4[s]), BigInt(tn.v4[d]), proto, port)) return true;
    return try6 && m.admits(6, tn.v6[s]!, tn.v6[d]!, proto, port);
  }

  viewDigest(nodeId: number): ViewDigest {
    const i = this.idx(nodeId);
    const cached = this.digestCache[i];
    if (cached) return cached;
    const tn = this.tn;
    // Parts are short strings that are equal exactly when that part of the view is (hashes of shared pieces plus what
    // is particular to the node); only the whole is hashed.
    const template = this.filterTemplateOf[i];
    // Per-user sources are part of the node's filter: their hashes, in rule order.
    const perUser = template.perUser ? template.rules.map((r) => ('fixed' in r.src ? '' : this.srcFor(r.src, i).hash)).join(',') : '';
    const filter = `${template.hash}|${perUser}|${tn.v4Text[i]}|${tn.v6Text[i]}`;
    const ids = this.nodeIds;
    // The peers' id-set hash: the group's, without the node itself, with the node's own user's devices it adds.
    const g = this.peerGroupOf[i];
    let [a, b] = g.hash;
    const minus = (id: number) => {
      const [x, y] = idMix(id);
      a = (a - x) >>> 0;
      b = (b - y) >>> 0;
    };
    const plus = (id: number) => {
      const [x, y] = idMix(id);
      a = (a + x) >>> 0;
      b = (b + y) >>> 0;
    };
    if (sortedHas(g.peers, i)) minus(ids[i]);
    for (const j of this.selfPeers(i)) if (!sortedHas(g.peers, j)) plus(ids[j]);
    const peers = `${a.toString(36)}.${b.toString(36)}`;
    // The routes a node may use follow from which route-users sets hold it; which routers serve which routes is the
    // same for every node (the layout). A route the node serves itself is never among them.
    let usable = this.exitUsers.has(i) && tn.exitRoutes[i].length === 0 && tn.exitNodes.length > 0 ? 'x' : '-';
    for (const r of this.routeOrder) {
      const servers = this.routeServers.get(r)!;
      usable += this.routeUsers.get(r)!.has(i) && !servers.includes(i) ? '1' : '0';
    }
    const routes = `${this.routeLayout}|${usable}`;
    const ssh = this.ssh.hashFor(i);
    const caps = this.caps.hashFor(i);
    const d = { filter, peers, routes, ssh, caps, all: hash(`${filter}\n${peers}\n${routes}\n${ssh}\n${caps}`) };
    this.digestCache[i] = d;
    return d;
  }

  digestOf(nodeId: number): string {
    return this.viewDigest(nodeId).all;
  }
}

function sortedHas(a: Int32Array, v: number): boolean {
  let lo = 0;
  let hi = a.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (a[mid] === v) return true;
    if (a[mid] < v) lo = mid + 1;
    else hi = mid - 1;
  }
  return false;
}

/**
 * A template rule as text for its hash, in the form instantiate() emits it, so two templates that give a node the
 * same rule have the same key: the SrcIPs list by its own hash; for packets, the own-address entries' ports first,
 * then the other entries in order; for capabilities, the distinct destinations ("*" names the node's own addresses).
 */
function ruleKey(r: RuleTemplate): string {
  const ports = (d: DstTemplate) => d.ports.map((p) => `${p.first}-${p.last}`).join(',');
  let dsts: string;
  if (r.capMap) {
    dsts = [...new Set(r.dsts.map((d) => (d.target.kind === 'literal' ? d.target.cidr : 'own')))].join(' ');
  } else {
    const own = r.dsts.filter((d) => d.target.kind === 'own').map(ports);
    const other = r.dsts.filter((d) => d.target.kind !== 'own').map((d) => `${d.target.kind === 'literal' ? d.target.text : d.target.kind}:${ports(d)}`);
    dsts = `${own.join(' ')}|${other.join(' ')}`;
  }
  const src = 'fixed' in r.src ? r.src.fixed.hash : 'selfOf' in r.src ? 'self' : 'user';
  return `${src};${r.protos?.join(',') ?? ''};${dsts};${r.capMap ? JSON.stringify(r.capMap) : ''}`;
}

/**
 * An order-free hash of a set of node ids: the sum, lane by lane, of two 32-bit mixes of each id. Removing one id
 * from a set's hash is a subtraction, so each node's peer list (its group's list without itself) hashes in O(1).
 */
function idMix(id: number): [number, number] {
  let a = Math.imul(id ^ 0x9e3779b9, 0x85ebca6b);
  a = Math.imul(a ^ (a >>> 13), 0xc2b2ae35);
  let b = Math.imul((id + 0x7f4a7c15) ^ 0x2545f491, 0x27d4eb2f);
  b = Math.imul(b ^ (b >>> 15), 0x165667b1);
  return [(a ^ (a >>> 16)) >>> 0, (b ^ (b >>> 16)) >>> 0];
}

function setHash(ids: Iterable<number>): [number, number] {
  let a = 0;
  let b = 0;
  for (const id of ids) {
    const [x, y] = idMix(id);
    a = (a + x) >>> 0;
    b = (b + y) >>> 0;
  }
  return [a, b];
}

/** The capabilities a grant's destinations get (hse's file-sharing grant becomes the client's file-send capability). */
function mainCaps(caps: Record<string, unknown[] | null>): Record<string, unknown[] | null> {
  const out: Record<string, unknown[] | null> = {};
  for (const [k, v] of Object.entries(caps)) out[capName(k)] = COMPANIONS[k]?.rename ? null : v;
  return out;
}

/** The companion capabilities a grant's sources get, each without values. */
function companionCaps(caps: Record<string, unknown[] | null>): Record<string, unknown[] | null> {
  const out: Record<string, unknown[] | null> = {};
  for (const k of Object.keys(caps)) if (COMPANIONS[k]) out[COMPANIONS[k].companion] = null;
  return out;
}
