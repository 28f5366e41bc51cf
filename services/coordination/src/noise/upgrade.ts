// /ts2021: turns an HTTP/1.1 upgrade into an authenticated Noise connection and hands it up as a Duplex.
//
//   client                                     server
//   POST /ts2021  (Upgrade, X-Tailscale-Handshake: initiation)
//                                              101 Switching Protocols
//                                              Noise response (51 B) | record frame: early payload
//   record frames (HTTP/2 from here on) <-->   record frames
//
// The 101, the response and the early payload leave in one write, as Tailscale's server does with its corked conn.
// Refusals before the 101 are HTTP errors with a short text; after it, an error frame (when the client deserves to
// know why, e.g. it is too old) or just a close. Every refusal is logged with its reason and touches nothing else.
import net from 'node:net';
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { KeyObject } from 'node:crypto';
import { formatKey } from '../../../../shared/keys.ts';
import { redact, type Logger } from '../../../../shared/log.ts';
import { CLIENT_IP_HEADER } from '../../../../shared/paths.ts';
import { NoiseConn, sealFrames } from './conn.ts';
import { earlyPayload } from './early-payload.ts';
import { respondToInitiation, type HandshakeResult } from './handshake.ts';
import { takeOverRequestSocket } from '../../../../shared/http-takeover.ts';
import { HandshakeError, writeError } from './messages.ts';
import { readUpgradeRequest, UPGRADE_TOKEN, type UpgradeRefused, type UpgradeRequest } from './upgrade-request.ts';
import { WebSocketStream } from '../../../../shared/websocket/stream.ts';
import { pairFromPrivate, privateKeyFromRaw, type X25519Pair } from './x25519.ts';

export interface ControlConnInfo {
  /** Raw 32-byte machine public key the client proved in the handshake. */
  machineKey: Buffer;
  capVersion: number;
  /** From the router's x-hse-client-ip header ('' when absent). */
  clientIp: string;
}

export interface ControlUpgradeOptions {
  /** Raw 32-byte X25519 private key (loadOrCreateServerKey().privateKey). */
  serverPrivateKey: Buffer;
  log: Logger;
  /** From the request until the client's first authenticated frame; default 30 s. */
  handshakeTimeoutMs?: number;
  /** Oldest capability version served; default 113 (Tailscale v1.80). */
  minCapVersion?: number;
  onConnection(conn: Duplex, info: ControlConnInfo): void;
}

export const DEFAULT_HANDSHAKE_TIMEOUT_MS = 30_000;

const STATUS_TEXT: Record<number, string> = { 400: 'Bad Request', 405: 'Method Not Allowed' };

const keyCache = new WeakMap<Buffer, X25519Pair>();
function serverPair(raw: Buffer): X25519Pair {
  let pair = keyCache.get(raw);
  if (!pair) {
    pair = pairFromPrivate(privateKeyFromRaw(raw) as KeyObject);
    keyCache.set(raw, pair);
  }
  return pair;
}

/** How long a refused client gets to read our answer and close; the HTTP server's sockets allow half-open. */
const REFUSAL_LINGER_MS = 5_000;

/** Sends the last bytes and closes; a peer that never closes its side is cut off after REFUSAL_LINGER_MS. */
function endAndClose(socket: Duplex, last: string | Buffer): void {
  socket.end(last);
  setTimeout(() => socket.destroy(), REFUSAL_LINGER_MS).unref();
}

function httpError(socket: Duplex, status: number, text: string): void {
  const body = Buffer.from(`${text}\n`, 'utf8');
  endAndClose(
    socket,
    `HTTP/1.1 ${status} ${STATUS_TEXT[status] ?? 'Error'}\r\nContent-Type: text/plain; charset=utf-8\r\n` +
      `Content-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`,
  );
}

function switching(req: UpgradeRequest): string {
  if (req.kind === 'native') return `HTTP/1.1 101 Switching Protocols\r\nUpgrade: ${req.upgrade}\r\nConnection: upgrade\r\n\r\n`;
  return (
    'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
    `Sec-WebSocket-Accept: ${req.accept}\r\nSec-WebSocket-Protocol: ${UPGRADE_TOKEN}\r\n\r\n`
  );
}

/**
 * Handles a /ts2021 request from `server.on('upgrade')` (pass its socket and head), or from the request handler
 * when Node did not see an upgrade (pass req.socket and an empty head; the socket is taken over from the server).
 */
export function handleControlUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer, opts: ControlUpgradeOptions): void {
  const log = opts.log;
  const rawIp = req.headers[CLIENT_IP_HEADER];
  const clientIp = (Array.isArray(rawIp) ? rawIp[0] : rawIp) ?? '';
  const refuse = (reason: string, fields: Record<string, unknown> = {}) => log.info('control upgrade refused', { reason, ip: clientIp, ...fields });

  // Node sets `upgrade` on requests it hands to 'upgrade' listeners; @types/node does not declare it.
  if (!(req as IncomingMessage & { upgrade?: boolean }).upgrade) {
    const taken = socket === req.socket ? takeOverRequestSocket(req) : null;
    if (!taken) {
      refuse('upgrade arrived as a plain request and the socket could not be taken over');
      httpError(socket, 400, '/ts2021 needs an HTTP upgrade: send Connection: upgrade along with Upgrade (check your proxy)');
      return;
    }
    log.debug('upgrade arrived as a plain request (Connection lacks "upgrade"); socket taken over', { ip: clientIp });
    socket = taken;
  }
  socket.on('error', (e: Error) => log.debug('control socket error', { error: e.message, ip: clientIp }));

  let upgrade: UpgradeRequest;
  try {
    upgrade = readUpgradeRequest(req);
  } catch (e) {
    const err = e as UpgradeRefused;
    refuse(err.message, { status: err.status });
    httpError(socket, err.status ?? 400, err.message);
    return;
  }

  let hs: HandshakeResult;
  try {
    hs = respondToInitiation(upgrade.initiation, serverPair(opts.serverPrivateKey), { minCapVersion: opts.minCapVersion });
  } catch (e) {
    const err = e as HandshakeError;
    refuse(err.message, { transport: upgrade.kind });
    // Like Tailscale's server, the 101 goes out first: the client reads the refusal at the Noise layer.
    const frame = err instanceof HandshakeError && err.reply ? writeError(err.reply) : null;
    if (upgrade.kind === 'native') {
      endAndClose(socket, frame ? Buffer.concat([Buffer.from(switching(upgrade), 'latin1'), frame]) : switching(upgrade));
    } else {
      socket.write(switching(upgrade));
      const ws = new WebSocketStream(socket);
      ws.on('error', () => {});
      if (frame) ws.end(frame);
      else ws.end();
      setTimeout(() => ws.destroy(), REFUSAL_LINGER_MS).unref();
    }
    return;
  }

  const deadlineMs = opts.handshakeTimeoutMs ?? DEFAULT_HANDSHAKE_TIMEOUT_MS;
  let conn: NoiseConn | null = null;
  const timer = setTimeout(() => {
    log.info('control connection closed: no authenticated frame before the handshake deadline', { ip: clientIp, ms: deadlineMs });
    if (conn) conn.destroy();
    else socket.destroy();
  }, deadlineMs);
  timer.unref();
  socket.once('close', () => clearTimeout(timer));
  const onFirstFrame = () => clearTimeout(timer);

  if (upgrade.kind === 'native') {
    const early: Buffer[] = [];
    sealFrames(hs.tx, earlyPayload(), early);
    socket.write(Buffer.concat([Buffer.from(switching(upgrade), 'latin1'), hs.response, ...early]));
    conn = new NoiseConn(socket, { rx: hs.rx, tx: hs.tx, head, onFirstFrame });
  } else {
    // Websocket clients get no early payload, as from Tailscale's server (its websocket path sends none).
    socket.write(switching(upgrade));
    const ws = new WebSocketStream(socket, head);
    ws.write(hs.response);
    conn = new NoiseConn(ws, { rx: hs.rx, tx: hs.tx, onFirstFrame });
  }
  if (socket instanceof net.Socket) socket.setNoDelay(true);

  const info: ControlConnInfo = { machineKey: hs.machineKey, capVersion: hs.capVersion, clientIp };
  log.debug('control connection established', {
    ip: clientIp,
    capver: hs.capVersion,
    machine: redact(formatKey('mkey', hs.machineKey), 20),
    transport: upgrade.kind,
  });
  try {
    opts.onConnection(conn, info);
  } catch (e) {
    log.error('control connection handler failed', { error: (e as Error).message, ip: clientIp });
    conn.destroy();
  }
}
