// The tailnet snapshot indexed for the compiler: nodes numbered 0…N-1 in ascending id order (so a sorted list of
// indices is also a sorted list of ids), parsed addresses, who owns what, and which nodes route which prefixes.
// Node sets are bitsets over those indices: one bit per node, so a set of 10,000 nodes is 1.25 KB and unions are
// word-wise ORs.
import { type Interval, isExitRoute, parsePrefix, parseV4, parseV6 } from './ip.ts';
import type { TailnetNode, TailnetSnapshot, TailnetUser } from './types.ts';

export class Bitset {
  readonly words: Uint32Array;
  readonly size: number;

  constructor(size: number) {
    this.size = size;
    this.words = new Uint32Array((size + 31) >>> 5);
  }

  static all(size: number): Bitset {
    const b = new Bitset(size);
    b.words.fill(0xffffffff);
    const extra = b.words.length * 32 - size;
    if (extra > 0) b.words[b.words.length - 1] = 0xffffffff >>> extra;
    return b;
  }

  static of(size: number, indices: Iterable<number>): Bitset {
    const b = new Bitset(size);
    for (const i of indices) b.set(i);
    return b;
  }

  set(i: number): void {
    this.words[i >>> 5] |= 1 << (i & 31);
  }

  has(i: number): boolean {
    return (this.words[i >>> 5] & (1 << (i & 31))) !== 0;
  }

  or(other: Bitset): this {
    const w = this.words;
    const o = other.words;
    for (let k = 0; k < w.length; k++) w[k] |= o[k];
    return this;
  }

  and(other: Bitset): this {
    const w = this.words;
    const o = other.words;
    for (let k = 0; k < w.length; k++) w[k] &= o[k];
    return this;
  }

  clone(): Bitset {
    const b = new Bitset(this.size);
    b.words.set(this.words);
    return b;
  }

  isEmpty(): boolean {
    for (const w of this.words) if (w !== 0) return false;
    return true;
  }

  /** Set bits in ascending order. */
  toArray(): Int32Array {
    let count = 0;
    for (const w of this.words) count += popcount(w);
    const out = new Int32Array(count);
    let n = 0;
    const words = this.words;
    for (let k = 0; k < words.length; k++) {
      let w = words[k];
      while (w !== 0) {
        const t = w & -w;
        out[n++] = (k << 5) + 31 - Math.clz32(t);
        w ^= t;
      }
    }
    return out;
  }
}

function popcount(x: number): number {
  let v = x - ((x >>> 1) & 0x55555555);
  v = (v & 0x33333333) + ((v >>> 2) & 0x33333333);
  return (((v + (v >>> 4)) & 0x0f0f0f0f) * 0x01010101) >>> 24;
}

/**
 * Node addresses parsed before: a tailnet is compiled again after every change, with mostly the same nodes, and
 * IPv6 text → bigint is the costly part of indexing. Bounded: cleared when it outgrows any plausible tailnet.
 */
const v6Cache = new Map<string, bigint | null>();

function nodeV6(s: string): bigint | null {
  let v = v6Cache.get(s);
  if (v === undefined) {
    if (v6Cache.size > 200_000) v6Cache.clear();
    v = parseV6(s);
    v6Cache.set(s, v);
  }
  return v;
}

export class TailnetIndex {
  readonly n: number;
  readonly nodes: readonly TailnetNode[];
  readonly indexOf = new Map<number, number>();
  /** IPv4 as a number, NaN when the node has none. */
  readonly v4: Float64Array;
  readonly v6: (bigint | null)[];
  /** Canonical address text ("" when absent). */
  readonly v4Text: string[];
  readonly v6Text: string[];
  readonly tagged: Uint8Array;
  readonly users = new Map<number, TailnetUser>();
  /** user id → indices of the user's untagged nodes. */
  readonly untaggedByUser = new Map<number, number[]>();
  readonly byTag = new Map<string, number[]>();
  /** idp group name → user ids. */
  readonly idpMembers = new Map<string, number[]>();
  /** Approved non-exit routes of each node (empty for most). */
  readonly subnetRoutes: Interval[][];
  /** Their text, canonical, in the same order. */
  readonly subnetRouteText: string[][];
  /** Nodes with an approved exit route (0.0.0.0/0 or ::/0), and which of the two each has. */
  readonly exitRoutes: string[][];
  readonly routers: number[] = [];
  readonly exitNodes: number[] = [];
  /** [v4, index] sorted by address: finds the nodes inside a CIDR without a scan of every node. */
  private readonly byV4: Float64Array;
  private readonly byV4Index: Int32Array;
  private allBits: Bitset | null = null;
  private untaggedBits: Bitset | null = null;
  private taggedBits: Bitset | null = null;

  constructor(snapshot: TailnetSnapshot) {
    const nodes = [...snapshot.nodes].sort((a, b) => a.id - b.id);
    this.nodes = nodes;
    const n = nodes.length;
    this.n = n;
    this.v4 = new Float64Array(n);
    this.v6 = new Array(n);
    this.v4Text = new Array(n);
    this.v6Text = new Array(n);
    this.tagged = new Uint8Array(n);
    this.subnetRoutes = new Array(n);
    this.subnetRouteText = new Array(n);
    this.exitRoutes = new Array(n);
    for (const u of snapshot.users) {
      this.users.set(u.id, u);
      for (const g of u.idpGroups) {
        const list = this.idpMembers.get(g) ?? [];
        list.push(u.id);
        this.idpMembers.set(g, list);
      }
    }
    const order: number[] = [];
    for (let i = 0; i < n; i++) {
      const node = nodes[i];
      this.indexOf.set(node.id, i);
      const a4 = node.ipv4 ? parseV4(node.ipv4) : null;
      const a6 = node.ipv6 ? nodeV6(node.ipv6) : null;
      this.v4[i] = a4 ?? Number.NaN;
      this.v6[i] = a6;
      this.v4Text[i] = a4 === null ? '' : node.ipv4;
      this.v6Text[i] = a6 === null ? '' : node.ipv6;
      if (a4 !== null) order.push(i);
      if (node.tags.length > 0) {
        this.tagged[i] = 1;
        for (const t of node.tags.length === 1 ? node.tags : new Set(node.tags)) {
          const list = this.byTag.get(t) ?? [];
          list.push(i);
          this.byTag.set(t, list);
        }
      } else {
        const list = this.untaggedByUser.get(node.userId) ?? [];
        list.push(i);
        this.untaggedByUser.set(node.userId, list);
      }
      const subnets: Interval[] = [];
      const subnetText: string[] = [];
      const exits: string[] = [];
      for (const r of node.approvedRoutes) {
        const p = parsePrefix(r);
        if (!p.ok) continue;
        if (isExitRoute(p.interval)) exits.push(r);
        else {
          subnets.push(p.interval);
          subnetText.push(r);
        }
      }
      this.subnetRoutes[i] = subnets;
      this.subnetRouteText[i] = subnetText;
      this.exitRoutes[i] = exits;
      if (subnets.length > 0) this.routers.push(i);
      if (exits.length > 0) this.exitNodes.push(i);
    }
    order.sort((a, b) => this.v4[a] - this.v4[b]);
    this.byV4 = new Float64Array(order.map((i) => this.v4[i]));
    this.byV4Index = Int32Array.from(order);
  }

  all(): Bitset {
    this.allBits ??= Bitset.all(this.n);
    return this.allBits;
  }

  untagged(): Bitset {
    if (!this.untaggedBits) {
      const b = new Bitset(this.n);
      for (let i = 0; i < this.n; i++) if (!this.tagged[i]) b.set(i);
      this.untaggedBits = b;
    }
    return this.untaggedBits;
  }

  taggedNodes(): Bitset {
    if (!this.taggedBits) {
      const b = new Bitset(this.n);
      for (let i = 0; i < this.n; i++) if (this.tagged[i]) b.set(i);
      this.taggedBits = b;
    }
    return this.taggedBits;
  }

  /** Nodes one of whose own addresses lies in iv. */
  nodesIn(iv: Interval, into: Bitset): void {
    if (iv.family === 4) {
      const lo = Number(iv.lo);
      const hi = Number(iv.hi);
      const a = this.byV4;
      let l = 0;
      let h = a.length;
      while (l < h) {
        const m = (l + h) >> 1;
        if (a[m] < lo) l = m + 1;
        else h = m;
      }
      for (let k = l; k < a.length && a[k] <= hi; k++) into.set(this.byV4Index[k]);
      return;
    }
    for (let i = 0; i < this.n; i++) {
      const v = this.v6[i];
      if (v !== null && v >= iv.lo && v <= iv.hi) into.set(i);
    }
  }

  /** Routers with an approved subnet route overlapping iv. */
  routersOverlapping(iv: Interval, into: Bitset): void {
    for (const i of this.routers) {
      for (const r of this.subnetRoutes[i]) {
        if (r.family === iv.family && r.lo <= iv.hi && iv.lo <= r.hi) {
          into.set(i);
          break;
        }
      }
    }
  }

  /** Does any own address of node i lie in iv? */
  nodeIn(i: number, iv: Interval): boolean {
    if (iv.family === 4) {
      const v = this.v4[i];
      return !Number.isNaN(v) && v >= Number(iv.lo) && v <= Number(iv.hi);
    }
    const v = this.v6[i];
    return v !== null && v >= iv.lo && v <= iv.hi;
  }
}
