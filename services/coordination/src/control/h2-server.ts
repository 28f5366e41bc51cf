// The control layer above Noise: cleartext HTTP/2 with prior knowledge over the decrypted stream, many concurrent
// streams per connection (a client keeps its map long-poll open while it registers, sends lite updates, etc.). The
// machine key proven by the handshake is bound to every request on this connection.
import http2, { type Http2ServerRequest, type Http2ServerResponse } from 'node:http2';
import type { Duplex } from 'node:stream';
import { HseError, isStoreDown, statusOf } from '../../../../shared/errors.ts';
import type { Logger } from '../../../../shared/log.ts';
import type { Store } from '../state/store.ts';
import { handleMap } from './map-handler.ts';
import type { MapHub } from './map-hub.ts';
import { counter, histogram, secondsSince } from '../../../../shared/metrics.ts';
import type { Registrar } from './register.ts';

// Register calls by outcome, and how long each took. A follow-up of an interactive login is held until an operator
// decides (up to a minute), so "needs_approval" latencies are long by design.
const registerTotal = counter('hse_register_total', 'Register calls by outcome: authorized, needs_approval, expired, refused, error.', ['outcome']);
const registerSeconds = histogram(
  'hse_register_duration_seconds',
  'Time to answer a register call, by outcome, in seconds.',
  ['outcome'],
  [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
);

function registerOutcome(out: RegisterResponse): string {
  if (out.Error) return 'refused';
  if (out.AuthURL) return 'needs_approval';
  if (out.NodeKeyExpired) return 'expired';
  return 'authorized';
}

function observeRegister(started: number, outcome: string): void {
  registerTotal.inc({ outcome });
  registerSeconds.observe({ outcome }, secondsSince(started));
}
import type { MapRequest, RegisterRequest, RegisterResponse } from '../tailcfg/tailcfg.ts';

/** No legitimate register or map request comes near this; it bounds what an unauthenticated peer can make us hold. */
const BODY_LIMIT = 1024 * 1024;

export interface ControlDeps {
  store: Store;
  hub: MapHub;
  registrar: Registrar;
  log: Logger;
}

export interface ConnInfo {
  /** "mkey:<hex>" from the Noise handshake. */
  machineKey: string;
  capVersion: number;
  clientIp: string;
}

async function readJson(req: Http2ServerRequest): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > BODY_LIMIT) throw new HseError(413, `request body over ${BODY_LIMIT} bytes`);
    chunks.push(chunk);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    throw new HseError(400, 'request body is not valid JSON');
  }
}

function sendText(res: Http2ServerResponse, status: number, text: string): void {
  if (res.headersSent) {
    res.stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR);
    return;
  }
  res.writeHead(status, { 'content-type': 'text/plain; charset=utf-8' });
  res.end(`${text}\n`);
}

/**
 * Endpoints the client calls for features this server does not offer. The client reads 501 as "not available here"
 * and shows the text (`tailscale serve` prints "error enabling https feature: <text>"); 500/502/503/504 would read as
 * "retry later" (tailscale control/controlclient/errors.go), so nothing else in 5xx. Each is reached only when a user
 * asks for the feature, never in a loop.
 */
const NOT_AVAILABLE = new Map<string, string>([
  ['/machine/feature/query', 'HTTPS certificates, Serve over HTTPS and Funnel are not available on this server (hse)'],
  ['/machine/set-dns', 'DNS records for HTTPS certificates are not available on this server (hse)'],
  ['/machine/id-token', 'ID tokens (workload identity federation) are not available on this server (hse)'],
  ['/machine/audit-log', 'audit logs of SSH sessions are not available on this server (hse)'],
  ['/machine/update-health', 'health reporting is not available on this server (hse)'],
  ['/machine/c2n', 'control-to-node requests are not available on this server (hse)'],
  ['/machine/whoami', 'whoami is not available on this server (hse)'],
  ['/machine/set-device-attr', 'device attributes are not available on this server (hse)'],
]);

export function serveControlConnection(conn: Duplex, info: ConnInfo, deps: ControlDeps): void {
  const log = deps.log;
  const server = http2.createServer({ settings: { maxConcurrentStreams: 64 } }, (req, res) => {
    void route(req, res).catch((e: Error) => {
      if (isStoreDown(e)) {
        // The client retries with backoff; the stream itself stays up, so it reconnects on its own once Redis is back.
        log.warn('control request failed: store unavailable', { path: req.url, error: e.message, ip: info.clientIp });
        sendText(res, 503, 'the coordination store is temporarily unavailable; retrying shortly is safe');
        return;
      }
      // The one place a control request's failure becomes an answer: an HseError's status and message are the
      // client's (the client prints them); anything else is a bug, logged here and answered without detail.
      const status = statusOf(e);
      if (!(e instanceof HseError)) log.error('control request failed', { path: req.url, error: e.stack ?? e.message, ip: info.clientIp });
      else if (status >= 500 && status !== 501) log.warn('control request failed', { path: req.url, status, reason: e.message, ip: info.clientIp });
      else log.info('control request refused', { path: req.url, status, reason: e.message, ip: info.clientIp });
      sendText(res, status, e instanceof HseError ? e.message : 'internal error; see the coordination log');
    });
  });

  async function route(req: Http2ServerRequest, res: Http2ServerResponse): Promise<void> {
    const path = (req.url ?? '').split('?')[0];
    if (path === '/machine/register') {
      if (req.method !== 'POST') throw new HseError(405, 'use POST');
      const body = (await readJson(req)) as RegisterRequest;
      const abort = new AbortController();
      res.on('close', () => abort.abort());
      const started = performance.now();
      let out: Awaited<ReturnType<Registrar['register']>>;
      try {
        out = await deps.registrar.register({ req: body, machineKey: info.machineKey, clientIp: info.clientIp, signal: abort.signal });
      } catch (e) {
        observeRegister(started, 'error');
        throw e;
      }
      observeRegister(started, registerOutcome(out));
      if (res.destroyed || res.writableEnded) return;
      res.writeHead(200, { 'content-type': 'application/json; charset=utf-8' });
      res.end(JSON.stringify(out));
      return;
    }
    if (path === '/machine/map') {
      if (req.method !== 'POST') throw new HseError(405, 'use POST');
      const body = (await readJson(req)) as MapRequest;
      await handleMap(deps, body, info.machineKey, res);
      return;
    }
    const unavailable = NOT_AVAILABLE.get(path);
    if (unavailable) throw new HseError(501, unavailable);
    throw new HseError(404, 'not found');
  }

  server.on('sessionError', (e: Error) => log.info('control connection error', { error: e.message, ip: info.clientIp }));
  server.on('session', (session) => {
    session.on('error', (e: Error) => log.debug('control session error', { error: e.message }));
  });
  conn.on('error', (e: Error) => log.debug('noise connection error', { error: e.message, ip: info.clientIp }));
  server.emit('connection', conn);
}
