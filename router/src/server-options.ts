// Limits of the public listener. The same options go to http.createServer now and https.createServer in TLS mode.
//
// Proxied traffic has no clock at all: map long-polls and tunnels last hours and uploads take as long as they take,
// so there is no request, body, or socket idle timeout. What a client gets limited on is the request head only:
//   - headersTimeout: a head must be complete within HSE_HEADER_TIMEOUT (slow-header / slowloris connections);
//   - maxHeaderSize: 32 KiB of head at most (a huge head is answered 431 and the connection closed);
//   - keepAliveTimeout: an idle keep-alive connection between requests is closed after 75 s, longer than the 60 s
//     nginx and others keep idle upstream connections, so the proxy in front always closes first (no race where we
//     close a connection it just sent a request on).
import type http from 'node:http';
import type { Config } from '../../shared/config.ts';

export const MAX_HEADER_SIZE = 32 * 1024;
export const KEEP_ALIVE_TIMEOUT_MS = 75_000;

/**
 * `Upgrade: h2c` asks to switch to cleartext HTTP/2, which no service speaks. The upgrade is optional for the client,
 * so it is declined by answering in HTTP/1.1 (the request goes through the ordinary path) instead of tunnelled.
 */
export function isH2cUpgrade(req: http.IncomingMessage): boolean {
  return /^\s*h2c\s*$/i.test(req.headers.upgrade ?? '');
}

export function routerServerOptions(cfg: Config): http.ServerOptions {
  const headersTimeout = cfg.headerTimeoutSeconds * 1000;
  return {
    maxHeaderSize: MAX_HEADER_SIZE,
    headersTimeout,
    requestTimeout: 0,
    keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS,
    // How often expired heads are looked for: at most a second late, and the check is cheap.
    connectionsCheckingInterval: Math.min(1000, headersTimeout),
    noDelay: true,
    // Everything that asks to upgrade is tunnelled, except h2c (see above).
    shouldUpgradeCallback: (req: http.IncomingMessage) => !isH2cUpgrade(req),
  };
}

/** Settings that are properties rather than options; applied to any server the router is attached to. */
export function applyServerLimits(server: http.Server): void {
  server.timeout = 0;
  server.requestTimeout = 0;
}
