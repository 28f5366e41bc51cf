// The headers the router hands every service. Services learn the client address only from CLIENT_IP_HEADER and the
// scheme/host only from X-Forwarded-Proto/-Host, so whatever a client (or a proxy we do not trust) sent under those
// names is dropped first and replaced with what the router itself determined. Nothing the client wrote under these
// names ever reaches a service as-is.
import type { IncomingHttpHeaders } from 'node:http';
import { CLIENT_IP_HEADER } from '../../shared/paths.ts';

/** Headers that claim a client address, scheme, host or port. Deleted on every request, trusted peer or not. */
const FORGEABLE = new Set([
  'x-forwarded-for',
  'x-real-ip',
  'forwarded',
  'true-client-ip',
  'x-forwarded-proto',
  'x-forwarded-host',
  'x-forwarded-port',
  'x-forwarded-server',
  'x-client-ip',
  'x-cluster-client-ip',
  'cf-connecting-ip',
  'fastly-client-ip',
  'x-original-forwarded-for',
]);

/** x-hse-* is the router's own namespace (CLIENT_IP_HEADER lives there): a client may never set any of it. */
function isForgeable(lowerName: string): boolean {
  return FORGEABLE.has(lowerName) || lowerName.startsWith('x-hse-');
}

export interface ForwardInfo {
  /** Resolved client address (client-ip.ts). */
  client: string;
  /** Scheme the client used to reach the public URL. */
  proto: 'http' | 'https';
  /** The Host the client asked for (the public host for HTTP/1.0 without one), passed on as X-Forwarded-Host. */
  host: string;
}

/**
 * `https` whenever HTTPS is terminated for us (proxy mode: the proxy did it; TLS mode: we did), else the scheme of
 * this connection. In proxy mode the client's own X-Forwarded-Proto is not needed: the operator said the public URL is
 * https, and believing a header would let a client claim either.
 */
export function forwardedProto(proxyMode: boolean, tlsMode: boolean, encrypted: boolean): 'http' | 'https' {
  return proxyMode || tlsMode || encrypted ? 'https' : 'http';
}

/**
 * What the router adds. X-Forwarded-For carries the single resolved address (not a chain) so that a service using
 * Koa's `proxy = true` sees the same client in ctx.ip as in CLIENT_IP_HEADER.
 */
export function addedHeaders(info: ForwardInfo): [string, string][] {
  const out: [string, string][] = [
    [CLIENT_IP_HEADER, info.client],
    ['x-forwarded-for', info.client],
    ['x-forwarded-proto', info.proto],
    ['x-forwarded-host', info.host],
  ];
  return out;
}

/** Rewrites a parsed header object in place (the form proxy.ts forwards). */
export function rewriteHeaders(headers: IncomingHttpHeaders, info: ForwardInfo): void {
  for (const name of Object.keys(headers)) if (isForgeable(name)) delete headers[name];
  for (const [name, value] of addedHeaders(info)) headers[name] = value;
}

/**
 * Rewrites a raw header list (rawHeaders layout: name, value, name, value, ...; case and order as received), dropping
 * forgeable names and any name in `drop` (lower case), then appending the router's own. Used for tunnels, where the
 * request head is passed on as close to the original as possible.
 */
export function rewriteRawHeaders(raw: readonly string[], info: ForwardInfo, drop: ReadonlySet<string>): string[] {
  const out: string[] = [];
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const lower = raw[i].toLowerCase();
    if (isForgeable(lower) || drop.has(lower)) continue;
    out.push(raw[i], raw[i + 1]);
  }
  for (const [name, value] of addedHeaders(info)) out.push(name, value);
  return out;
}

/** Headers that describe one connection, not the request: never passed on (RFC 9110, 7.6.1). */
const HOP_BY_HOP = ['connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'upgrade', 'http2-settings'];

/**
 * Names a request marks as hop-by-hop: the fixed list plus whatever its Connection header lists, except `upgrade`
 * itself when `keepUpgrade` (a tunnel passes Upgrade on, and sets its own Connection).
 */
export function hopByHopNames(connection: string | string[] | undefined, keepUpgrade: boolean): Set<string> {
  const names = new Set(HOP_BY_HOP);
  const listed = Array.isArray(connection) ? connection.join(',') : (connection ?? '');
  for (const token of listed.split(',')) {
    const t = token.trim().toLowerCase();
    if (t !== '') names.add(t);
  }
  if (keepUpgrade) names.delete('upgrade');
  // Framing and Host stay whatever Connection lists: the body is passed on as the client framed it.
  for (const keep of ['content-length', 'transfer-encoding', 'host']) names.delete(keep);
  return names;
}

/** Drops hop-by-hop headers from a parsed header object (the ordinary-request path). */
export function dropHopByHop(headers: IncomingHttpHeaders): void {
  for (const name of hopByHopNames(headers.connection, false)) delete headers[name];
}
