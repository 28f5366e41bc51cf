// Addresses, prefixes and address sets, in the forms a Tailscale client's packet filter reads (wgengine/filter
// parseIPSet): "*", a single address, a CIDR, or an inclusive range "a-b". IPv4 addresses are plain numbers
// (0 … 2^32-1) so the common case stays fast; IPv6 addresses are bigints. Parsing of the text forms is ipaddr.js's.
//
// Reference: tailscale tailcfg.FilterRule (SrcIPs forms), net/tsaddr (the tailnet ranges), and the ranges Tailscale's
// control plane sends for "*" and autogroup:internet (observed in captures published with headscale's compatibility
// tests). hse prints a merged set as few entries as it can: an address, else a CIDR, else a range.
import ipaddr from 'ipaddr.js';

export type Family = 4 | 6;

/** An inclusive address interval of one family. */
export interface Interval {
  family: Family;
  lo: bigint;
  hi: bigint;
}

export const V4_MAX = 0xffffffff;
const V6_MAX = (1n << 128n) - 1n;

/** IPv4 dotted quad → number, or null (four decimal parts 0-255, no leading zeros, no shorthand). */
export function parseV4(s: string): number | null {
  let n = 0;
  let part = 0;
  let digits = 0;
  let dots = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 48 && c <= 57) {
      if (digits > 0 && part === 0) return null; // leading zero
      part = part * 10 + (c - 48);
      if (++digits > 3 || part > 255) return null;
    } else if (c === 46) {
      if (digits === 0 || ++dots > 3) return null;
      n = n * 256 + part;
      part = 0;
      digits = 0;
    } else return null;
  }
  if (dots !== 3 || digits === 0) return null;
  return n * 256 + part;
}

const HEX = /^[0-9a-fA-F]{1,4}$/;

/**
 * IPv6 text → bigint, or null. The usual forms ("fd7a:115c:a1e0::1", full eight groups) are parsed here, quickly,
 * because every node address is; forms with an embedded IPv4 address go to ipaddr.js. Zones ("%eth0") are refused.
 */
export function parseV6(s: string): bigint | null {
  if (!s.includes(':') || s.includes('%')) return null;
  if (s.includes('.')) {
    if (!ipaddr.IPv6.isValid(s)) return null;
    let n = 0n;
    for (const part of ipaddr.IPv6.parse(s).parts) n = (n << 16n) | BigInt(part);
    return n;
  }
  const dc = s.indexOf('::');
  let groups: string[];
  if (dc >= 0) {
    if (s.indexOf('::', dc + 1) >= 0) return null;
    const head = dc === 0 ? [] : s.slice(0, dc).split(':');
    const tail = dc + 2 === s.length ? [] : s.slice(dc + 2).split(':');
    if (head.length + tail.length > 7) return null;
    groups = [...head, ...new Array(8 - head.length - tail.length).fill('0'), ...tail];
  } else {
    groups = s.split(':');
    if (groups.length !== 8) return null;
  }
  let hex = '';
  for (const g of groups) {
    if (!HEX.test(g)) return null;
    hex += g.padStart(4, '0');
  }
  return BigInt(`0x${hex}`);
}

/** Either family's address as an interval of one address, or null. */
export function parseAddr(s: string): Interval | null {
  const v4 = parseV4(s);
  if (v4 !== null) return { family: 4, lo: BigInt(v4), hi: BigInt(v4) };
  const v6 = parseV6(s);
  if (v6 !== null) return { family: 6, lo: v6, hi: v6 };
  return null;
}

export type PrefixParse = { ok: true; interval: Interval; bits: number } | { ok: false; reason: string };

/** "a.b.c.d/n" or "x::/n" → interval. Host bits set ("10.0.0.1/8") are refused: usually a typo for another prefix. */
export function parsePrefix(s: string): PrefixParse {
  const slash = s.indexOf('/');
  if (slash < 0) return { ok: false, reason: 'not a prefix' };
  const addr = parseAddr(s.slice(0, slash));
  const bitsText = s.slice(slash + 1);
  if (!addr) return { ok: false, reason: `${s.slice(0, slash)} is not an IP address` };
  const width = addr.family === 4 ? 32 : 128;
  if (!/^\d{1,3}$/.test(bitsText) || Number(bitsText) > width) return { ok: false, reason: `/${bitsText} is not a prefix length for IPv${addr.family}` };
  const bits = Number(bitsText);
  const hostMask = (1n << BigInt(width - bits)) - 1n;
  if ((addr.lo & hostMask) !== 0n) {
    return { ok: false, reason: `${s} has bits set after the first ${bits}; the network is ${formatAddr(addr.family, addr.lo & ~hostMask)}/${bits}` };
  }
  return { ok: true, interval: { family: addr.family, lo: addr.lo, hi: addr.lo | hostMask }, bits };
}

export function formatV4(n: number | bigint): string {
  const v = Number(n);
  return `${Math.floor(v / 16777216) % 256}.${Math.floor(v / 65536) % 256}.${Math.floor(v / 256) % 256}.${v % 256}`;
}

/** RFC 5952 text: lower case, the longest run of two or more zero groups as "::". */
export function formatV6(n: bigint): string {
  const hex = n.toString(16).padStart(32, '0');
  const groups: string[] = [];
  for (let i = 0; i < 32; i += 4) {
    let k = i;
    while (k < i + 3 && hex.charCodeAt(k) === 48) k++;
    groups.push(hex.slice(k, i + 4));
  }
  let bestStart = -1;
  let bestLen = 1;
  for (let i = 0; i < 8; ) {
    if (groups[i] !== '0') {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === '0') j++;
    if (j - i > bestLen) {
      bestStart = i;
      bestLen = j - i;
    }
    i = j;
  }
  if (bestStart < 0) return groups.join(':');
  return `${groups.slice(0, bestStart).join(':')}::${groups.slice(bestStart + bestLen).join(':')}`;
}

export function formatAddr(family: Family, n: bigint): string {
  return family === 4 ? formatV4(n) : formatV6(n);
}

/** The prefix length when [lo, hi] is exactly one CIDR block, else -1. */
function prefixBits(family: Family, lo: bigint, hi: bigint): number {
  const size = hi - lo + 1n;
  if ((size & (size - 1n)) !== 0n || lo % size !== 0n) return -1;
  let host = 0;
  while (1n << BigInt(host) < size) host++;
  return (family === 4 ? 32 : 128) - host;
}

/** One interval as a client reads it: "1.2.3.4", "10.0.0.0/8", or "1.2.3.4-1.2.3.9". */
export function formatInterval(iv: Interval): string {
  if (iv.lo === iv.hi) return formatAddr(iv.family, iv.lo);
  const bits = prefixBits(iv.family, iv.lo, iv.hi);
  if (bits >= 0) return `${formatAddr(iv.family, iv.lo)}/${bits}`;
  return `${formatAddr(iv.family, iv.lo)}-${formatAddr(iv.family, iv.hi)}`;
}

export function overlaps(a: Interval, b: Interval): boolean {
  return a.family === b.family && a.lo <= b.hi && b.lo <= a.hi;
}

/** True when b lies inside a. */
export function covers(a: Interval, b: Interval): boolean {
  return a.family === b.family && a.lo <= b.lo && b.hi <= a.hi;
}

export function isExitRoute(iv: Interval): boolean {
  return iv.lo === 0n && iv.hi === (iv.family === 4 ? BigInt(V4_MAX) : V6_MAX);
}

function v4(a: string, b: string): Interval {
  return { family: 4, lo: BigInt(parseV4(a)!), hi: BigInt(parseV4(b)!) };
}

/**
 * What "*" admits as a source: the tailnet's own ranges (100.64.0.0/10 without ChromeOS's 100.115.92.0/23, which
 * clients never use, and fd7a:115c:a1e0::/48). The approved subnet routes are added by the compiler.
 */
export const TAILNET_RANGES: readonly Interval[] = [
  v4('100.64.0.0', '100.115.91.255'),
  v4('100.115.94.0', '100.127.255.255'),
  { family: 6, lo: parseV6('fd7a:115c:a1e0::')!, hi: parseV6('fd7a:115c:a1e0:ffff:ffff:ffff:ffff:ffff')! },
];

/**
 * autogroup:internet: every public address an exit node forwards to — IPv4 without 10/8, 100.64/10 (the tailnet),
 * 169.254/16, 172.16/12 and 192.168/16, and global unicast IPv6 (2000::/3). The same ranges Tailscale sends.
 */
export const INTERNET_RANGES: readonly Interval[] = [
  v4('0.0.0.0', '9.255.255.255'),
  v4('11.0.0.0', '100.63.255.255'),
  v4('100.128.0.0', '169.253.255.255'),
  v4('169.255.0.0', '172.15.255.255'),
  v4('172.32.0.0', '192.167.255.255'),
  v4('192.169.0.0', '255.255.255.255'),
  { family: 6, lo: parseV6('2000::')!, hi: parseV6('3fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff')! },
];

/**
 * A set of addresses of both families, merged into sorted, disjoint, non-adjacent intervals. IPv4 intervals are kept
 * as numbers (pairs in one flat array) because node address sets are built and merged for every rule.
 */
export class IPSet {
  /** [lo0, hi0, lo1, hi1, …], sorted, disjoint, non-adjacent. */
  readonly v4: readonly number[];
  readonly v6: readonly (readonly [bigint, bigint])[];

  constructor(v4: number[], v6: [bigint, bigint][]) {
    this.v4 = v4;
    this.v6 = v6;
  }

  get empty(): boolean {
    return this.v4.length === 0 && this.v6.length === 0;
  }

  has4(n: number): boolean {
    const a = this.v4;
    let lo = 0;
    let hi = a.length / 2 - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (n < a[mid * 2]) hi = mid - 1;
      else if (n > a[mid * 2 + 1]) lo = mid + 1;
      else return true;
    }
    return false;
  }

  has6(n: bigint): boolean {
    for (const [lo, hi] of this.v6) if (n >= lo && n <= hi) return true;
    return false;
  }

  has(family: Family, n: bigint): boolean {
    return family === 4 ? this.has4(Number(n)) : this.has6(n);
  }

  overlaps(iv: Interval): boolean {
    if (iv.family === 6) {
      for (const [lo, hi] of this.v6) if (lo <= iv.hi && iv.lo <= hi) return true;
      return false;
    }
    const l = Number(iv.lo);
    const h = Number(iv.hi);
    for (let i = 0; i < this.v4.length; i += 2) if (this.v4[i] <= h && l <= this.v4[i + 1]) return true;
    return false;
  }

  intervals(): Interval[] {
    const out: Interval[] = [];
    for (let i = 0; i < this.v4.length; i += 2) out.push({ family: 4, lo: BigInt(this.v4[i]), hi: BigInt(this.v4[i + 1]) });
    for (const [lo, hi] of this.v6) out.push({ family: 6, lo, hi });
    return out;
  }

  /** The set as SrcIPs / NetPortRange.IP strings: IPv4 first, each interval as an address, CIDR or range. */
  toStrings(): string[] {
    const out: string[] = [];
    for (let i = 0; i < this.v4.length; i += 2) out.push(formatInterval({ family: 4, lo: BigInt(this.v4[i]), hi: BigInt(this.v4[i + 1]) }));
    for (const [lo, hi] of this.v6) out.push(formatInterval({ family: 6, lo, hi }));
    return out;
  }
}

/** Collects addresses and intervals, then sorts and merges them once. */
export class IPSetBuilder {
  private v4: number[] = [];
  private v6: [bigint, bigint][] = [];

  addV4(lo: number, hi = lo): this {
    this.v4.push(lo, hi);
    return this;
  }

  addV6(lo: bigint, hi = lo): this {
    this.v6.push([lo, hi]);
    return this;
  }

  add(iv: Interval): this {
    if (iv.family === 4) this.v4.push(Number(iv.lo), Number(iv.hi));
    else this.v6.push([iv.lo, iv.hi]);
    return this;
  }

  addSet(s: IPSet): this {
    for (const n of s.v4) this.v4.push(n);
    for (const p of s.v6) this.v6.push([p[0], p[1]]);
    return this;
  }

  build(): IPSet {
    return new IPSet(mergeV4(this.v4), mergeV6(this.v6));
  }
}

function mergeV4(flat: number[]): number[] {
  const n = flat.length / 2;
  if (n === 0) return [];
  // Sort interval indices by start; single addresses dominate, so a typed array of starts keeps this quick.
  const order = new Uint32Array(n);
  for (let i = 0; i < n; i++) order[i] = i;
  order.sort((a, b) => flat[a * 2] - flat[b * 2] || flat[a * 2 + 1] - flat[b * 2 + 1]);
  const out: number[] = [];
  let curLo = flat[order[0] * 2];
  let curHi = flat[order[0] * 2 + 1];
  for (let k = 1; k < n; k++) {
    const lo = flat[order[k] * 2];
    const hi = flat[order[k] * 2 + 1];
    if (lo <= curHi + 1) {
      if (hi > curHi) curHi = hi;
    } else {
      out.push(curLo, curHi);
      curLo = lo;
      curHi = hi;
    }
  }
  out.push(curLo, curHi);
  return out;
}

function mergeV6(list: [bigint, bigint][]): [bigint, bigint][] {
  if (list.length === 0) return [];
  list.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  const out: [bigint, bigint][] = [];
  let [curLo, curHi] = list[0];
  for (let k = 1; k < list.length; k++) {
    const [lo, hi] = list[k];
    if (lo <= curHi + 1n) {
      if (hi > curHi) curHi = hi;
    } else {
      out.push([curLo, curHi]);
      curLo = lo;
      curHi = hi;
    }
  }
  out.push([curLo, curHi]);
  return out;
}

/**
 * Parses one SrcIPs / NetPortRange.IP entry the way wgengine/filter's parseIPSet does: "*" (both families, everything),
 * a CIDR (no host bits), "a-b" (one hyphen, same family, a ≤ b) or a single address. Null when the client would reject it.
 */
export function parseFilterEntry(s: string): Interval[] | null {
  if (s === '*')
    return [
      { family: 4, lo: 0n, hi: BigInt(V4_MAX) },
      { family: 6, lo: 0n, hi: V6_MAX },
    ];
  if (s.includes('/')) {
    const p = parsePrefix(s);
    return p.ok ? [p.interval] : null;
  }
  if (s.split('-').length === 2) {
    const [a, b] = s.split('-');
    const x = parseAddr(a);
    const y = parseAddr(b);
    if (!x || !y || x.family !== y.family || x.lo > y.lo) return null;
    return [{ family: x.family, lo: x.lo, hi: y.lo }];
  }
  const a = parseAddr(s);
  return a ? [a] : null;
}
