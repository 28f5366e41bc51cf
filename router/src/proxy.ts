// Ordinary (non-upgrade) requests, forwarded with http-proxy to a service's Unix socket. Bodies stream both ways
// (pipe, no buffering, no size cap) and there is no timeout: a long-poll may be held open for hours.
//
// http-proxy needs a few corrections, each made here rather than scattered:
//   - the target path is set to the client's target verbatim: its own path joining would collapse "//" and its
//     url.parse() is deprecated (toProxy: true skips the parse, the 'proxyReq' hook restores the exact target);
//   - a client that goes away mid-response (long-poll abandoned) must take the service's request with it; http-proxy
//     only reacts to an aborted request body, so the response's 'close' does it;
//   - a service that dies mid-response must cut the client's response short rather than leave it hanging;
//   - hop-by-hop headers of the service's connection to us (kept alive, see the agent below) are not the client's:
//     dropped, so the client's own keep-alive is decided between the client and the router;
//   - in proxy mode no Strict-Transport-Security leaves the router: HSTS is the operator's proxy's decision.
import type http from 'node:http';
import { Agent as HttpAgent } from 'node:http';
import httpProxy from 'http-proxy';
import type { Logger } from '../../shared/log.ts';
import { originForm, requestPath } from './routes.ts';
import type { Target } from './tunnel.ts';
import { upstreamFailure } from './unavailable.ts';

export interface ForwarderOptions {
  log: Logger;
  proxyMode: boolean;
  /** True once the router drains: responses then say Connection: close. */
  draining: () => boolean;
}

export type Forward = (req: http.IncomingMessage, res: http.ServerResponse, target: Target) => void;

const UPSTREAM_HOP = ['connection', 'keep-alive', 'proxy-connection'];

export function createForwarder(opts: ForwarderOptions): Forward {
  const proxy = httpProxy.createProxyServer({ toProxy: true, prependPath: false, xfwd: false, ws: false, changeOrigin: false });
  const pending = new WeakMap<http.IncomingMessage, http.ClientRequest>();
  // Keep-alive to the services: without an agent http-proxy sends "Connection: close", the service closes its end
  // right after answering, and a request refused before its body was read (415, 413) then loses its answer to an
  // EPIPE on our last write — the user saw a 502 instead of the service's page.
  const agent = new HttpAgent({ keepAlive: true, maxFreeSockets: 64 });

  proxy.on('proxyReq', (proxyReq: http.ClientRequest, req: http.IncomingMessage) => {
    proxyReq.path = originForm(req.url ?? '/');
    // The client's Connection header is about its hop to us, not ours to the service (see the agent above).
    proxyReq.setHeader('connection', 'keep-alive');
    pending.set(req, proxyReq);
  });
  proxy.on('proxyRes', (proxyRes: http.IncomingMessage, _req: http.IncomingMessage, res: http.ServerResponse) => {
    for (const h of UPSTREAM_HOP) delete proxyRes.headers[h];
    if (opts.proxyMode) delete proxyRes.headers['strict-transport-security'];
    if (opts.draining()) proxyRes.headers.connection = 'close';
    proxyRes.on('error', () => res.destroy());
    proxyRes.on('close', () => {
      if (!proxyRes.complete) res.destroy();
    });
  });
  // Errors always arrive through the per-call callback below; this listener only keeps an unexpected one from
  // becoming an uncaught exception.
  proxy.on('error', (e: Error) => opts.log.warn('proxy error', { error: e.message }));

  return (req, res, target) => {
    res.once('close', () => {
      if (!res.writableFinished) pending.get(req)?.destroy();
    });
    proxy.web(req, res, { target: { socketPath: target.socketPath, host: 'localhost', port: 80 }, agent }, (e: Error) => {
      const err = e as NodeJS.ErrnoException;
      if (req.socket.destroyed || res.writableEnded) return;
      const f = upstreamFailure(err, target.service);
      opts.log.warn('service unavailable', { service: target.service, status: f.status, error: err.code ?? err.message, path: requestPath(req.url ?? '/') });
      if (res.headersSent) {
        res.destroy();
        return;
      }
      res.writeHead(f.status, { 'content-type': 'text/plain; charset=utf-8', 'cache-control': 'no-store' }).end(f.body);
    });
  };
}
