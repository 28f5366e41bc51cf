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
// Outgoing frames go through a FrameWriter (frame-writer.ts): control frames first, then mesh presence updates, disco
// packets, other packets; a slow client's packets are dropped oldest first, so it never slows its senders.
//
// A connection that presented the region's mesh key (another relay, derp-server.ts decides) is a mesh peer: it is not
// a client in the registry, and it may also send the three mesh frames — WatchConns (then it hears PeerPresent /
// PeerGone for this relay's clients), ForwardPacket (a packet for one of our clients from a client of its own) and
// ClosePeer. Any other connection that sends one of them is closed, as derper does.
import type { Duplex } from 'node:stream';
import { redact, type Logger } from '../../../shared/log.ts';
import { formatKey } from '../../../shared/keys.ts';
import { MAX_CLIENT_INFO_LEN, openClientInfo, sealServerInfo, type ClientInfo } from './client-info.ts';
import { FrameReader, type FramePolicy } from './frame-reader.ts';
import { FrameWriter } from './frame-writer.ts';
import {
  decodeClosePeer,
  decodeForwardPacket,
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
import { TurnBudget } from '../../../shared/turn-budget.ts';

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
  /** Mesh peers only: subscribe `conn` to this relay's clients coming and going. */
  watchConns(conn: ClientConn): void;
  /** Mesh peers only: a packet from `src` (a client of the peer) for our client `dst`. */
  forwarded(conn: ClientConn, src: Buffer, dst: Buffer, packet: Buffer): void;
  /** Mesh peers only: close our connection(s) of `peer`. */
  closePeer(conn: ClientConn, peer: Buffer): void;
  /** The connection is closed; forget it. */
  closed(conn: ClientConn, reason: string): void;
}

export interface ConnMeta {
  /** The client address as the router resolved it (x-hse-client-ip); "" when unknown. */
  clientIp: string;
  transport: 'derp' | 'websocket';
}

type State = 'login' | 'admitting' | 'ready' | 'closed';

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
  /** Another relay of the region, admitted by the mesh key (set during admission, before the connection is ready). */
  meshPeer = false;
  packetsIn = 0;
  packetsOut = 0;

  private readonly host: ConnHost;
  private readonly stream: Duplex;
  private readonly reader: FrameReader;
  private readonly turn: TurnBudget;
  private state: State = 'login';
  private readonly writer: FrameWriter;
  private pendingPong = false;
  private readonly sawSrc = new Set<string>();
  private notHereTokens = NOT_HERE_BURST;
  private notHereRefill = Date.now();
  private handshakeTimer: NodeJS.Timeout | null = null;
  private keepAliveTimer: NodeJS.Timeout | null = null;

  constructor(host: ConnHost, stream: Duplex, meta: ConnMeta) {
    this.host = host;
    this.stream = stream;
    this.meta = meta;
    this.writer = new FrameWriter(stream, {
      queueDepth: host.options.queueDepth,
      writeStallMs: host.options.writeStallMs,
      onStall: () => this.close('client stopped reading', 'now'),
      onControlGone: (frame) => {
        if (frame[0] === FrameType.Pong) this.pendingPong = false;
      },
    });
    this.reader = new FrameReader(loginPolicy);
    this.turn = new TurnBudget(stream);
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
    return this.writer.dropped;
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
    this.turn.spend(chunk.length);
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
      // The reader's policy lets the mesh frames through only for a mesh peer.
      case FrameType.WatchConns:
        this.host.watchConns(this);
        return;
      case FrameType.ForwardPacket: {
        const { src, dst, packet } = decodeForwardPacket(frame.body);
        this.packetsIn++;
        this.host.forwarded(this, src, dst, packet);
        return;
      }
      case FrameType.ClosePeer:
        this.host.closePeer(this, decodeClosePeer(frame.body));
        return;
    }
  }

  private login(body: Buffer): void {
    const { clientKey, info } = openClientInfo(this.host.serverPrivate, body);
    this.key = clientKey;
    this.keyHex = clientKey.toString('hex');
    this.info = info;
    this.state = 'admitting';
    // Frames sent before our ServerInfo (clients do not wait for it) stay in the reader until admission ends.
    this.turn.hold();
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
    this.reader.setPolicy(this.meshPeer ? meshPeerPolicy : readyPolicy);
    this.enqueueControl(sealServerInfo(this.host.serverPrivate, this.key));
    const { keepAliveMs, keepAliveJitterMs } = this.host.options;
    this.keepAliveTimer = setInterval(() => this.enqueueControl(encodeKeepAlive()), keepAliveMs + Math.floor(Math.random() * keepAliveJitterMs));
    this.keepAliveTimer.unref();
    this.turn.release();
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
    this.writer.packet(encodeRecvPacket(src, packet), looksLikeDisco(packet));
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

  /** For a mesh watcher: `peer`, a client of this relay, arrived (a PeerPresent frame) or left (a PeerGone frame). */
  presence(peerHex: string, frame: Buffer): void {
    if (this.state !== 'ready') return;
    this.writer.presence(peerHex, frame);
  }

  // --- writing -------------------------------------------------------------------------------------------------

  private enqueueControl(frame: Buffer): void {
    if (this.state === 'closed') return;
    this.writer.control(frame);
  }

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
    for (const t of [this.handshakeTimer, this.keepAliveTimer]) if (t) clearTimeout(t);
    this.writer.stop();
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

// After login: size limits per type; the mesh frames need the mesh key, so they close a client's connection;
// anything else is skipped unread, as the protocol lets newer clients send frames older servers do not know.
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

// A mesh peer may also send the mesh frames, each of its exact size (derpserver.go handleFrameWatchConns,
// handleFrameClosePeer, recvForwardPacket).
const meshPeerPolicy: FramePolicy = (type, length) => {
  switch (type) {
    case FrameType.WatchConns:
      if (length !== 0) throw new FrameError(`WatchConns carries no body, got ${length} bytes`);
      return 'read';
    case FrameType.ClosePeer:
      if (length !== KEY_LEN) throw new FrameError(`ClosePeer must be ${KEY_LEN} bytes, got ${length}`);
      return 'read';
    case FrameType.ForwardPacket:
      if (length > 2 * KEY_LEN + MAX_PACKET_SIZE) throw new FrameError(`ForwardPacket of ${length} bytes exceeds the ${MAX_PACKET_SIZE}-byte packet limit`);
      return 'read';
    default:
      return readyPolicy(type, length);
  }
};
