// The one decision about who the client is. Everything downstream (activity log, sign-in rate limit) sees only the
// address this returns, so it must never believe a header from someone the operator did not name as a proxy.
//
// Rule (the design's "trusted client address", docs/architecture.md):
//   - the TCP peer is not a trusted proxy  -> the peer is the client; every forwarding header is ignored;
//   - the peer is trusted                  -> walk X-Forwarded-For (all header lines, comma-joined) from the right,
//                                             skipping trusted addresses; the first untrusted one is the client;
//                                             if every entry is trusted, the leftmost is;
//   - a malformed entry stops the walk     -> the address to its right (the last one believed) is the client;
//   - a connection on HSE_LISTEN_SOCKET    -> the peer is the proxy, trusted by who may open the socket (below).
// IPv4-mapped IPv6 (::ffff:a.b.c.d) is the IPv4 address it carries, both for matching and in the result.
//
// Why right to left: each proxy appends the address it received the request from, so only the right end of the list
// was written by proxies we trust; anything to the left of the first untrusted hop is whatever that hop claimed.
import { formatAddress, parseAddress, type Address, type TrustedProxies } from '../../shared/trusted-proxies.ts';

/**
 * `peer` is the socket's remote address as Node reports it (a dual-stack listener shows IPv4 peers as ::ffff:a.b.c.d);
 * `forwardedFor` holds every X-Forwarded-For header line in arrival order (req.headersDistinct gives exactly that).
 * Returns the client address in canonical text form, or null when the peer itself is not an address (the socket
 * is already gone), which the caller treats as a dead connection.
 */
export function resolveClientAddress(peer: string | undefined, forwardedFor: readonly string[] | undefined, trusted: TrustedProxies): string | null {
  const peerAddr = peer === undefined ? null : parseAddress(peer);
  if (peerAddr === null) return null;
  if (!trusted.has(peerAddr) || forwardedFor === undefined || forwardedFor.length === 0) return formatAddress(peerAddr);
  return formatAddress(walk(forwardedFor, trusted) ?? peerAddr);
}

/**
 * A connection on the router's own Unix socket (HSE_LISTEN_SOCKET): only the proxy can open it (its owner, group and
 * mode say who), so the peer is the proxy and is trusted like an address in HSE_TRUSTED_PROXIES — the same walk from
 * the right, with HSE_TRUSTED_PROXIES naming any further proxies in front of it. A socket peer has no address of its
 * own to fall back on: without X-Forwarded-For (a local health check), or with a malformed last entry, the client is
 * unknown, "".
 */
export function resolveClientBehindSocket(forwardedFor: readonly string[] | undefined, trusted: TrustedProxies): string {
  if (forwardedFor === undefined || forwardedFor.length === 0) return '';
  const client = walk(forwardedFor, trusted);
  return client === null ? '' : formatAddress(client);
}

/** The walk from the right; null when even the rightmost entry is not an address. */
function walk(forwardedFor: readonly string[], trusted: TrustedProxies): Address | null {
  const entries = forwardedFor.join(',').split(',');
  let client: Address | null = null;
  for (let i = entries.length - 1; i >= 0; i--) {
    const addr = parseAddress(entries[i]);
    if (addr === null) break;
    client = addr;
    if (!trusted.has(addr)) break;
  }
  return client;
}
