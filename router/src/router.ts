// The router's request pipeline, for every server it is attached to (plain HTTP now; HTTPS in TLS mode):
//
//   request ──► client address (client-ip.ts; on HSE_LISTEN_SOCKET the peer is the proxy) ──► route by path (routes.ts)
//           ──► drop hop-by-hop + forgeable headers, add ours (forward-headers.ts)
//           ──► Upgrade present? ── yes ──► raw tunnel to the service (tunnel.ts)
//                                └─ no  ──► forward over a kept-alive service connection (proxy.ts)
//
// Services are reached over Unix sockets in the private run directory (shared/paths.ts serviceSocket).
import type http from 'node:http';
import type { Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import type { Config } from '../../shared/config.ts';
import type { Logger } from '../../shared/log.ts';
import { serviceSocket } from '../../shared/paths.ts';
import { resolveClientAddress, resolveClientBehindSocket } from './client-ip.ts';
import { Drain } from './drain.ts';
import { dropHopByHop, forwardedProto, hopByHopNames, rewriteHeaders, rewriteRawHeaders, type ForwardInfo } from './forward-headers.ts';
import { createForwarder } from './proxy.ts';
import { requestPath, routeFor } from './routes.ts';
import { applyServerLimits, isH2cUpgrade } from './server-options.ts';
import { tunnelRequest, tunnelUpgrade, TunnelSet, type Target } from './tunnel.ts';

export interface AttachOptions {
  /** The server listens on HSE_LISTEN_SOCKET: every peer is the proxy (client-ip.ts, resolveClientBehindSocket). */
  unixSocket?: boolean;
}

export interface Router {
  /** Serves `server`'s requests and upgrades. The caller creates the server (routerServerOptions) and listens. */
  attach(server: http.Server, opts?: AttachOptions): void;
  /** Stops accepting, lets in-flight requests finish up to `deadlineMs`, closes tunnels. True if all finished. */
  drain(deadlineMs: number): Promise<boolean>;
  readonly tunnels: TunnelSet;
}

interface Prepared {
  info: ForwardInfo;
  target: Target;
}

export function createRouter(cfg: Config, log: Logger): Router {
  const tunnels = new TunnelSet();
  const drain = new Drain();
  const forward = createForwarder({ log, proxyMode: cfg.proxyMode, draining: () => drain.draining });
  const tunnelDeps = { log, tunnels };

  /** Null when the client's socket is already gone (no peer address). */
  function prepare(req: http.IncomingMessage, viaSocket: boolean): Prepared | null {
    const forwardedFor = req.headersDistinct['x-forwarded-for'];
    const client = viaSocket
      ? resolveClientBehindSocket(forwardedFor, cfg.trustedProxies)
      : resolveClientAddress(req.socket.remoteAddress, forwardedFor, cfg.trustedProxies);
    if (client === null) return null;
    const encrypted = (req.socket as TLSSocket).encrypted === true;
    if (req.headers.host === undefined) {
      // HTTP/1.0 without Host (HTTP/1.1 without one is refused by Node with 400): every service gets the public host,
      // as if the client had named it, so each answers such a request the same way instead of refusing a forwarded
      // HTTP/1.1 request without Host. Both forms are set: the ordinary path forwards req.headers, tunnels rawHeaders.
      req.headers.host = cfg.publicUrl.host;
      req.rawHeaders.push('Host', cfg.publicUrl.host);
    }
    const info: ForwardInfo = { client, proto: forwardedProto(cfg.proxyMode, cfg.tlsMode, encrypted), host: req.headers.host };
    const service = routeFor(requestPath(req.url ?? '/'));
    return { info, target: { service, socketPath: serviceSocket(cfg, service) } };
  }

  function tunnelHeaders(req: http.IncomingMessage, info: ForwardInfo): string[] {
    return rewriteRawHeaders(req.rawHeaders, info, hopByHopNames(req.headers.connection, true));
  }

  function onRequest(req: http.IncomingMessage, res: http.ServerResponse, viaSocket: boolean): void {
    const p = prepare(req, viaSocket);
    if (p === null) {
      req.socket.destroy();
      return;
    }
    if (req.headers.upgrade !== undefined && !isH2cUpgrade(req)) {
      tunnelRequest(req, res, tunnelHeaders(req, p.info), p.target, tunnelDeps);
      return;
    }
    // The client's own Connection header is about its hop to us; Node answers it (keep-alive or close) itself.
    dropHopByHop(req.headers);
    // Node already answered "100 Continue" to the client; the service must not wait for a second one.
    delete req.headers.expect;
    rewriteHeaders(req.headers, p.info);
    drain.track(res);
    forward(req, res, p.target);
  }

  function onUpgrade(req: http.IncomingMessage, socket: Socket, head: Buffer, viaSocket: boolean): void {
    const p = prepare(req, viaSocket);
    if (p === null) {
      socket.destroy();
      return;
    }
    tunnelUpgrade(req, socket, head, tunnelHeaders(req, p.info), p.target, tunnelDeps);
  }

  return {
    tunnels,
    attach(server, opts = {}) {
      const viaSocket = opts.unixSocket === true;
      applyServerLimits(server);
      server.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => onRequest(req, res, viaSocket));
      server.on('upgrade', (req: http.IncomingMessage, socket: Socket, head: Buffer) => onUpgrade(req, socket, head, viaSocket));
      drain.addServer(server);
    },
    drain: (deadlineMs) => drain.run(tunnels, deadlineMs),
  };
}
