// Raw HTTP/1.1 upgrade tunnels to a service's Unix socket, for any method and any protocol: POST /ts2021 with
// `Upgrade: tailscale-control-protocol`, GET /derp with `Upgrade: DERP`, WebSocket. (http-proxy's ws() destroys every
// upgrade that is not GET + websocket, so it cannot carry these.)
//
// Sequence:
//   1. send the service the request head: same method, target and headers as the client's (case and order kept),
//      forgeable headers replaced (forward-headers.ts), hop-by-hop headers dropped, `Connection: Upgrade` set;
//   2. pass on the request's own body (Content-Length bytes; a service may answer an upgrade request without
//      switching, and needs its body for that), then hold the client's further bytes until the service answers, so
//      nothing reaches the service outside a protocol it agreed to (no request can be smuggled past the router's
//      header rewriting);
//   3. on `101`: send the client the service's 101 head (status text and headers as the service wrote them, so
//      `Upgrade:` is echoed exactly, which Go-based proxies in front of us insist on), then the bytes the service
//      sent after it, then the bytes the client sent after its head, then splice both sockets;
//   4. on any other status: pass that response on and close.
// Either side closing or failing closes the other: a tunnel never outlives one of its ends.
import type http from 'node:http';
import * as nodeHttp from '../../shared/node-http.ts';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { Logger } from '../../shared/log.ts';
import type { ServiceName } from '../../shared/paths.ts';
import { originForm } from './routes.ts';
import { takeOverRequestSocket } from '../../shared/http-takeover.ts';
import { REASONS, upstreamFailure, writeRawResponse } from './unavailable.ts';
import { countUpgrade } from './router-metrics.ts';
import { TurnBudget } from '../../shared/turn-budget.ts';

export interface Target {
  service: ServiceName;
  socketPath: string;
}

/** Open tunnels, so a drain can close them. */
export class TunnelSet {
  private readonly open = new Set<() => void>();
  get size(): number {
    return this.open.size;
  }
  add(close: () => void): () => void {
    this.open.add(close);
    return () => this.open.delete(close);
  }
  closeAll(): void {
    for (const close of [...this.open]) close();
  }
}

export interface TunnelDeps {
  log: Logger;
  tunnels: TunnelSet;
}

/** Hop-by-hop response headers that describe the service's connection to us, not ours to the client. */
const RESPONSE_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'proxy-connection']);

// The request to the service. `headers` is a rawHeaders-style list already rewritten by the caller; a request with
// no body framing gets `Content-Length: 0`, because Node would otherwise frame a bodiless POST as chunked and put
// a "0\r\n\r\n" terminator in front of the tunnelled bytes.
function requestUpstream(req: http.IncomingMessage, headers: string[], target: Target): http.ClientRequest {
  const lower = new Set<string>();
  for (let i = 0; i < headers.length; i += 2) lower.add(headers[i].toLowerCase());
  const out = [...headers, 'Connection', 'Upgrade'];
  if (!lower.has('content-length') && !lower.has('transfer-encoding')) out.push('Content-Length', '0');
  return nodeHttp.request({
    socketPath: target.socketPath,
    method: req.method,
    path: originForm(req.url ?? '/'),
    headers: out,
    agent: false,
  });
}

// 101 head as the service wrote it. Layout: "HTTP/1.1 101 <reason>\r\n" + "<Name>: <value>\r\n"* + "\r\n".
function switchingHead(res: http.IncomingMessage): string {
  let head = `HTTP/1.1 101 ${res.statusMessage || 'Switching Protocols'}\r\n`;
  for (let i = 0; i + 1 < res.rawHeaders.length; i += 2) head += `${res.rawHeaders[i]}: ${res.rawHeaders[i + 1]}\r\n`;
  return `${head}\r\n`;
}

/** Ends a socket gracefully (pending bytes flushed), and destroys it once that is done or clearly will not be. */
function finish(s: Duplex): void {
  if (s.destroyed) return;
  s.once('finish', () => s.destroy());
  s.end();
  // A peer that stopped reading must not keep a dead tunnel's socket forever.
  setTimeout(() => s.destroy(), 5_000).unref();
}

/**
 * Passes `from`'s bytes to `to` as they arrive, pausing `from` while `to` pushes back, and at most a turn budget of
 * them per event-loop turn (shared/turn-budget.ts: a busy tunnel must not make a quiet one wait a whole turn). A
 * half-close (FIN) is passed on.
 */
function pass(from: Duplex, to: Duplex): void {
  const turn = new TurnBudget(from);
  const drained = () => turn.release();
  from.on('data', (chunk: Buffer) => {
    if (!to.write(chunk)) {
      turn.hold();
      to.once('drain', drained);
    }
    turn.spend(chunk.length);
  });
  from.once('end', () => to.end());
  // The client's socket was paused until the service switched protocols (RequestBody): a 'data' listener alone
  // does not restart a stream paused on purpose.
  from.resume();
}

/** Splices two sockets. Returns when set up; `onClose` runs once, when the tunnel is gone. */
function splice(client: Duplex, upstream: Duplex, deps: TunnelDeps, service: ServiceName): void {
  let done = false;
  const close = (hard: boolean) => {
    if (done) return;
    done = true;
    forget();
    if (hard) {
      client.destroy();
      upstream.destroy();
    } else {
      finish(client);
      finish(upstream);
    }
    deps.log.debug('tunnel closed', { service });
  };
  const forget = deps.tunnels.add(() => close(true));
  countUpgrade(service);
  pass(client, upstream);
  pass(upstream, client);
  for (const s of [client, upstream]) {
    s.on('error', (e: Error) => {
      deps.log.debug('tunnel socket error', { service, error: e.message });
      close(true);
    });
    // A half-close (FIN) is passed on (pass()); a full close of one side ends the other.
    s.on('close', () => close(false));
  }
}

function relayRefusal(client: Duplex, res: http.IncomingMessage): void {
  let head = `HTTP/1.1 ${res.statusCode} ${res.statusMessage ?? ''}\r\n`;
  for (let i = 0; i + 1 < res.rawHeaders.length; i += 2) {
    if (RESPONSE_HOP.has(res.rawHeaders[i].toLowerCase())) continue;
    head += `${res.rawHeaders[i]}: ${res.rawHeaders[i + 1]}\r\n`;
  }
  // Without Content-Length the body is delimited by the close that follows.
  client.write(`${head}Connection: close\r\n\r\n`);
  res.pipe(client);
  res.on('error', () => client.destroy());
}

/**
 * The 'upgrade' event path: Node has already handed over `client`, and `head` holds the bytes the client sent after
 * its request head.
 */
export function tunnelUpgrade(req: http.IncomingMessage, client: Socket, head: Buffer, headers: string[], target: Target, deps: TunnelDeps): void {
  client.on('error', (e: Error) => deps.log.debug('client socket error before tunnel', { error: e.message }));
  if (req.headers['transfer-encoding'] !== undefined) {
    // The body of such a request is already parsed away by Node, so it could not be passed on faithfully.
    writeRawResponse(client, 400, REASONS[400], 'hse: an upgrade request must not have a chunked body\n');
    return;
  }
  const up = requestUpstream(req, headers, target);
  client.once('close', () => up.destroy());
  up.on('error', (e: NodeJS.ErrnoException) => {
    const f = upstreamFailure(e, target.service);
    deps.log.warn('service unavailable for upgrade', { service: target.service, status: f.status, error: e.code ?? e.message });
    writeRawResponse(client, f.status, REASONS[f.status], f.body);
  });
  // The request's own body (Content-Length bytes) is part of the request, not of the new protocol: it goes to the
  // service now, whatever it answers. Only what the client sends after it waits for the 101.
  const body = new RequestBody(client, head, Number(req.headers['content-length'] ?? 0), up);
  up.on('upgrade', (res: http.IncomingMessage, upSocket: Socket, upHead: Buffer) => {
    upSocket.on('error', () => {});
    if (client.destroyed) {
      upSocket.destroy();
      return;
    }
    const after = body.stop();
    client.write(switchingHead(res));
    if (upHead.length > 0) client.write(upHead);
    if (after.length > 0) upSocket.write(after);
    splice(client, upSocket, deps, target.service);
  });
  // The body keeps flowing to the service while the refusal is relayed, so the client is not reset mid-body.
  up.on('response', (res: http.IncomingMessage) => relayRefusal(client, res));
}

/**
 * Passes the body of an upgrade request (the 'upgrade' event path, where Node has handed over the raw socket) to the
 * service: `declared` bytes from what arrived with the head, then from the socket, ending the upstream request once
 * they are through. Bytes beyond the body are kept for after a 101.
 */
class RequestBody {
  private readonly client: Socket;
  private readonly up: http.ClientRequest;
  private remaining: number;
  private held: Buffer[] = [];
  private readonly onData = (chunk: Buffer) => this.take(chunk);

  constructor(client: Socket, head: Buffer, declared: number, up: http.ClientRequest) {
    this.client = client;
    this.up = up;
    this.remaining = Number.isSafeInteger(declared) && declared > 0 ? declared : 0;
    this.take(head);
    if (this.remaining > 0) client.on('data', this.onData);
  }

  private take(chunk: Buffer): void {
    if (chunk.length === 0 && this.remaining > 0) return;
    const n = Math.min(this.remaining, chunk.length);
    if (n > 0) {
      this.remaining -= n;
      if (!this.up.write(chunk.subarray(0, n)) && this.remaining > 0) {
        this.client.pause();
        this.up.once('drain', () => this.client.resume());
      }
    }
    if (n < chunk.length) this.held.push(chunk.subarray(n));
    if (this.remaining === 0) {
      this.client.off('data', this.onData);
      // Nothing reads the socket until the tunnel is spliced: further bytes wait in the kernel.
      this.client.pause();
      if (!this.up.writableEnded) this.up.end();
    }
  }

  /** Stops passing body bytes on; returns what the client sent beyond them, to be sent after a 101. */
  stop(): Buffer {
    this.client.off('data', this.onData);
    const after = Buffer.concat(this.held);
    this.held = [];
    return after;
  }
}

/**
 * The 'request' event path: an `Upgrade:` request whose Connection header did not say "upgrade". Anything before
 * the 101 (a body, a refusal) goes through Node's HTTP machinery as usual; only a 101 takes the socket over.
 */
export function tunnelRequest(req: http.IncomingMessage, res: http.ServerResponse, headers: string[], target: Target, deps: TunnelDeps): void {
  const up = requestUpstream(req, headers, target);
  res.once('close', () => {
    if (!res.writableFinished) up.destroy();
  });
  up.on('error', (e: NodeJS.ErrnoException) => {
    const f = upstreamFailure(e, target.service);
    deps.log.warn('service unavailable for upgrade', { service: target.service, status: f.status, error: e.code ?? e.message });
    if (res.headersSent) res.destroy();
    else res.writeHead(f.status, { 'content-type': 'text/plain; charset=utf-8', connection: 'close' }).end(f.body);
  });
  up.on('upgrade', (upRes: http.IncomingMessage, upSocket: Socket, upHead: Buffer) => {
    upSocket.on('error', () => {});
    req.unpipe(up);
    if (req.socket.destroyed) {
      upSocket.destroy();
      return;
    }
    const client = takeOverRequestSocket(req);
    if (!client) {
      // This Node's HTTP internals are not what the takeover expects (test/router/upgrade.test.ts pins them).
      deps.log.error('cannot take over the client connection after a 101; closing it', { service: target.service });
      upSocket.destroy();
      req.socket.destroy();
      return;
    }
    client.write(switchingHead(upRes));
    if (upHead.length > 0) client.write(upHead);
    splice(client, upSocket, deps, target.service);
  });
  up.on('response', (upRes: http.IncomingMessage) => {
    const headers: string[] = [];
    for (let i = 0; i + 1 < upRes.rawHeaders.length; i += 2) {
      if (!RESPONSE_HOP.has(upRes.rawHeaders[i].toLowerCase())) headers.push(upRes.rawHeaders[i], upRes.rawHeaders[i + 1]);
    }
    res.writeHead(upRes.statusCode ?? 502, upRes.statusMessage, headers);
    upRes.pipe(res);
    upRes.on('error', () => res.destroy());
  });
  req.pipe(up);
}
