// Tailnet addresses. IPv4 comes from 100.64.0.0/10 (CGNAT, as Tailscale uses), handed out in order from a counter and
// claimed with HSETNX so that two registrations racing (in one process or across instances) can never get the same
// address. The IPv6 address is derived from the IPv4 one inside fd7a:115c:a1e0::/48, so it is unique whenever the IPv4
// address is.
import ipaddr from 'ipaddr.js';

const V4_BASE = ipv4ToInt('100.64.0.0');
const V4_SIZE = 1 << 22; // /10

/** Addresses Tailscale clients treat specially and that must never be given to a node. */
const RESERVED: [number, number][] = [
  // 100.100.100.0/24: quad-100 (MagicDNS resolver, 100.100.100.100) and its neighbours.
  [ipv4ToInt('100.100.100.0'), ipv4ToInt('100.100.100.255')],
  // 100.115.92.0/23: ChromeOS's internal ARC network; Tailscale avoids it.
  [ipv4ToInt('100.115.92.0'), ipv4ToInt('100.115.93.255')],
];

export function ipv4ToInt(s: string): number {
  return ipaddr.IPv4.parse(s).octets.reduce((a, b) => a * 256 + b, 0);
}

export function intToIpv4(n: number): string {
  return [24, 16, 8, 0].map((s) => Math.floor(n / 2 ** s) % 256).join('.');
}

/** The candidate IPv4 address for the n-th allocation (n counts from 1), skipping network/broadcast-like and reserved ones. */
export function candidateV4(counter: number): string | null {
  // Offsets 1 .. V4_SIZE-2; wrap around so freed addresses are eventually reused.
  const offset = ((counter - 1) % (V4_SIZE - 2)) + 1;
  const n = V4_BASE + offset;
  const lastOctet = n % 256;
  if (lastOctet === 0 || lastOctet === 255) return null;
  for (const [lo, hi] of RESERVED) if (n >= lo && n <= hi) return null;
  return intToIpv4(n);
}

/** fd7a:115c:a1e0::<offset of the IPv4 address in 100.64.0.0/10, as two hex groups>. */
export function v6For(v4: string): string {
  const offset = ipv4ToInt(v4) - V4_BASE;
  const hi = Math.floor(offset / 65536);
  const lo = offset % 65536;
  return ipaddr.IPv6.parse(`fd7a:115c:a1e0::${hi.toString(16)}:${lo.toString(16)}`).toString();
}
