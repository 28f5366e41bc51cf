// Test-only client side of the control protocol's transport: the Noise IK initiator and a dialer that speaks the
// /ts2021 upgrade (native or websocket) the way the official client does, then hands back the encrypted stream;
// plus a loopback server wired like the coordination service, for the tests to dial.
// The official client is the real peer (see the interop notes in noise-vectors.test.ts); this one lets the tests
// poke at every edge deterministically.
import crypto from 'node:crypto';
import http from 'node:http';
import net from 'node:net';
import type { Duplex, Readable } from 'node:stream';
import { Logger } from '../../shared/log.ts';
import { NoiseConn } from '../../services/coordination/src/noise/conn.ts';
import type { CipherState } from '../../services/coordination/src/noise/cipher-state.ts';
import { parseEarlyPayload } from '../../services/coordination/src/noise/early-payload.ts';
import { prologue } from '../../services/coordination/src/noise/handshake.ts';
import { MSG_ERROR, MSG_RESPONSE, parseResponse, RESPONSE_LEN, writeInitiation } from '../../services/coordination/src/noise/messages.ts';
import { SymmetricState } from '../../services/coordination/src/noise/symmetric.ts';
import { WebSocketStream } from '../../shared/websocket/stream.ts';
import { handleControlUpgrade, type ControlConnInfo } from '../../services/coordination/src/noise/upgrade.ts';
import { generatePair, rawPrivateKey, type X25519Pair } from '../../services/coordination/src/noise/x25519.ts';

export const CAP_VERSION = 142; // Tailscale v1.102.3

export interface Initiator {
  initiation: Buffer;
  machine: X25519Pair;
  /** Processes the server's 51-byte response; returns [client->server, server->client] and the handshake hash. */
  finish(response: Uint8Array): { tx: CipherState; rx: CipherState; handshakeHash: Buffer };
}

// -> e, es, s, ss  then  <- e, ee, se   (the mirror image of services/coordination/src/noise/handshake.ts)
export function initiate(opts: { serverPublic: Buffer; capVersion?: number; machine?: X25519Pair; ephemeral?: X25519Pair }): Initiator {
  const capVersion = opts.capVersion ?? CAP_VERSION;
  const machine = opts.machine ?? generatePair();
  const e = opts.ephemeral ?? generatePair();
  const s = new SymmetricState();
  s.mixHash(prologue(capVersion));
  s.mixHash(opts.serverPublic);
  s.mixHash(e.publicKey);
  const kEs = s.mixDH(e.privateKey, opts.serverPublic);
  const sealedStatic = s.encryptAndHash(kEs, machine.publicKey);
  const kSs = s.mixDH(machine.privateKey, opts.serverPublic);
  const tag = s.encryptAndHash(kSs, Buffer.alloc(0));
  const initiation = writeInitiation({ capVersion, ephemeral: e.publicKey, sealedStatic, tag });
  return {
    initiation,
    machine,
    finish(response) {
      const r = parseResponse(response);
      s.mixHash(r.ephemeral);
      s.mixDH(e.privateKey, r.ephemeral);
      const kSe = s.mixDH(machine.privateKey, r.ephemeral);
      s.decryptAndHash(kSe, r.tag);
      const handshakeHash = Buffer.from(s.h);
      const [c1, c2] = s.split();
      return { tx: c1, rx: c2, handshakeHash };
    },
  };
}

export type DialResult =
  | { kind: 'ok'; conn: NoiseConn; socket: net.Socket; early: unknown; handshakeHash: Buffer; machine: X25519Pair; raw101: string }
  | { kind: 'http'; status: number; head: string; body: string }
  | { kind: 'error-frame'; message: string }
  | { kind: 'closed'; after: string };

export interface DialOptions {
  port: number;
  /** Dial this Unix socket instead of 127.0.0.1:port (how the router reaches the coordination service). */
  socketPath?: string;
  host?: string;
  serverPublic: Buffer;
  capVersion?: number;
  machine?: X25519Pair;
  transport?: 'native' | 'websocket';
  method?: string;
  /** Replaces the whole header block after the request line (to send broken requests). */
  headers?: Record<string, string>;
  /** Value of the Connection header (native); 'keep-alive' makes Node see a plain request. */
  connection?: string;
  /** Added to the default headers. */
  extraHeaders?: Record<string, string>;
  /** Replaces the encoded initiation. */
  handshakeText?: string;
  /** Read the early payload off the stream (native clients get one). */
  readEarly?: boolean;
}

/** Reads from `socket` until `pred(buffer)` returns a result, or the socket ends (then `onEnd`). */
function readUntil<T>(socket: Readable, pred: (b: Buffer) => T | undefined, onEnd: (b: Buffer) => T): Promise<T> {
  return new Promise((resolve, reject) => {
    let buf = Buffer.alloc(0);
    const done = (v: T) => {
      socket.off('data', onData);
      socket.off('end', end);
      socket.off('close', end);
      socket.off('error', reject);
      socket.pause();
      resolve(v);
    };
    const onData = (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      const v = pred(buf);
      if (v !== undefined) done(v);
    };
    const end = () => done(onEnd(buf));
    socket.on('data', onData);
    socket.once('end', end);
    socket.once('close', end);
    socket.once('error', reject);
    socket.resume();
  });
}

export async function dialControl(opts: DialOptions): Promise<DialResult> {
  const transport = opts.transport ?? 'native';
  const init = initiate({ serverPublic: opts.serverPublic, capVersion: opts.capVersion, machine: opts.machine });
  const b64 = opts.handshakeText ?? init.initiation.toString('base64');
  const socket = opts.socketPath ? net.connect(opts.socketPath) : net.connect(opts.port, opts.host ?? '127.0.0.1');
  await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  socket.pause();
  const wsKey = crypto.randomBytes(16).toString('base64');
  const headers: Record<string, string> =
    opts.headers ??
    (transport === 'native'
      ? {
          Host: 'control',
          Upgrade: 'tailscale-control-protocol',
          Connection: opts.connection ?? 'upgrade',
          'X-Tailscale-Handshake': b64,
          'Content-Length': '0',
        }
      : {
          Host: 'control',
          Upgrade: 'websocket',
          Connection: 'Upgrade',
          'Sec-WebSocket-Key': wsKey,
          'Sec-WebSocket-Version': '13',
          'Sec-WebSocket-Protocol': 'tailscale-control-protocol',
        });
  Object.assign(headers, opts.extraHeaders);
  const path = transport === 'native' ? '/ts2021' : b64 === '' ? '/ts2021' : `/ts2021?${new URLSearchParams({ 'X-Tailscale-Handshake': b64 })}`;
  const method = opts.method ?? (transport === 'native' ? 'POST' : 'GET');
  socket.write(
    `${method} ${path} HTTP/1.1\r\n${Object.entries(headers)
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join('')}\r\n`,
  );

  const head = await readUntil(
    socket,
    (b) => {
      const i = b.indexOf('\r\n\r\n');
      return i < 0 ? undefined : { head: b.subarray(0, i).toString('latin1'), rest: b.subarray(i + 4) };
    },
    (b) => ({ head: b.toString('latin1'), rest: Buffer.alloc(0), ended: true }),
  );
  const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(head.head)?.[1] ?? 0);
  if (status !== 101) {
    const body = await readUntil(
      socket,
      () => undefined,
      (b) => Buffer.concat([head.rest, b]).toString('utf8'),
    );
    socket.destroy();
    return { kind: 'http', status, head: head.head, body };
  }

  // After the 101: a stream of Noise bytes, directly (native) or inside websocket binary messages.
  let stream: net.Socket | WebSocketStream = socket;
  if (transport === 'websocket') {
    const ws = new WebSocketStream(socket, head.rest, 'client');
    ws.pause();
    stream = ws;
  } else if (head.rest.length > 0) socket.unshift(head.rest);
  type First =
    | { kind: 'error-frame'; message: string; rest: Buffer }
    | { kind: 'response'; response: Buffer; rest: Buffer }
    | { kind: 'bad' | 'closed'; rest: Buffer };
  const first = await readUntil<First>(
    stream,
    (b) => {
      if (b.length < 3) return undefined;
      const need = 3 + b.readUInt16BE(1);
      if (b[0] === MSG_ERROR)
        return b.length >= need ? { kind: 'error-frame' as const, message: b.subarray(3, need).toString('latin1'), rest: b.subarray(need) } : undefined;
      if (b[0] === MSG_RESPONSE && b.length >= RESPONSE_LEN)
        return { kind: 'response' as const, response: b.subarray(0, RESPONSE_LEN), rest: b.subarray(RESPONSE_LEN) };
      return b[0] === MSG_RESPONSE ? undefined : { kind: 'bad' as const, rest: b };
    },
    (b) => ({ kind: 'closed' as const, rest: b }),
  );
  if (first.kind === 'error-frame') {
    stream.destroy();
    return { kind: 'error-frame', message: first.message };
  }
  if (first.kind !== 'response') {
    stream.destroy();
    return { kind: 'closed', after: `${first.kind} ${first.rest.toString('hex')}` };
  }
  const keys = init.finish(first.response);
  const conn = new NoiseConn(stream, { rx: keys.rx, tx: keys.tx, head: first.rest });
  let early: unknown;
  if (opts.readEarly ?? transport === 'native') {
    const ep = await readUntil(
      conn,
      (b) => {
        const p = parseEarlyPayload(b);
        return p ?? (b.length >= 9 && !b.subarray(0, 5).equals(Buffer.from('ffffff5453', 'hex')) ? { json: undefined, rest: b } : undefined);
      },
      (b) => ({ json: undefined, rest: b }),
    );
    early = ep.json;
    if (ep.rest.length > 0) conn.unshift(ep.rest);
  }
  return { kind: 'ok', conn, socket, early, handshakeHash: keys.handshakeHash, machine: init.machine, raw101: head.head };
}

// ---- Test server: a real HTTP server on loopback wired the way the coordination service wires /ts2021 ----

export interface CapturedLog {
  level: string;
  msg: string;
  fields: Record<string, unknown>;
}

/** A Logger that records instead of printing, so tests can check that refusals are logged with a reason. */
export class CaptureLogger extends Logger {
  readonly lines: CapturedLog[];
  constructor(lines: CapturedLog[] = []) {
    super('test', 'debug');
    this.lines = lines;
  }
  override child(): Logger {
    return this;
  }
  override debug(msg: string, fields: Record<string, unknown> = {}): void {
    this.lines.push({ level: 'debug', msg, fields });
  }
  override info(msg: string, fields: Record<string, unknown> = {}): void {
    this.lines.push({ level: 'info', msg, fields });
  }
  override warn(msg: string, fields: Record<string, unknown> = {}): void {
    this.lines.push({ level: 'warn', msg, fields });
  }
  override error(msg: string, fields: Record<string, unknown> = {}): void {
    this.lines.push({ level: 'error', msg, fields });
  }
}

export interface ControlServer {
  port: number;
  /** Set when started with `socketPath`. */
  socketPath?: string;
  server: http.Server;
  key: X25519Pair;
  log: CaptureLogger;
  /** Connections handed up, in order. */
  accepted: Array<{ conn: Duplex; info: ControlConnInfo }>;
  close(): Promise<void>;
}

/**
 * Starts an HTTP server on 127.0.0.1 (or on `socketPath`) that sends /ts2021 upgrades (and, like coordination's
 * main.ts, plain requests carrying an Upgrade header) to handleControlUpgrade. `serve` gets each connection (default:
 * echo).
 */
export async function startControlServer(
  opts: { serve?: (conn: Duplex, info: ControlConnInfo) => void; handshakeTimeoutMs?: number; http?: http.ServerOptions; socketPath?: string } = {},
): Promise<ControlServer> {
  const key = generatePair();
  const log = new CaptureLogger();
  const accepted: Array<{ conn: Duplex; info: ControlConnInfo }> = [];
  const upgradeOpts = {
    serverPrivateKey: rawPrivateKey(key.privateKey),
    log,
    handshakeTimeoutMs: opts.handshakeTimeoutMs,
    onConnection(conn: Duplex, info: ControlConnInfo) {
      conn.on('error', () => {});
      accepted.push({ conn, info });
      if (opts.serve) opts.serve(conn, info);
      else conn.pipe(conn);
    },
  };
  const server = http.createServer(opts.http ?? {}, (req, res) => {
    if ((req.url ?? '').startsWith('/ts2021') && req.headers.upgrade) return handleControlUpgrade(req, req.socket, Buffer.alloc(0), upgradeOpts);
    res.writeHead(404).end('not found\n');
  });
  server.on('upgrade', (req: http.IncomingMessage, socket: Duplex, head: Buffer) => handleControlUpgrade(req, socket, head, upgradeOpts));
  // What the service's HTTP server (shared/service.ts) does with bytes Node cannot parse: if the takeover failed, this
  // 400 would land in the Noise stream.
  server.on('clientError', (_e: Error, socket: Duplex) => socket.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n'));
  await new Promise<void>((resolve) => (opts.socketPath ? server.listen(opts.socketPath, resolve) : server.listen(0, '127.0.0.1', resolve)));
  const sockets = new Set<Duplex>();
  server.on('connection', (s: Duplex) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  return {
    port: opts.socketPath ? 0 : (server.address() as net.AddressInfo).port,
    socketPath: opts.socketPath,
    server,
    key,
    log,
    accepted,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

/** Resolves when `stream` closes, with the error it was destroyed with (if any). */
export function closed(stream: Duplex): Promise<Error | null> {
  if (stream.destroyed) return Promise.resolve((stream as Duplex & { errored?: Error | null }).errored ?? null);
  return new Promise((resolve) => {
    let err: Error | null = null;
    stream.on('error', (e: Error) => (err = e));
    stream.once('close', () => resolve(err));
  });
}

/** Reads exactly n bytes from a readable (data mode), then pauses it. */
export function readBytes(stream: Readable, n: number): Promise<Buffer> {
  return readUntil(
    stream,
    (b) => (b.length >= n ? b : undefined),
    (b) => b,
  ).then((b) => {
    if (b.length > n) stream.unshift(b.subarray(n));
    return b.subarray(0, n);
  });
}
