// A small DERP client, for our tests and benchmarks (the relay's own outgoing connections are its mesh links,
// mesh-link.ts). It speaks the protocol the way Tailscale's derp/derphttp client does: HTTP upgrade (or WebSocket),
// wait for the server key, send ClientInfo, then read frames as messages. Deliberately thin, with a raw-write escape
// hatch so tests can send malformed frames, and the mesh frames (with a mesh key in `info`) so tests can act as a
// relay of the region.
import type http from 'node:http';
import type { Duplex } from 'node:stream';
import { openServerInfo, sealClientInfo, type ClientInfo } from './client-info.ts';
import { dialDerp } from './derp-dial.ts';
import { FrameReader, limitPolicy } from './frame-reader.ts';
import {
  decodePeerGone,
  decodePeerPresent,
  decodeRecvPacket,
  decodeServerKey,
  encodeClosePeer,
  encodeForwardPacket,
  encodeNotePreferred,
  encodePing,
  encodePong,
  encodeSendPacket,
  encodeWatchConns,
  FrameType,
  MAX_CLIENT_FRAME,
  type Frame,
} from './frames.ts';
import { newPrivateKey, publicKeyOf } from './nacl-box.ts';

export type DerpMessage =
  | { type: 'serverInfo'; version: number }
  | { type: 'packet'; src: Buffer; data: Buffer }
  | { type: 'peerGone'; peer: Buffer; reason: number }
  | { type: 'peerPresent'; peer: Buffer; ip: string; port: number; flags: number }
  | { type: 'keepAlive' }
  | { type: 'ping'; data: Buffer }
  | { type: 'pong'; data: Buffer }
  | { type: 'health'; problem: string }
  | { type: 'restarting'; reconnectInMs: number; tryForMs: number }
  | { type: 'other'; frameType: number; body: Buffer };

export interface DerpClientOptions {
  /** A DERP URL, http(s)://host[:port]/derp (with `ca` to trust for https) ... */
  url?: URL;
  ca?: string;
  /** ... or the relay's Unix socket (tests) ... */
  socketPath?: string;
  /** ... or a TCP host and port (the router). */
  host?: string;
  port?: number;
  privateKey?: Buffer;
  websocket?: boolean;
  /** Sent as x-hse-client-ip, as the router would. */
  clientIp?: string;
  /** The Upgrade token to ask for (default "DERP"). */
  upgrade?: string;
  info?: Partial<ClientInfo>;
  /** Answer the server's pings (the real client does). Default true. */
  answerPings?: boolean;
}

export class DerpClient {
  readonly privateKey: Buffer;
  readonly publicKey: Buffer;
  serverKey: Buffer = Buffer.alloc(0);
  /** The 101 response headers. */
  upgradeHeaders: http.IncomingHttpHeaders = {};
  private readonly stream: Duplex;
  private readonly reader = new FrameReader(limitPolicy(MAX_CLIENT_FRAME));
  private readonly inbox: DerpMessage[] = [];
  private waiters: { resolve: (m: DerpMessage) => void; reject: (e: Error) => void }[] = [];
  private ended: Error | null = null;
  private gotGreeting = false;
  private greeted: ((key: Buffer) => void) | null = null;
  private readonly answerPings: boolean;
  /** Resolves when the connection is gone. */
  readonly closed: Promise<void>;

  private constructor(stream: Duplex, privateKey: Buffer, answerPings: boolean) {
    this.stream = stream;
    this.privateKey = privateKey;
    this.publicKey = publicKeyOf(privateKey);
    this.answerPings = answerPings;
    this.closed = new Promise((resolve) => stream.once('close', () => resolve()));
    stream.on('data', (c: Buffer) => this.onData(c));
    stream.on('error', (e: Error) => this.end(e));
    stream.on('close', () => this.end(new Error('connection closed by the relay')));
  }

  /** Upgrades, reads the server key and sends ClientInfo; does not wait for ServerInfo (nor does the real client). */
  static async connect(o: DerpClientOptions): Promise<DerpClient> {
    const { stream, headers } = await dialDerp(o);
    const c = new DerpClient(stream, o.privateKey ?? newPrivateKey(), o.answerPings ?? true);
    c.upgradeHeaders = headers;
    c.serverKey = await c.greeting();
    c.stream.write(sealClientInfo(c.privateKey, c.publicKey, c.serverKey, o.info));
    return c;
  }

  private greeting(): Promise<Buffer> {
    return new Promise((resolve, reject) => {
      if (this.serverKey.length) return resolve(this.serverKey);
      this.greeted = resolve;
      this.stream.once('close', () => reject(new Error('relay closed before its greeting')));
    });
  }

  private onData(chunk: Buffer): void {
    this.reader.push(chunk);
    let f: Frame | null;
    try {
      for (f = this.reader.next(); f !== null; f = this.reader.next()) this.onFrame(f);
    } catch (e) {
      this.stream.destroy(e as Error);
    }
  }

  private onFrame(f: Frame): void {
    if (!this.gotGreeting) {
      // The first frame is always the server's key.
      this.gotGreeting = true;
      this.serverKey = decodeServerKey(f.body);
      this.greeted?.(this.serverKey);
      this.greeted = null;
      return;
    }
    let m: DerpMessage;
    switch (f.type) {
      case FrameType.ServerInfo:
        m = { type: 'serverInfo', version: openServerInfo(this.privateKey, this.serverKey, f.body).version };
        break;
      case FrameType.RecvPacket: {
        const { src, packet } = decodeRecvPacket(f.body);
        m = { type: 'packet', src: Buffer.from(src), data: Buffer.from(packet) };
        break;
      }
      case FrameType.PeerGone: {
        const { peer, reason } = decodePeerGone(f.body);
        m = { type: 'peerGone', peer: Buffer.from(peer), reason };
        break;
      }
      case FrameType.PeerPresent: {
        const p = decodePeerPresent(f.body);
        m = { type: 'peerPresent', peer: Buffer.from(p.peer), ip: p.ip, port: p.port, flags: p.flags };
        break;
      }
      case FrameType.KeepAlive:
        m = { type: 'keepAlive' };
        break;
      case FrameType.Ping:
        m = { type: 'ping', data: Buffer.from(f.body.subarray(0, 8)) };
        if (this.answerPings) this.stream.write(encodePong(m.data));
        break;
      case FrameType.Pong:
        m = { type: 'pong', data: Buffer.from(f.body.subarray(0, 8)) };
        break;
      case FrameType.Health:
        m = { type: 'health', problem: f.body.toString('utf8') };
        break;
      case FrameType.Restarting:
        m = { type: 'restarting', reconnectInMs: f.body.readUInt32BE(0), tryForMs: f.body.readUInt32BE(4) };
        break;
      default:
        m = { type: 'other', frameType: f.type, body: Buffer.from(f.body) };
    }
    const w = this.waiters.shift();
    if (w) w.resolve(m);
    else this.inbox.push(m);
  }

  private end(e: Error): void {
    if (this.ended) return;
    this.ended = e;
    for (const w of this.waiters.splice(0)) w.reject(e);
  }

  /** The next message; rejects when the connection is gone (after queued messages) or after `ms`. */
  recv(ms = 10_000): Promise<DerpMessage> {
    const queued = this.inbox.shift();
    if (queued) return Promise.resolve(queued);
    if (this.ended) return Promise.reject(this.ended);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w.resolve !== done);
        reject(new Error(`no DERP message within ${ms} ms`));
      }, ms);
      const done = (m: DerpMessage) => {
        clearTimeout(timer);
        resolve(m);
      };
      this.waiters.push({
        resolve: done,
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
      });
    });
  }

  /** Skips messages until one matches (keep-alives, server info, ...). */
  async waitFor<T extends DerpMessage['type']>(
    type: T,
    match: (m: Extract<DerpMessage, { type: T }>) => boolean = () => true,
    ms = 10_000,
  ): Promise<Extract<DerpMessage, { type: T }>> {
    const deadline = Date.now() + ms;
    for (;;) {
      const m = await this.recv(Math.max(1, deadline - Date.now()));
      if (m.type === type && match(m as Extract<DerpMessage, { type: T }>)) return m as Extract<DerpMessage, { type: T }>;
    }
  }

  send(dst: Buffer, packet: Uint8Array): void {
    this.stream.write(encodeSendPacket(dst, packet));
  }

  ping(data: Buffer): void {
    this.stream.write(encodePing(data));
  }

  /** Mesh frames: the relay closes the connection unless ClientInfo carried its mesh key. */
  watchConns(): void {
    this.stream.write(encodeWatchConns());
  }

  forward(src: Buffer, dst: Buffer, packet: Uint8Array): void {
    this.stream.write(encodeForwardPacket(src, dst, packet));
  }

  closePeer(peer: Buffer): void {
    this.stream.write(encodeClosePeer(peer));
  }

  notePreferred(preferred: boolean): void {
    this.stream.write(encodeNotePreferred(preferred));
  }

  /** Writes bytes as they are: for malformed-frame tests. */
  writeRaw(bytes: Uint8Array): void {
    this.stream.write(bytes);
  }

  /** Stops reading, as a client that cannot keep up would; the relay must then queue and drop, not stall. */
  pause(): void {
    this.stream.pause();
  }

  resume(): void {
    this.stream.resume();
  }

  get isClosed(): boolean {
    return this.ended !== null;
  }

  close(): void {
    this.stream.destroy();
  }
}
