// The dialling side of the relay mesh: one MeshLink per configured peer (HSE_DERP_MESH_WITH), the way derper's
// startMesh and derphttp's RunWatchConnectionLoop do it (cmd/derper/mesh.go, derp/derphttp/mesh_client.go):
//
//   dial      GET /derp with Upgrade: DERP to the peer (https, or http inside a private network), our relay key as
//             the client key, ClientInfo carrying the mesh key, then WatchConns at once (before ServerInfo, as derphttp)
//   self      the greeting shows our own key: the entry is this relay itself (derper lets every relay carry the same
//             list) — or an instance that shares our derp.key, which cannot mesh; either way: logged, not dialled again
//   up        ServerInfo opened: the peer admitted us. PeerPresent(key) makes this link the forwarder for that key in
//             the registry; PeerGone(key) (Disconnected, or NotHere after a forwarded disco packet missed) removes it
//   forward   a packet for such a key goes to the peer as ForwardPacket(src, dst, packet); the peer delivers it to its
//             own client and never forwards it further, so every relay dials every other (a full mesh)
//   broken    the connection closes, fails to answer for deadMs, or stops reading: every key it announced is removed
//             at once (derphttp calls this PeerGoneReasonMeshConnBroke) — keys no longer reachable anywhere are gone
//             from the region and our clients that heard from them get PeerGone — then the link dials again after
//             retryMs (or after the peer's Restarting hint); a reconnect announces the peer's clients afresh
//
// Packets wait in a FrameWriter while the peer's connection pushes back, dropped oldest first; a link never blocks the
// client whose packet it carries.
import crypto from 'node:crypto';
import type net from 'node:net';
import type { Duplex } from 'node:stream';
import type { MeshPeerAddress } from '../../../shared/derp-addresses.ts';
import type { Logger } from '../../../shared/log.ts';
import { openServerInfo, sealClientInfo } from './client-info.ts';
import { dialDerp } from './derp-dial.ts';
import { FrameReader, limitPolicy } from './frame-reader.ts';
import { FrameWriter } from './frame-writer.ts';
import {
  decodePeerGone,
  decodePeerPresent,
  decodePing,
  decodeServerKey,
  encodeForwardPacket,
  encodePing,
  encodePong,
  encodeWatchConns,
  FrameError,
  FrameType,
  type Frame,
  looksLikeDisco,
  MAX_CLIENT_FRAME,
  PeerPresentFlags,
} from './frames.ts';
import { meshKeyText } from './mesh-key.ts';
import type { ClientRegistry, MeshForwarder } from './registry.ts';

export interface MeshLinkOptions {
  peer: MeshPeerAddress;
  /** This relay's key pair: the mesh link logs in with it, so the peer (and we, on a self-dial) know who it is. */
  privateKey: Buffer;
  publicKey: Buffer;
  meshKey: Buffer;
  registry: ClientRegistry;
  log: Logger;
  /** Forwarded packets held per queue while the peer pushes back. Default 1024: one link carries many clients. */
  queueDepth?: number;
  /** Wait before dialling again after a failure or a break. Default 5 s (derphttp's retryInterval). */
  retryMs?: number;
  /** A Ping this often; no frame at all for deadMs means the peer is gone. Defaults 15 s and 45 s. */
  pingMs?: number;
  deadMs?: number;
  writeStallMs?: number;
  /** Extra CA certificate (PEM) for https peers; the system's and NODE_EXTRA_CA_CERTS are trusted anyway. */
  ca?: string;
}

export type MeshLinkState = 'connecting' | 'up' | 'down' | 'self' | 'stopped';

/** Time from the TCP connection to ServerInfo. */
const LOGIN_TIMEOUT_MS = 10_000;
/** A peer's Restarting hint is honoured up to this long. */
const MAX_RESTART_WAIT_MS = 30_000;

export class MeshLink implements MeshForwarder {
  readonly name: string;
  private readonly o: MeshLinkOptions;
  private readonly log: Logger;
  private _state: MeshLinkState = 'down';
  private stream: Duplex | null = null;
  private writer: FrameWriter | null = null;
  private reader = new FrameReader(limitPolicy(MAX_CLIENT_FRAME));
  private serverKey: Buffer | null = null;
  /** Keys the peer announced on the current connection. */
  private readonly present = new Set<string>();
  private lastRead = 0;
  private retryTimer: NodeJS.Timeout | null = null;
  private pingTimer: NodeJS.Timeout | null = null;
  private loginTimer: NodeJS.Timeout | null = null;
  private nextRetryMs: number;
  /** Failures since the link was last up (the first is a warning, the rest debug lines). */
  private failures = 0;
  readonly counters = { connects: 0, forwarded: 0, droppedWhileDown: 0 };

  constructor(o: MeshLinkOptions) {
    this.o = o;
    this.name = o.peer.entry;
    this.log = o.log;
    this.nextRetryMs = o.retryMs ?? 5_000;
  }

  get state(): MeshLinkState {
    return this._state;
  }

  /** Clients the peer holds, as it announced them on the current connection. */
  get peerClients(): number {
    return this.present.size;
  }

  /** Packets the peer's connection could not take and dropped. */
  get dropped(): number {
    return this.writer?.dropped ?? 0;
  }

  start(): void {
    if (this._state === 'stopped' || this._state === 'self') return;
    this.connect();
  }

  stop(): void {
    if (this._state === 'up') this.log.info('mesh link closed', { peer: this.name, forwarded: this.counters.forwarded, dropped: this.dropped || undefined });
    this._state = 'stopped';
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = null;
    this.stream?.destroy();
  }

  forward(src: Buffer, dst: Buffer, packet: Buffer): void {
    if (this._state !== 'up' || !this.writer) {
      this.counters.droppedWhileDown++;
      return;
    }
    this.counters.forwarded++;
    this.writer.packet(encodeForwardPacket(src, dst, packet), looksLikeDisco(packet));
  }

  // --- connecting ----------------------------------------------------------------------------------------------

  private connect(): void {
    this._state = 'connecting';
    this.counters.connects++;
    dialDerp({ url: new URL(this.o.peer.url), dialHost: this.o.peer.dialHost, ca: this.o.ca, timeoutMs: LOGIN_TIMEOUT_MS }).then(
      ({ stream }) => this.attach(stream),
      (e: Error) => this.failed(`cannot connect: ${e.message}`),
    );
  }

  private attach(stream: Duplex): void {
    if (this._state === 'stopped') {
      stream.destroy();
      return;
    }
    this.stream = stream;
    (stream as net.Socket).setNoDelay?.(true);
    this.reader = new FrameReader(limitPolicy(MAX_CLIENT_FRAME));
    this.serverKey = null;
    this.writer = new FrameWriter(stream, {
      queueDepth: this.o.queueDepth ?? 1024,
      writeStallMs: this.o.writeStallMs ?? 10_000,
      onStall: () => stream.destroy(new Error('the peer stopped reading')),
    });
    this.lastRead = Date.now();
    this.loginTimer = setTimeout(() => stream.destroy(new Error(`no ServerInfo within ${LOGIN_TIMEOUT_MS} ms`)), LOGIN_TIMEOUT_MS);
    this.loginTimer.unref();
    let why = 'the peer closed the connection';
    stream.on('data', (chunk: Buffer) => {
      this.lastRead = Date.now();
      this.reader.push(chunk);
      try {
        for (let f = this.reader.next(); f !== null && this.stream === stream; f = this.reader.next()) this.onFrame(f);
      } catch (e) {
        if (!(e instanceof FrameError)) throw e;
        stream.destroy(new Error(`malformed frame from the peer: ${e.message}`));
      }
    });
    stream.on('error', (e: Error) => (why = e.message));
    stream.on('close', () => this.detached(stream, why));
  }

  private onFrame(f: Frame): void {
    if (this.serverKey === null) return this.greeting(f);
    switch (f.type) {
      case FrameType.ServerInfo:
        openServerInfo(this.o.privateKey, this.serverKey, f.body);
        this.up();
        return;
      case FrameType.PeerPresent: {
        const { peer, flags } = decodePeerPresent(f.body);
        // derper lists its mesh peers' connections too (ours among them): relays, not clients to forward to.
        if (flags & PeerPresentFlags.IsMeshPeer) return;
        this.present.add(peer.toString('hex'));
        this.o.registry.addForwarder(peer, this);
        return;
      }
      case FrameType.PeerGone: {
        const hex = decodePeerGone(f.body).peer.toString('hex');
        this.present.delete(hex);
        this.o.registry.removeForwarder(hex, this);
        return;
      }
      case FrameType.Ping:
        this.writer?.control(encodePong(decodePing(f.body)));
        return;
      case FrameType.Restarting:
        if (f.body.length >= 4) this.nextRetryMs = Math.min(f.body.readUInt32BE(0), MAX_RESTART_WAIT_MS);
        this.log.info('mesh peer is restarting', { peer: this.name, reconnectInMs: this.nextRetryMs });
        return;
      case FrameType.Health:
        if (f.body.length > 0)
          this.log.warn('mesh peer reports a problem with our connection', { peer: this.name, problem: f.body.toString('utf8').slice(0, 200) });
        return;
      // KeepAlive, Pong, RecvPacket (nobody should send a packet to a relay's key) and anything newer: only liveness.
    }
  }

  private greeting(f: Frame): void {
    if (f.type !== FrameType.ServerKey) throw new FrameError(`expected the server key first, got frame type 0x${f.type.toString(16)}`);
    const key = decodeServerKey(f.body);
    if (key.equals(this.o.publicKey)) {
      this._state = 'self';
      this.log.info('mesh peer is this relay itself; not dialling it', {
        peer: this.name,
        note: 'expected when every relay carries the same HSE_DERP_MESH_WITH; if it is another instance, it shares this derp.key, and each instance needs its own',
      });
      this.stream?.destroy();
      return;
    }
    this.serverKey = key;
    // The mesh key travels sealed to the key that just greeted us: over https that is the peer the certificate names;
    // over plain http anyone on the path could have answered (advanced/ha.md, "Relays").
    this.writer?.control(sealClientInfo(this.o.privateKey, this.o.publicKey, key, { meshKey: meshKeyText(this.o.meshKey), canAckPings: true }));
    this.writer?.control(encodeWatchConns());
  }

  private up(): void {
    if (this._state === 'up') return; // a second ServerInfo changes nothing
    if (this.loginTimer) clearTimeout(this.loginTimer);
    this.loginTimer = null;
    this._state = 'up';
    this.log.info('mesh link up', {
      peer: this.name,
      peerKey: `${this.serverKey?.toString('hex').slice(0, 16)}…`,
      failedAttempts: this.failures || undefined,
    });
    this.failures = 0;
    this.nextRetryMs = this.o.retryMs ?? 5_000;
    const pingMs = this.o.pingMs ?? 15_000;
    const deadMs = this.o.deadMs ?? 45_000;
    this.pingTimer = setInterval(() => {
      if (Date.now() - this.lastRead > deadMs) {
        this.stream?.destroy(new Error(`no frame from the peer for ${Math.round(deadMs / 1000)} s`));
        return;
      }
      this.writer?.control(encodePing(crypto.randomBytes(8)));
    }, pingMs);
    this.pingTimer.unref();
  }

  // --- breaking ------------------------------------------------------------------------------------------------

  private detached(stream: Duplex, why: string): void {
    if (this.stream !== stream) return;
    const wasUp = this._state === 'up';
    const admitted = this.serverKey !== null;
    this.stream = null;
    this.writer?.stop();
    this.writer = null;
    for (const t of [this.pingTimer, this.loginTimer]) if (t) clearTimeout(t);
    this.pingTimer = null;
    this.loginTimer = null;
    // Every key the peer announced goes now: those still reachable will be announced again after the reconnect.
    const lost = this.present.size;
    for (const hex of [...this.present]) this.o.registry.removeForwarder(hex, this);
    this.present.clear();
    if (this._state === 'self' || this._state === 'stopped') return;
    if (wasUp) {
      this._state = 'down';
      this.log.warn('mesh link down', { peer: this.name, reason: why, clientsLost: lost, retryInMs: this.nextRetryMs });
      this.scheduleRetry();
      return;
    }
    this.failed(admitted ? `${why} before admitting us (does the peer have the same mesh key?)` : why);
  }

  private failed(why: string): void {
    if (this._state === 'stopped' || this._state === 'self') return;
    this._state = 'down';
    this.failures++;
    const fields = { peer: this.name, reason: why, attempts: this.failures, retryInMs: this.nextRetryMs };
    if (this.failures === 1) this.log.warn('mesh link cannot reach its peer; retrying', fields);
    else this.log.debug('mesh link still cannot reach its peer', fields);
    this.scheduleRetry();
  }

  private scheduleRetry(): void {
    if (this.retryTimer) return;
    const wait = this.nextRetryMs;
    this.nextRetryMs = this.o.retryMs ?? 5_000;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null;
      if (this._state === 'down') this.connect();
    }, wait);
    this.retryTimer.unref();
  }
}

/** One link per configured peer, started; for main.ts. */
export function startMesh(peers: MeshPeerAddress[], o: Omit<MeshLinkOptions, 'peer'>): MeshLink[] {
  const links = peers.map((peer) => new MeshLink({ ...o, peer, log: o.log }));
  for (const l of links) l.start();
  return links;
}
