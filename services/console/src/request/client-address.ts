// The client's address as the router resolved it (docs/architecture.md; the rule itself is stated in router/src/client-ip.ts). The router overwrites this
// header on every request it forwards, and nothing but the router can reach our Unix socket, so this header is the
// one source of truth: X-Forwarded-For and friends are never parsed here.
import type { IncomingHttpHeaders } from 'node:http';
import { CLIENT_IP_HEADER } from '../../../../shared/paths.ts';
import { formatAddress, parseAddress } from '../../../../shared/trusted-proxies.ts';

/** The normalised client address, or "" when the header is missing or not an address (never via the router). */
export function clientAddress(headers: IncomingHttpHeaders): string {
  const v = headers[CLIENT_IP_HEADER];
  const text = Array.isArray(v) ? v[0] : v;
  if (!text) return '';
  const addr = parseAddress(text);
  return addr === null ? '' : formatAddress(addr);
}
