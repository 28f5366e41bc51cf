// HTTP/2 requests (browsers that negotiated ALPN "h2"), forwarded to the services as HTTP/1.1 over their Unix
// sockets, with the same routing, client address and header rules as the HTTP/1.1 path (router.ts). The services
// speak HTTP/1.1 only, so each stream becomes one upstream request, bodies streamed both ways, no timeout.
//
// HTTP/2 has no Upgrade (RFC 9113, 8.6): Tailscale's /ts2021 and /derp clients never offer h2 (they send no ALPN or
// only http/1.1), and browsers open WebSockets over a separate HTTP/1.1 connection because we do not advertise
// extended CONNECT. So this path only ever carries ordinary requests.
//
// Request mapping (RFC 9113, 8.3.1): `:method` and `:path` become the request line; `:authority` becomes Host;
// `:scheme` is dropped (the router sets X-Forwarded-Proto); split Cookie fields arrive joined with "; " by Node.
// Response mapping: the service's status and headers, minus the HTTP/1.1 connection headers HTTP/2 forbids
// (RFC 9113, 8.2.2), plus Strict-Transport-Security.
import type http from 'node:http';
import * as nodeHttp from '../../../shared/node-http.ts';
import http2 from 'node:http2';
import type { Logger } from '../../../shared/log.ts';
import type { Config } from '../../../shared/config.ts';
import { serviceSocket } from '../../../shared/paths.ts';
import { resolveClientAddress } from '../client-ip.ts';
import { dropHopByHop, forwardedProto, rewriteHeaders, type ForwardInfo } from '../forward-headers.ts';
import { originForm, requestPath, routeFor } from '../routes.ts';
import { upstreamFailure } from '../unavailable.ts';

/** Response headers that describe an HTTP/1.1 connection; Node refuses them on an HTTP/2 stream. */
const H1_ONLY = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade', 'http2-settings', 'te']);

/** Methods that carry no body unless they say so; the others get `Content-Length: 0` when the stream has none. */
const BODILESS = new Set(['GET', 'HEAD', 'DELETE', 'OPTIONS', 'TRACE']);

export interface H2ForwardDeps {
  cfg: Config;
  log: Logger;
  /** Added to every response unless the service set its own. */
  hsts: string;
}

function one(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v;
}

/** The HTTP/1.1 head for the service. */
function upstreamHeaders(h: http2.IncomingHttpHeaders, info: ForwardInfo, endAfterHeaders: boolean, method: string): http.OutgoingHttpHeaders {
  const out: http.IncomingHttpHeaders = {};
  for (const [name, value] of Object.entries(h)) {
    if (name.startsWith(':') || value === undefined) continue;
    out[name] = value;
  }
  out.host = info.host;
  dropHopByHop(out);
  // HTTP/2 has no 100-continue handshake to pass on; the service must not wait for one.
  delete out.expect;
  rewriteHeaders(out, info);
  if (endAfterHeaders && out['content-length'] === undefined && !BODILESS.has(method)) out['content-length'] = '0';
  out.connection = 'close';
  return out;
}

function responseHeaders(res: http.IncomingMessage, hsts: string): http2.OutgoingHttpHeaders {
  const out: http2.OutgoingHttpHeaders = { ':status': res.statusCode ?? 502 };
  for (const [name, value] of Object.entries(res.headers)) {
    if (value === undefined || H1_ONLY.has(name)) continue;
    out[name] = value;
  }
  if (out['strict-transport-security'] === undefined) out['strict-transport-security'] = hsts;
  return out;
}

function refuse(stream: http2.ServerHttp2Stream, status: number, body: string, hsts: string): void {
  if (stream.destroyed || stream.headersSent) {
    stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR);
    return;
  }
  stream.respond({ ':status': status, 'content-type': 'text/plain; charset=utf-8', 'cache-control': 'no-store', 'strict-transport-security': hsts });
  stream.end(body);
}

/** Handles one HTTP/2 stream (the server's 'stream' event). */
export function forwardStream(stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders, deps: H2ForwardDeps): void {
  const { cfg, log, hsts } = deps;
  stream.on('error', (e: Error) => log.debug('http/2 stream error', { error: e.message }));
  const method = one(headers[':method']) ?? 'GET';
  const target = one(headers[':path']);
  if (method === 'CONNECT' || target === undefined) {
    refuse(stream, 405, 'hse: CONNECT is not supported\n', hsts);
    return;
  }
  const peer = stream.session?.socket?.remoteAddress;
  const xff = headers['x-forwarded-for'];
  const client = resolveClientAddress(peer, xff === undefined ? undefined : Array.isArray(xff) ? xff : [xff], cfg.trustedProxies);
  if (client === null) {
    stream.close(http2.constants.NGHTTP2_CANCEL);
    return;
  }
  const info: ForwardInfo = {
    client,
    proto: forwardedProto(cfg.proxyMode, cfg.tlsMode, true),
    host: one(headers[':authority']) ?? one(headers.host) ?? cfg.publicUrl.host,
  };
  const service = routeFor(requestPath(target));
  const up = nodeHttp.request({
    socketPath: serviceSocket(cfg, service),
    method,
    path: originForm(target),
    headers: upstreamHeaders(headers, info, stream.endAfterHeaders, method),
    agent: false,
  });
  // The client went away (tab closed, long-poll abandoned): the service's request goes with it.
  stream.once('close', () => {
    if (!up.destroyed) up.destroy();
  });
  up.on('error', (e: NodeJS.ErrnoException) => {
    if (stream.destroyed) return;
    const f = upstreamFailure(e, service);
    log.warn('service unavailable', { service, status: f.status, error: e.code ?? e.message, path: requestPath(target), http: 2 });
    refuse(stream, f.status, f.body, hsts);
  });
  up.on('response', (res: http.IncomingMessage) => {
    if (stream.destroyed || stream.closed) {
      res.destroy();
      return;
    }
    res.on('error', () => stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR));
    // A service that dies mid-response must cut the client's stream short, not end it as if complete.
    res.on('close', () => {
      if (!res.complete && !stream.destroyed) stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR);
    });
    const status = res.statusCode ?? 502;
    const noBody = method === 'HEAD' || status === 204 || status === 304;
    stream.respond(responseHeaders(res, hsts), { endStream: noBody });
    if (noBody) res.resume();
    else res.pipe(stream);
  });
  stream.pipe(up);
}
