// The HTTPS listener of TLS mode. One TLS port, two protocols chosen by ALPN:
//   - "http/1.1" or no ALPN (Tailscale's control and DERP clients, curl, health checks): an https.Server with the
//     router attached exactly as in proxy mode (routing, upgrade tunnels for /ts2021 and /derp, long-polls, header
//     timeout and size limit, drain);
//   - "h2" (browsers): an HTTP/2 session whose streams h2-forward.ts passes to the services.
// https.Server is a tls.Server whose 'secureConnection' listener runs HTTP/1.1 on the socket; that listener is taken
// out and called for non-h2 sockets only, and h2 sockets go to an HTTP/2 server that never listens itself. (Node's
// http2.createSecureServer({ allowHTTP1 }) would hand HTTP/2 streams to the router's HTTP/1.1 handlers, which
// an HTTP/1.1 forwarder cannot pass on: pseudo-headers, no Host, no Connection.)
//
// Certificates change without a restart: setSecureContext() swaps the default context; connections already open
// keep the one they were made with, new ones get the new one. Until a first certificate is installed the server has
// none, and handshakes fail (the client sees a handshake-failure alert); each refusal is logged, at most once a
// minute, with the reason there is no certificate.
import http2 from 'node:http2';
import https from 'node:https';
import type { TLSSocket } from 'node:tls';
import type { Config } from '../../../shared/config.ts';
import type { Logger } from '../../../shared/log.ts';
import type { Router } from '../router.ts';
import { KEEP_ALIVE_TIMEOUT_MS, MAX_HEADER_SIZE, routerServerOptions } from '../server-options.ts';
import { describe, type LoadedCertificate } from './certificate.ts';
import { forwardStream } from './h2-forward.ts';

/** One year, no includeSubDomains: other names under the domain are not ours to force onto HTTPS. */
export const HSTS = 'max-age=31536000';

const REFUSAL_LOG_INTERVAL_MS = 60_000;

export interface TlsServer {
  /** The HTTPS listener (bind it with listen(), router/src/listen.ts). */
  server: https.Server;
  /** Serves `cert` on every new connection from now on. */
  install(cert: LoadedCertificate, how: string): void;
  /** The certificate being served, or null before the first one. */
  current(): LoadedCertificate | null;
  /** Why there is no certificate yet (or why the newest could not be installed): logged with each refused handshake. */
  setProblem(reason: string | null): void;
  /** Closes the HTTP/2 sessions (GOAWAY, streams in flight may finish) and cuts whatever is left at the deadline. */
  drain(deadlineMs: number): Promise<boolean>;
}

export function createTlsServer(cfg: Config, log: Logger, router: Router): TlsServer {
  let cert: LoadedCertificate | null = null;
  let problem: string | null = 'no certificate has been obtained yet';
  let lastRefusalLog = 0;
  let draining = false;

  const server = https.createServer({
    ...routerServerOptions(cfg),
    ALPNProtocols: ['h2', 'http/1.1'],
    // The head timeout covers the TLS handshake too: a client that opens a socket and stalls is cut off alike.
    handshakeTimeout: cfg.headerTimeoutSeconds * 1000,
  });
  router.attach(server);
  // Before the router's own listener, so every HTTP/1.1 response over TLS carries it (proxy.ts's writeHead keeps headers set before it).
  server.prependListener('request', (_req, res) => res.setHeader('strict-transport-security', HSTS));

  // HTTP/2: streams to the services; sessions counted so idle ones close and a drain can end them.
  const h2 = http2.createServer({
    settings: { maxHeaderListSize: MAX_HEADER_SIZE, enableConnectProtocol: false },
    maxSessionInvalidFrames: 100,
  });
  const sessions = new Map<http2.Http2Session, number>();
  /** The TLS socket being handed to the HTTP/2 server: its 'session' event fires synchronously inside the hand-over. */
  let handingOver: TLSSocket | null = null;
  h2.on('session', (session: http2.ServerHttp2Session) => {
    const raw = handingOver;
    sessions.set(session, 0);
    session.on('error', (e: Error) => log.debug('http/2 session error', { error: e.message }));
    session.on('close', () => sessions.delete(session));
    // A graceful close (GOAWAY) waits for the peer to hang up; one that never does is cut after a few seconds.
    const closeSession = () => {
      session.close();
      setTimeout(() => raw?.destroy(), 5_000).unref();
    };
    // Like HTTP/1.1 keep-alive: a session with nothing open for a while is closed; open streams (long-polls,
    // live tails) keep it however quiet they are.
    const idle = () => {
      if ((sessions.get(session) ?? 0) === 0) closeSession();
    };
    session.setTimeout(KEEP_ALIVE_TIMEOUT_MS, idle);
    if (draining) closeSession();
  });
  h2.on('stream', (stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders) => {
    const session = stream.session;
    if (session) {
      sessions.set(session, (sessions.get(session) ?? 0) + 1);
      stream.once('close', () => {
        const left = (sessions.get(session) ?? 1) - 1;
        sessions.set(session, left);
        if (left === 0 && !session.closed) session.setTimeout(KEEP_ALIVE_TIMEOUT_MS);
      });
    }
    forwardStream(stream, headers, { cfg, log, hsts: HSTS });
  });

  const http1 = server.listeners('secureConnection')[0] as ((socket: TLSSocket) => void) | undefined;
  if (typeof http1 !== 'function')
    throw new Error("this Node version's https.Server has no HTTP/1.1 connection listener to dispatch from (TLS mode needs Node 24)");
  server.removeAllListeners('secureConnection');
  server.on('secureConnection', (socket: TLSSocket) => {
    if (socket.alpnProtocol !== 'h2') {
      http1.call(server, socket);
      return;
    }
    handingOver = socket;
    try {
      h2.emit('connection', socket);
    } finally {
      handingOver = null;
    }
  });

  server.on('tlsClientError', (e: NodeJS.ErrnoException, socket: TLSSocket) => {
    socket.destroy();
    if (cert !== null) {
      // Scanners, clients that do not trust the certificate, timeouts: routine, not the operator's problem.
      log.debug('TLS handshake failed', { error: e.code ?? e.message, peer: socket.remoteAddress });
      return;
    }
    const now = Date.now();
    if (now - lastRefusalLog < REFUSAL_LOG_INTERVAL_MS) return;
    lastRefusalLog = now;
    log.warn('HTTPS handshake refused: no certificate to serve yet', { reason: problem ?? 'unknown', peer: socket.remoteAddress });
  });

  return {
    server,
    install(next, how) {
      server.setSecureContext({ cert: next.certPem, key: next.keyPem });
      const first = cert === null;
      cert = next;
      problem = null;
      log.info(first ? 'certificate in use' : 'certificate replaced; new connections get the new one', { source: how, ...describe(next) });
    },
    current: () => cert,
    setProblem(reason) {
      problem = reason;
    },
    async drain(deadlineMs) {
      draining = true;
      for (const s of sessions.keys()) if (!s.closed) s.close();
      if (sessions.size === 0) return true;
      const all = Promise.all([...sessions.keys()].map((s) => new Promise<void>((r) => (s.closed ? r() : s.once('close', () => r())))));
      let timer: NodeJS.Timeout | undefined;
      const clean = await Promise.race([all.then(() => true), new Promise<boolean>((r) => (timer = setTimeout(() => r(false), deadlineMs)))]);
      clearTimeout(timer);
      for (const s of sessions.keys()) s.destroy();
      return clean;
    },
  };
}
