// Ordinary (non-upgrade) requests, forwarded with node:http to a service's Unix socket over kept-alive connections.
// Bodies stream both ways (pipe, no buffering, no size cap) and there is no timeout: a long-poll may be held open for
// hours.
//
// Why not http-proxy (a design-card dependency): measured with bench/router.ts on the same machine, forwarding the
// request ourselves serves ~1.45x the requests/s of http-proxy with a quarter of its p99 at 64 connections (24.5k vs
// 16.8k req/s, 4 ms vs 15 ms); the difference is http-proxy's per-request pipeline (option merging, a pass chain,
// a pipe even for a bodiless GET). What it did for us is small and is all here:
//   - the target is the client's target verbatim (absolute-form reduced to origin-form): no path joining;
//   - a client that goes away mid-response (long-poll abandoned) takes the service's request with it;
//   - a service that dies mid-response cuts the client's response short rather than leaving it hanging;
//   - the service's hop-by-hop response headers (kept-alive connection to us, its framing) are not the client's:
//     dropped, and Node frames the client's response itself (chunked, or close-delimited for HTTP/1.0 clients);
//   - in proxy mode no Strict-Transport-Security leaves the router: HSTS is the operator's proxy's decision;
//   - while draining, responses say Connection: close.
import type http from 'node:http';
import { Agent as HttpAgent, request as httpRequest } from '../../shared/node-http.ts';
import type { Logger } from '../../shared/log.ts';
import { countResponse } from './router-metrics.ts';
import { originForm, requestPath } from './routes.ts';
import type { Target } from './tunnel.ts';
import { upstreamFailure } from './unavailable.ts';

export interface ForwarderOptions {
  log: Logger;
  proxyMode: boolean;
  /** True once the router drains: responses then say Connection: close. */
  draining: () => boolean;
}

/** `req.headers` must already be what the service gets (router.ts: hop-by-hop dropped, forwarding headers set). */
export type Forward = (req: http.IncomingMessage, res: http.ServerResponse, target: Target) => void;

/** Response headers about the service's connection to us, not the client's: never passed on. */
const UPSTREAM_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'trailer', 'upgrade']);

/**
 * Ends the client's response, but not before its request body has all arrived. A service may answer before reading
 * the body (413, 415), and when this is the connection's last response (the client, or nginx by default, sent
 * `Connection: close`) Node closes the socket as soon as the response ends: with body bytes still arriving, the kernel
 * answers them with a reset, and a proxy still sending the body reports its own 502 instead of the service's answer.
 * So the rest of the body keeps flowing to the service while it reads, or is read and discarded once it stops.
 */
function endAfterBody(req: http.IncomingMessage, res: http.ServerResponse, upstream: http.ClientRequest): void {
  if (req.complete || req.destroyed) {
    res.end();
    return;
  }
  const end = () => res.end();
  req.once('end', end);
  req.once('close', end);
  const discard = () => {
    req.unpipe(upstream);
    req.resume();
  };
  if (upstream.destroyed || upstream.writableEnded) discard();
  else upstream.once('close', discard);
}

export function createForwarder(opts: ForwarderOptions): Forward {
  // Keep-alive to the services: a fresh connection per request costs a connect per request, and a service that
  // closes right after answering a request it refused before reading the body (415, 413) would make our last body
  // write fail with EPIPE — the user saw a 502 instead of the service's page.
  const agent = new HttpAgent({ keepAlive: true, maxFreeSockets: 64 });

  function responseHeaders(upstream: http.IncomingMessage): string[] {
    const raw = upstream.rawHeaders;
    const out: string[] = [];
    for (let i = 0; i + 1 < raw.length; i += 2) {
      const lower = raw[i].toLowerCase();
      if (UPSTREAM_HOP.has(lower) || (opts.proxyMode && lower === 'strict-transport-security')) continue;
      out.push(raw[i], raw[i + 1]);
    }
    if (opts.draining()) out.push('Connection', 'close');
    return out;
  }

  return (req, res, target) => {
    req.headers.connection = 'keep-alive';
    const upstream = httpRequest({
      socketPath: target.socketPath,
      method: req.method,
      path: originForm(req.url ?? '/'),
      headers: req.headers,
      agent,
      // The client's Host is passed on as it came (router.ts gives HTTP/1.0 requests without one the public host).
      setHost: false,
    });

    // Set once the service's whole answer is in: a service that then hangs up on the rest of the body has answered.
    let answered = false;
    upstream.on('error', (err: NodeJS.ErrnoException) => {
      if (answered || req.socket.destroyed || res.writableEnded) return;
      const f = upstreamFailure(err, target.service);
      opts.log.warn('service unavailable', { service: target.service, status: f.status, error: err.code ?? err.message, path: requestPath(req.url ?? '/') });
      if (res.headersSent) {
        res.destroy();
        return;
      }
      countResponse(target.service, f.status);
      res.writeHead(f.status, { 'content-type': 'text/plain; charset=utf-8', 'cache-control': 'no-store' }).end(f.body);
    });
    req.on('error', () => upstream.destroy());
    res.once('close', () => {
      if (!res.writableFinished) upstream.destroy();
    });

    upstream.on('response', (answer: http.IncomingMessage) => {
      countResponse(target.service, answer.statusCode ?? 502);
      res.writeHead(answer.statusCode ?? 502, answer.statusMessage, responseHeaders(answer));
      answer.on('error', () => res.destroy());
      answer.on('close', () => {
        if (!answer.complete) res.destroy();
      });
      answer.pipe(res, { end: false });
      answer.once('end', () => {
        answered = true;
        endAfterBody(req, res, upstream);
      });
    });

    // A request without a body (no Content-Length, not chunked) is complete as it stands: end it now rather than
    // set up a pipe for nothing.
    if (req.headers['content-length'] === undefined && req.headers['transfer-encoding'] === undefined) upstream.end();
    else req.pipe(upstream);
  };
}
