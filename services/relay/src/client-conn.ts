// One DERP client connection, from the server's greeting to its close. It reads frames, answers what the protocol
// asks of a server (ServerInfo, Pong, KeepAlive), hands packets to the server for routing, and writes what others
// send it through bounded queues. The transport is any byte stream: the raw upgraded socket or a WebSocket adapter.
//
// Lifecycle (derp/derp.go "Protocol flow"):
//   greeting   server -> ServerKey                       (at once, before reading anything)
//   login      client -> ClientInfo                      (must be the first frame, within the handshake timeout)
//   admission  the server checks the key; frames that arrive meanwhile wait, unread
//   ready      server -> ServerInfo, then both ways: SendPacket/RecvPacket, Ping/Pong, NotePreferred, KeepAlive,
//              PeerGone
// Anything malformed closes this connection only: a FrameError never escapes to the process.
//
// Outgoing frames wait in three queues, written in this order whenever the transport takes data: control frames
// (ServerInfo, PeerGone, Pong, KeepAlive, Health), disco packets, other packets. Packets queue only while the
// transport pushes back; a full queue drops its oldest packet, so a slow client never slows its senders.
import type { Duplex } from 'node:stream';
import { redact, type Logger } from '../../../shared/log.ts';
import { formatKey } from '../../../shared/keys.ts';
import { MAX_CLIENT_INFO_LEN, openClientInfo, sealServerInfo, type ClientInfo } from './client-info.ts';
import { FrameReader, type FramePolicy } from './frame-reader.ts';
import {
  decodeNotePreferred,
  decodePing,
  decodeSendPacket,
  encodeHealth,
  encodeKeepAlive,
  encodePeerGone,
  encodePong,
  encodeRecvPacket,
  encodeServerKey,
  FrameError,
  FrameType,
  KEY_LEN,
  looksLikeDisco,
  MAX_CLIENT_FRAME,
  MAX_PACKET_SIZE,
  MAX_PING_LEN,
  PeerGoneReason,
  type Frame,
} from './frames.ts';
import type { RelayClient } from './registry.ts';
import { DropOldestQueue } from './send-queue.ts';

export interface ConnOptions {
  /** Packets held per queue while the transport pushes back. */
  queueDepth: number;
  /** Keep-alive period; each connection adds its own random jitter so a restart does not synchronise them. */
  keepAliveMs: number;
  keepAliveJitterMs: number;
  /** Time from the greeting to the end of admission. */
  handshakeTimeoutMs: number;
  /** A transport that takes no data for this long belongs to a client that is gone. */
  writeStallMs: number;
}

/** What a connection needs from the server that owns it (DerpServer). */
export interface ConnHost {
  readonly serverPrivate: Buffer;
  readonly serverPublic: Buffer;
  readonly options: ConnOptions;
  readonly log: Logger;
  /** Admission and registration; resolves false when the client is refused. */
  admit(conn: ClientConn): Promise<boolean>;
  /** A packet from `from` to `dst`. */
  route(from: ClientConn, dst: Buffer, packet: Buffer): void;
  /** `src` has sent this client packets: tell it when `src` leaves. */
  watchSender(conn: ClientConn, srcHex: string): void;
  /** The connection is closed; forget it. */
  closed(conn: ClientConn, reason: string): void;
}

export interface ConnMeta {
  /** The client address as the router resolved it (x-hse-client-ip); "" when unknown. */
  clientIp: string;
  transport: 'derp' | 'websocket';
}

type State = 'login' | 'admitting' | 'ready' | 'closed';

/** Control frames are few and tiny; the bound only matters against a client that pings without reading. */
const CONTROL_QUEUE_MAX = 64;
/** Bytes gathered into one transport write. */
const BATCH_BYTES = 64 << 10;
/** PeerGone(NotHere) replies: a burst of 3, then one a second, like the reference server. */
const NOT_HERE_BURST = 3;
const NOT_HERE_PER_MS = 1_000;

export class ClientConn implements RelayClient {
  readonly meta: ConnMeta;
  readonly connectedAt = Date.now();
  key: Buffer = Buffer.alloc(KEY_LEN);
  keyHex = '';
  info: ClientInfo | null = null;
  /** The client says this relay is its home (NotePreferred); only reported. */
  preferred = false;
  packetsIn = 0;
  packetsOut = 0;

  private readonly host: ConnHost;
  private readonly stream: Duplex;
  private readonly reader: FrameReader;
  private state: State = 'login';
  private readonly control: Buffer[] = [];
  private readonly disco: DropOldestQueue<Buffer>;
  private readonly data: DropOldestQueue<Buffer>;
  private pendingPong = false;
  private blocked = false;
  private flushScheduled = false;
  private readonly sawSrc = new Set<string>();
  private notHereTokens = NOT_HERE_BURST;
  private notHereRefill = Date.now();
  private handshakeTimer: NodeJS.Timeout | null = null;
  private keepAliveTimer: NodeJS.Timeout | null = null;
  private stallTimer: NodeJS.Timeout | null = null;

  constructor(host: ConnHost, stream: Duplex, meta: ConnMeta) {
    this.host = host;
    this.stream = stream;
    this.meta = meta;
    this.disco = new DropOldestQueue(host.options.queueDepth);
    this.data = new DropOldestQueue(host.options.queueDepth);
    this.reader = new FrameReader(loginPolicy);
  }

  /** "nodekey:<hex>" shortened for logs. */
  get logKey(): string {
    return this.keyHex ? redact(formatKey('nodekey', this.key), 20) : '';
  }

  get isClosed(): boolean {
    return this.state === 'closed';
  }

  get isReady(): boolean {
    return this.state === 'ready';
  }

  /** Packets dropped from this client's queues because it did not keep up. */
  get dropped(): number {
    return this.disco.dropped + this.data.dropped;
  }

  /** Greets the client and starts reading. */
  start(): void {
    this.stream.on('data', (chunk: Buffer) => this.onData(chunk));
    this.stream.on('end', () => this.close('client closed the connection'));
    this.stream.on('close', () => this.close('connection closed'));
    this.stream.on('error', (e: Error) => this.close(`transport error: ${e.message}`));
    this.handshakeTimer = setTimeout(() => this.close('no login within the handshake timeout'), this.host.options.handshakeTimeoutMs);
    this.handshakeTimer.unref();
    this.stream.write(encodeServerKey(this.host.serverPublic));
  }

  // --- reading -------------------------------------------------------------------------------------------------

  private onData(chunk: Buffer): void {
    if (this.state === 'closed') return;
    this.reader.push(chunk);
    this.pump();
  }

  private pump(): void {
    while (this.state === 'login' || this.state === 'ready') {
      let frame: Frame | null;
      try {
        frame = this.reader.next();
        if (frame === null) return;
        this.handle(frame);
      } catch (e) {
        if (e instanceof FrameError) {
          this.host.log.warn('closing relay connection: malformed frame', { ip: this.meta.clientIp, key: this.logKey || undefined, error: e.message });
          this.close(`malformed frame: ${e.message}`, 'now');
          return;
        }
        throw e;
      }
    }
  }

  private handle(frame: Frame): void {
    if (this.state === 'login') return this.login(frame.body);
    switch (frame.type) {
      case FrameType.SendPacket: {
        const { dst, packet } = decodeSendPacket(frame.body);
        this.packetsIn++;
        this.host.route(this, dst, packet);
        return;
      }
      case FrameType.NotePreferred:
        this.preferred = decodeNotePreferred(frame.body);
        return;
      case FrameType.Ping: {
        const data = decodePing(frame.body);
        // One pong in flight is enough; a client pinging faster than it reads gets the rest ignored.
        if (this.pendingPong) return;
        this.pendingPong = true;
        this.enqueueControl(encodePong(data));
        return;
      }
    }
  }

  private login(body: Buffer): void {
    const { clientKey, info } = openClientInfo(this.host.serverPrivate, body);
    this.key = clientKey;
    this.keyHex = clientKey.toString('hex');
    this.info = info;
    this.state = 'admitting';
    // Frames sent before our ServerInfo (clients do not wait for it) stay in the reader until admission ends.
    this.stream.pause();
    this.host.admit(this).then(
      (ok) => (ok ? this.becomeReady() : this.close('refused', 'graceful')),
      (e: Error) => {
        this.host.log.error('relay admission failed', { ip: this.meta.clientIp, key: this.logKey, error: e.message });
        this.close('admission failed', 'graceful');
      },
    );
  }

  private becomeReady(): void {
    if (this.state !== 'admitting') return;
    this.state = 'ready';
    if (this.handshakeTimer) clearTimeout(this.handshakeTimer);
    this.handshakeTimer = null;
    this.reader.setPolicy(readyPolicy);
    this.enqueueControl(sealServerInfo(this.host.serverPrivate, this.key));
    const { keepAliveMs, keepAliveJitterMs } = this.host.options;
    this.keepAliveTimer = setInterval(() => this.enqueueControl(encodeKeepAlive()), keepAliveMs + Math.floor(Math.random() * keepAliveJitterMs));
    this.keepAliveTimer.unref();
    this.stream.resume();
    this.pump();
  }

  // --- what others send this client (RelayClient) ----------------------------------------------------------------

  deliver(src: Buffer, packet: Buffer): void {
    if (this.state !== 'ready') return;
    const srcHex = src.toString('hex');
    if (!this.sawSrc.has(srcHex)) {
      this.sawSrc.add(srcHex);
      this.host.watchSender(this, srcHex);
    }
    this.packetsOut++;
    this.enqueue(looksLikeDisco(packet) ? this.disco : this.data, encodeRecvPacket(src, packet));
  }

  peerGone(peer: Buffer, reason: number): void {
    if (this.state !== 'ready') return;
    this.sawSrc.delete(peer.toString('hex'));
    this.enqueueControl(encodePeerGone(peer, reason));
  }

  /** The client sent a disco packet to a key nobody holds here: tell it (rate-limited) to stop routing it here. */
  notHere(dst: Buffer): void {
    const now = Date.now();
    this.notHereTokens = Math.min(NOT_HERE_BURST, this.notHereTokens + (now - this.notHereRefill) / NOT_HERE_PER_MS);
    this.notHereRefill = now;
    if (this.notHereTokens < 1) return;
    this.notHereTokens -= 1;
    this.enqueueControl(encodePeerGone(dst, PeerGoneReason.NotHere));
  }

  /** Keys this client has received packets from (it watches them for PeerGone). */
  senders(): Iterable<string> {
    return this.sawSrc;
  }

  // --- writing -------------------------------------------------------------------------------------------------

  private enqueueControl(frame: Buffer): void {
    if (this.state === 'closed') return;
    if (this.control.length >= CONTROL_QUEUE_MAX) {
      if (!this.blocked) this.flush();
      else if (this.control.shift()?.[0] === FrameType.Pong) this.pendingPong = false;
    }
    this.control.push(frame);
    this.scheduleFlush();
  }

  private enqueue(queue: DropOldestQueue<Buffer>, frame: Buffer): void {
    // While the transport takes data, a full queue is written out rather than trimmed: drops are for slow clients.
    if (queue.full && !this.blocked) this.flush();
    queue.push(frame);
    this.scheduleFlush();
  }

  private scheduleFlush(): void {
    if (this.flushScheduled || this.blocked) return;
    this.flushScheduled = true;
    // Everything queued while handling one read goes out in one write.
    setImmediate(() => {
      this.flushScheduled = false;
      this.flush();
    });
  }

  private nextFrame(): Buffer | undefined {
    const c = this.control.shift();
    if (c !== undefined) {
      if (c[0] === FrameType.Pong) this.pendingPong = false;
      return c;
    }
    return this.disco.shift() ?? this.data.shift();
  }

  private flush(): void {
    while (!this.blocked && this.state !== 'closed') {
      const batch: Buffer[] = [];
      let bytes = 0;
      while (bytes < BATCH_BYTES) {
        const f = this.nextFrame();
        if (f === undefined) break;
        batch.push(f);
        bytes += f.length;
      }
      if (batch.length === 0) return;
      if (!this.stream.write(batch.length === 1 ? batch[0] : Buffer.concat(batch, bytes))) {
        this.blocked = true;
        this.stream.once('drain', this.onDrain);
        this.stallTimer = setTimeout(() => this.close('client stopped reading', 'now'), this.host.options.writeStallMs);
        this.stallTimer.unref();
      }
    }
  }

  private readonly onDrain = (): void => {
    this.blocked = false;
    if (this.stallTimer) clearTimeout(this.stallTimer);
    this.stallTimer = null;
    this.flush();
  };

  // --- closing -------------------------------------------------------------------------------------------------

  /** A newer connection with the same key took over: say why, then go. */
  replaced(): void {
    this.close('replaced by a newer connection with the same node key', 'graceful', encodeHealth('another connection with this node key replaced this one'));
  }

  /**
   * Closes the connection once. 'graceful' writes `lastFrame` (if any) and ends the stream; 'now' destroys it.
   * Either way the server forgets the client at once.
   */
  close(reason: string, how: 'graceful' | 'now' = 'graceful', lastFrame?: Buffer): void {
    if (this.state === 'closed') return;
    this.state = 'closed';
    for (const t of [this.handshakeTimer, this.keepAliveTimer, this.stallTimer]) if (t) clearTimeout(t);
    this.control.length = 0;
    this.disco.clear();
    this.data.clear();
    this.host.closed(this, reason);
    if (how === 'now' || this.stream.destroyed || !this.stream.writable) {
      this.stream.destroy();
      return;
    }
    if (lastFrame) this.stream.write(lastFrame);
    this.stream.end();
    // A client that stops reading must not keep the socket open after we are done with it.
    setTimeout(() => this.stream.destroy(), 2_000).unref();
  }
}

// Before login only ClientInfo is acceptable, and only small.
const loginPolicy: FramePolicy = (type, length) => {
  if (type !== FrameType.ClientInfo) throw new FrameError(`expected ClientInfo (0x02) as the first frame, got type 0x${type.toString(16)}`);
  if (length > MAX_CLIENT_INFO_LEN) throw new FrameError(`ClientInfo of ${length} bytes exceeds ${MAX_CLIENT_INFO_LEN}`);
  return 'read';
};

// After login: size limits per type; the mesh frames need a mesh key, which no client has here; anything else is
// skipped unread, as the protocol lets newer clients send frames older servers do not know.
const readyPolicy: FramePolicy = (type, length) => {
  switch (type) {
    case FrameType.SendPacket:
      if (length > KEY_LEN + MAX_PACKET_SIZE) throw new FrameError(`SendPacket of ${length} bytes exceeds the ${MAX_PACKET_SIZE}-byte packet limit`);
      return 'read';
    case FrameType.NotePreferred:
    case FrameType.Ping:
      if (length > MAX_PING_LEN) throw new FrameError(`frame type 0x${type.toString(16)} of ${length} bytes is far larger than it can be`);
      return 'read';
    case FrameType.ForwardPacket:
    case FrameType.WatchConns:
    case FrameType.ClosePeer:
      throw new FrameError(`frame type 0x${type.toString(16)} is for meshed relays and needs the mesh key`);
    default:
      if (length > MAX_CLIENT_FRAME) throw new FrameError(`frame type 0x${type.toString(16)} of ${length} bytes exceeds ${MAX_CLIENT_FRAME}`);
      return 'skip';
  }
};
