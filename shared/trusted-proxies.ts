// Parsing and matching of HSE_TRUSTED_PROXIES. Addresses are compared after normalisation: an IPv4-mapped IPv6
// address (::ffff:a.b.c.d) is the IPv4 address it carries, so a mapped peer and a plain one match the same entry.
import ipaddr from 'ipaddr.js';

export type Address = ipaddr.IPv4 | ipaddr.IPv6;

export interface TrustedRange {
  /** As the operator wrote it, for messages. */
  source: string;
  /** What it matches. Usually one range; an IPv6 range that holds ::ffff:0:0/96 also matches every IPv4 address. */
  ranges: [Address, number][];
  /** Number of host bits left open in the widest range: 0 means a single host. */
  hostBits: number;
  /** Set when the entry lets every address of a family through. */
  coversAll: 'IPv4' | 'IPv6' | null;
}

export class TrustedProxyError extends Error {}

/** Parses one address; returns null for anything that is not an IPv4/IPv6 literal. Mapped IPv6 becomes IPv4. */
export function parseAddress(text: string): Address | null {
  let s = text.trim();
  if (s.startsWith('[') && s.endsWith(']')) s = s.slice(1, -1);
  // Zone ids (fe80::1%eth0) name an interface, not an address a proxy could hand us; refuse them.
  if (s === '' || s.includes('%')) return null;
  if (!ipaddr.isValid(s)) return null;
  // ipaddr.js accepts legacy IPv4 spellings such as "10" or "0x7f.1"; a header value like that is garbage to us.
  if (!s.includes(':') && !ipaddr.IPv4.isValidFourPartDecimal(s)) return null;
  return normalise(ipaddr.parse(s));
}

export function normalise(addr: Address): Address {
  if (addr.kind() === 'ipv6' && (addr as ipaddr.IPv6).isIPv4MappedAddress()) return (addr as ipaddr.IPv6).toIPv4Address();
  return addr;
}

/** The text form used everywhere the address is shown or stored. */
export function formatAddress(addr: Address): string {
  return addr.toString();
}

const MAPPED_PREFIX = ipaddr.IPv6.parse('::ffff:0:0');

/**
 * Parses one list entry: a bare address (a single host) or a CIDR. A range inside ::ffff:0:0/96 is turned into the
 * IPv4 range it denotes so that it matches normalised peers.
 */
export function parseEntry(entry: string): TrustedRange {
  const text = entry.trim();
  let range: [Address, number];
  let alsoAllV4 = false;
  if (text.includes('/')) {
    const parts = text.split('/');
    if (parts.length !== 2) throw new TrustedProxyError(`"${entry}" is not an IP address or CIDR`);
    const [addrText, bitsText] = parts;
    const addr = parseAddress(addrText);
    if (!/^\d{1,3}$/.test(bitsText) || addr === null) throw new TrustedProxyError(`"${entry}" is not an IP address or CIDR`);
    const bits = Number(bitsText);
    // parseAddress already turned a mapped address into IPv4; recover which family the operator wrote.
    const wroteV6 = addrText.includes(':');
    if (wroteV6) {
      if (bits > 128) throw new TrustedProxyError(`"${entry}" has a prefix longer than 128 bits`);
      const v6 = ipaddr.IPv6.parse(addrText.replace(/^\[|\]$/g, ''));
      if (bits >= 96 && v6.match(MAPPED_PREFIX, 96)) {
        range = [v6.toIPv4Address(), bits - 96];
      } else {
        range = [v6, bits];
        // A range this wide holds every IPv4-mapped address, i.e. every IPv4 client once peers are normalised.
        alsoAllV4 = bits < 96 && MAPPED_PREFIX.match(v6, bits);
      }
    } else {
      if (bits > 32) throw new TrustedProxyError(`"${entry}" has a prefix longer than 32 bits`);
      range = [addr, bits];
    }
  } else {
    const addr = parseAddress(text);
    if (addr === null) throw new TrustedProxyError(`"${entry}" is not an IP address or CIDR`);
    range = [addr, addr.kind() === 'ipv4' ? 32 : 128];
  }
  const width = range[0].kind() === 'ipv4' ? 32 : 128;
  const ranges: [Address, number][] = [range];
  if (alsoAllV4) ranges.push([ipaddr.IPv4.parse('0.0.0.0'), 0]);
  let coversAll: TrustedRange['coversAll'] = null;
  if (range[1] === 0) coversAll = width === 32 ? 'IPv4' : 'IPv6';
  else if (alsoAllV4) coversAll = 'IPv4';
  return { source: text, ranges, hostBits: width - range[1], coversAll };
}

function toBigInt(addr: Address): bigint {
  let n = 0n;
  for (const b of addr.toByteArray()) n = (n << 8n) | BigInt(b);
  return n;
}

/**
 * The families that the entries together trust entirely: several narrower entries can add up to 0.0.0.0/0
 * ("0.0.0.0/1, 128.0.0.0/1"), which is the same mistake as writing it. Ranges are merged as integer intervals.
 */
export function familiesCoveredTogether(entries: TrustedRange[]): ('IPv4' | 'IPv6')[] {
  const out: ('IPv4' | 'IPv6')[] = [];
  for (const [family, kind, width] of [
    ['IPv4', 'ipv4', 32],
    ['IPv6', 'ipv6', 128],
  ] as const) {
    const intervals: [bigint, bigint][] = [];
    for (const e of entries) {
      for (const [addr, bits] of e.ranges) {
        if (addr.kind() !== kind) continue;
        const size = 1n << BigInt(width - bits);
        const start = (toBigInt(addr) / size) * size;
        intervals.push([start, start + size]);
      }
    }
    intervals.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
    let reach = 0n;
    for (const [start, end] of intervals) {
      if (start > reach) break;
      if (end > reach) reach = end;
    }
    if (reach === 1n << BigInt(width)) out.push(family);
  }
  return out;
}

export function splitList(value: string): string[] {
  return value.split(/[\s,]+/).filter((s) => s !== '');
}

export class TrustedProxies {
  readonly ranges: TrustedRange[];
  constructor(ranges: TrustedRange[]) {
    this.ranges = ranges;
  }
  get empty(): boolean {
    return this.ranges.length === 0;
  }
  /** `addr` must already be normalised (parseAddress/normalise do that). */
  has(addr: Address): boolean {
    for (const r of this.ranges) {
      for (const range of r.ranges) {
        if (range[0].kind() === addr.kind() && addr.match(range as never)) return true;
      }
    }
    return false;
  }
}
