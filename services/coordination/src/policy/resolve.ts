// Selectors resolved against the tailnet: which nodes a selector covers, and which addresses a list of sources stands
// for in a FilterRule's SrcIPs. Every distinct selector and source list is resolved once per compilation and shared
// by every rule and node that uses it.
//
// Reference: Tailscale's targets-and-selectors documentation and what its control plane sends (captured in headscale's
// compatibility data): "*" as a source means the tailnet's ranges plus every approved subnet route; a user, group or
// tag means the addresses of its devices; an address or CIDR stands for itself. As a destination or for peer
// visibility, an address or CIDR covers the nodes holding an address in it and the subnet routers whose approved
// routes overlap it; autogroup:internet covers exit nodes.
import { createHash } from 'node:crypto';
import { type Interval, type IPSet, IPSetBuilder, TAILNET_RANGES } from './ip.ts';
import type { Model, Sel } from './model.ts';
import { Bitset, type TailnetIndex } from './tailnet-index.ts';

/** A SrcIPs list, shared by every rule with the same sources, and its hash (so templates hash without re-reading it). */
export interface SrcIPs {
  set: IPSet | null;
  strings: readonly string[];
  hash: string;
}

function srcIPs(set: IPSet | null, strings: string[]): SrcIPs {
  Object.freeze(strings);
  return { set, strings, hash: createHash('sha1').update(strings.join(',')).digest('base64url') };
}

export class Resolver {
  private readonly nodeCache = new Map<string, Bitset>();
  private readonly srcCache = new Map<string, SrcIPs>();
  private readonly groupCache = new Map<string, number[]>();
  private starSet: IPSet | null = null;

  readonly model: Model;
  readonly tn: TailnetIndex;

  constructor(model: Model, tn: TailnetIndex) {
    this.model = model;
    this.tn = tn;
  }

  /** User ids a group stands for: its listed users and the members of its identity-provider groups. */
  groupUsers(name: string): number[] {
    const cached = this.groupCache.get(name);
    if (cached) return cached;
    const g = this.model.groups.get(name);
    const ids = new Set<number>();
    if (g) {
      for (const u of g.users) for (const id of this.model.userIds.get(u) ?? []) ids.add(id);
      for (const idp of g.idp) for (const id of this.tn.idpMembers.get(idp) ?? []) ids.add(id);
    }
    const out = [...ids];
    this.groupCache.set(name, out);
    return out;
  }

  userIdsOf(s: Sel): number[] {
    if (s.sel.kind === 'user') return this.model.userIds.get(s.text) ?? [];
    if (s.sel.kind === 'group') return this.groupUsers(s.sel.name);
    return [];
  }

  /**
   * Nodes a selector covers. Identity selectors cover devices (a user's untagged devices, a tag's devices); an
   * address, CIDR or host covers nodes with an address in it and subnet routers whose routes overlap it.
   * autogroup:self is not a fixed set (it depends on who connects) and covers nothing here.
   */
  nodes(s: Sel): Bitset {
    const key = s.text;
    const cached = this.nodeCache.get(key);
    if (cached) return cached;
    const tn = this.tn;
    let b: Bitset;
    const sel = s.sel;
    switch (sel.kind) {
      case 'all':
        b = tn.all();
        break;
      case 'user':
      case 'group': {
        b = new Bitset(tn.n);
        for (const id of this.userIdsOf(s)) for (const i of tn.untaggedByUser.get(id) ?? []) b.set(i);
        break;
      }
      case 'tag':
        b = Bitset.of(tn.n, tn.byTag.get(sel.name) ?? []);
        break;
      case 'host':
      case 'prefix': {
        const iv = this.interval(s);
        b = new Bitset(tn.n);
        if (iv) {
          tn.nodesIn(iv, b);
          tn.routersOverlapping(iv, b);
        }
        break;
      }
      case 'autogroup':
        switch (sel.name) {
          case 'member':
            b = tn.untagged();
            break;
          case 'tagged':
            b = tn.taggedNodes();
            break;
          case 'internet':
            b = Bitset.of(tn.n, tn.exitNodes);
            break;
          case 'danger-all':
            b = tn.all();
            break;
          default:
            b = new Bitset(tn.n);
        }
        break;
    }
    this.nodeCache.set(key, b);
    return b;
  }

  /** The nodes a selector covers by identity or own address only (no routers): who "is" the selector. */
  devices(s: Sel): Bitset {
    if (s.sel.kind !== 'host' && s.sel.kind !== 'prefix') return this.nodes(s);
    const key = `devices ${s.text}`;
    const cached = this.nodeCache.get(key);
    if (cached) return cached;
    const b = new Bitset(this.tn.n);
    const iv = this.interval(s);
    if (iv) this.tn.nodesIn(iv, b);
    this.nodeCache.set(key, b);
    return b;
  }

  interval(s: Sel): Interval | null {
    if (s.sel.kind === 'prefix') return s.sel.interval;
    if (s.sel.kind === 'host') return this.model.hosts.get(s.sel.name) ?? null;
    return null;
  }

  /** The union of the nodes several selectors cover. */
  union(sels: readonly Sel[], pick: (s: Sel) => Bitset = (s) => this.nodes(s)): Bitset {
    if (sels.length === 1) return pick(sels[0]);
    const b = new Bitset(this.tn.n);
    for (const s of sels) b.or(pick(s));
    return b;
  }

  /** What "*" admits as a source: the tailnet's ranges and every approved subnet route. */
  star(): IPSet {
    if (!this.starSet) {
      const b = new IPSetBuilder();
      for (const iv of TAILNET_RANGES) b.add(iv);
      for (const i of this.tn.routers) for (const r of this.tn.subnetRoutes[i]) b.add(r);
      this.starSet = b.build();
    }
    return this.starSet;
  }

  /** Adds the own addresses of the nodes in b. */
  addNodeAddresses(builder: IPSetBuilder, b: Bitset | Iterable<number>): void {
    const tn = this.tn;
    const list = b instanceof Bitset ? b.toArray() : b;
    for (const i of list) {
      const a = tn.v4[i];
      if (!Number.isNaN(a)) builder.addV4(a);
      const v = tn.v6[i];
      if (v !== null) builder.addV6(v);
    }
  }

  /**
   * A source list as SrcIPs: merged, as few entries as possible. ["*"] only for autogroup:danger-all (everything,
   * inside the tailnet or not); "*" itself stands for the tailnet and its approved routes, as Tailscale sends it.
   */
  srcStrings(sels: readonly Sel[]): SrcIPs {
    const key = sels.map((s) => s.text).join('\n');
    const cached = this.srcCache.get(key);
    if (cached) return cached;
    let result: SrcIPs;
    if (sels.some((s) => s.sel.kind === 'autogroup' && s.sel.name === 'danger-all')) {
      result = srcIPs(null, ['*']);
    } else {
      const b = new IPSetBuilder();
      const identity: Sel[] = [];
      for (const s of sels) {
        if (s.sel.kind === 'all') b.addSet(this.star());
        else if (s.sel.kind === 'host' || s.sel.kind === 'prefix') {
          const iv = this.interval(s);
          if (iv) b.add(iv);
        } else identity.push(s);
      }
      if (identity.length > 0) this.addNodeAddresses(b, this.union(identity));
      const set = b.build();
      result = srcIPs(set, set.toStrings());
    }
    this.srcCache.set(key, result);
    return result;
  }

  /** SrcIPs for the given nodes only (autogroup:self: the sources that are the destination's own user's devices). */
  nodeStrings(key: string, nodes: Iterable<number>): SrcIPs {
    const cached = this.srcCache.get(key);
    if (cached) return cached;
    const b = new IPSetBuilder();
    this.addNodeAddresses(b, nodes);
    const set = b.build();
    const result = srcIPs(set, set.toStrings());
    this.srcCache.set(key, result);
    return result;
  }
}
