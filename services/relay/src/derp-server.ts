// The DERP server: accepts connections, admits clients, routes packets between them through the registry, and
// closes clients whose node was deleted or re-keyed. One instance per relay process.
// Reference: derp/derpserver/derpserver.go (accept, registerClient, unregisterClient, handleFrameSendPacket).
//
// Mesh (the server side; the dialling side is mesh-link.ts): a connection whose ClientInfo carries the region's mesh
// key is another relay. It skips node-key admission (derpserver.go verifyClient: a relay is not a node of the
// tailnet) and is not a client in the registry; it may subscribe to our clients (WatchConns: PeerPresent for each
// now, then PeerPresent / PeerGone as they come and go), hand us packets for our clients (ForwardPacket) and close a
// client (ClosePeer, as derper: every connection of that key). A connection presenting any other mesh key is refused
// outright, and so is one presenting a key when this relay has none: a relay misconfigured, said plainly in the log.
import type { Duplex } from 'node:stream';
import { formatKey, parseKey } from '../../../shared/keys.ts';
import type { Logger } from '../../../shared/log.ts';
import type { Admission, Verdict } from './admission.ts';
import { ClientConn, type ConnHost, type ConnMeta, type ConnOptions } from './client-conn.ts';
import { encodePeerGone, encodePeerPresent, encodeRestarting, looksLikeDisco, PeerGoneReason, PeerPresentFlags } from './frames.ts';
import { meshKeyMatches } from './mesh-key.ts';
import { RegionRegistry, type ClientRegistry } from './registry.ts';

export interface DerpServerOptions {
  privateKey: Buffer;
  publicKey: Buffer;
  admission: Admission;
  log: Logger;
  queueDepth: number;
  registry?: ClientRegistry;
  /** The region's mesh key; null = no relay may mesh with this one. */
  meshKey?: Buffer | null;
  /** Defaults: 60 s keep-alive + up to 5 s jitter (derp.KeepAlive), 10 s handshake, 10 s write stall. */
  keepAliveMs?: number;
  keepAliveJitterMs?: number;
  handshakeTimeoutMs?: number;
  writeStallMs?: number;
  /** Called for every refused client (after it is logged), e.g. to write the activity log. */
  onRefused?: (clientIp: string, nodeKey: string, verdict: Verdict & { admitted: false }) => void;
}

export interface DerpStats {
  clients: number;
  connections: number;
  accepted: number;
  refused: number;
  packetsRelayed: number;
  packetsToNowhere: number;
  /** Keys reachable through the mesh only. */
  remoteClients: number;
  /** Mesh peers connected to us (their relays dialled this one). */
  meshPeers: number;
  meshRefused: number;
  /** Packets we handed to a mesh link / received from a mesh peer for one of our clients. */
  packetsForwardedOut: number;
  packetsForwardedIn: number;
  /** Payload bytes relayed and forwarded in. */
  bytesRelayed: number;
  /** Packets dropped from the queues of connections closed since (see packetsDropped for the total). */
  droppedClosed: number;
}

/** How long a draining relay waits for its clients to go before the process exits anyway. */
const DRAIN_WAIT_MS = 3_000;

export class DerpServer implements ConnHost {
  readonly serverPrivate: Buffer;
  readonly serverPublic: Buffer;
  readonly options: ConnOptions;
  readonly log: Logger;
  readonly registry: ClientRegistry;
  private readonly admission: Admission;
  private readonly meshKey: Buffer | null;
  /** Mesh peers that sent WatchConns: they hear about every local client that comes or goes. */
  private readonly watchers = new Set<ClientConn>();
  private readonly onRefused: DerpServerOptions['onRefused'];
  /** Every open connection, logged in or not. */
  private readonly conns = new Set<ClientConn>();
  /** Transports not yet closed: a drain waits for these, so goodbyes reach the wire before the process exits. */
  private readonly streams = new Set<Duplex>();
  private draining = false;
  private readonly counters = {
    accepted: 0,
    refused: 0,
    packetsRelayed: 0,
    packetsToNowhere: 0,
    meshRefused: 0,
    packetsForwardedOut: 0,
    packetsForwardedIn: 0,
    /** Payload bytes of the packets relayed (to local clients and to mesh peers) and forwarded in from mesh peers. */
    bytesRelayed: 0,
    /** Packets dropped from the queues of connections that have since closed (live ones: their own `dropped`). */
    droppedClosed: 0,
  };

  constructor(o: DerpServerOptions) {
    this.serverPrivate = o.privateKey;
    this.serverPublic = o.publicKey;
    this.admission = o.admission;
    this.log = o.log;
    this.registry = o.registry ?? new RegionRegistry();
    this.meshKey = o.meshKey ?? null;
    this.onRefused = o.onRefused;
    this.options = {
      queueDepth: o.queueDepth,
      keepAliveMs: o.keepAliveMs ?? 60_000,
      keepAliveJitterMs: o.keepAliveJitterMs ?? 5_000,
      handshakeTimeoutMs: o.handshakeTimeoutMs ?? 10_000,
      writeStallMs: o.writeStallMs ?? 10_000,
    };
  }

  /** Packets dropped because their client did not keep up, over the relay's life (closed and live connections). */
  get packetsDropped(): number {
    let n = this.counters.droppedClosed;
    for (const c of this.conns) n += c.dropped;
    return n;
  }

  get stats(): DerpStats {
    let meshPeers = 0;
    for (const c of this.conns) if (c.meshPeer) meshPeers++;
    return { clients: this.registry.size, connections: this.conns.size, remoteClients: this.registry.remoteSize, meshPeers, ...this.counters };
  }

  /** Takes over an upgraded byte stream (the 101 is already written) and runs the DERP protocol on it. */
  accept(stream: Duplex, meta: ConnMeta): ClientConn {
    const conn = new ClientConn(this, stream, meta);
    if (this.draining) {
      stream.destroy();
      return conn;
    }
    this.conns.add(conn);
    this.streams.add(stream);
    stream.once('close', () => this.streams.delete(stream));
    conn.start();
    return conn;
  }

  // --- ConnHost ------------------------------------------------------------------------------------------------

  async admit(conn: ClientConn): Promise<boolean> {
    if (conn.info?.meshKey) return this.admitMeshPeer(conn);
    const nodeKey = formatKey('nodekey', conn.key);
    const verdict = this.draining ? { admitted: false as const, reason: 'relay is shutting down', unavailable: true } : await this.admission.check(nodeKey);
    if (conn.isClosed) return false;
    if (!verdict.admitted) {
      this.counters.refused++;
      this.log.warn('relay client refused', { ip: conn.meta.clientIp || 'unknown', key: conn.logKey, reason: verdict.reason });
      this.onRefused?.(conn.meta.clientIp, nodeKey, verdict);
      return false;
    }
    this.counters.accepted++;
    const displaced = this.registry.add(conn);
    this.log.info('relay client connected', {
      ip: conn.meta.clientIp || 'unknown',
      key: conn.logKey,
      node: verdict.nodeId ?? undefined,
      transport: conn.meta.transport,
      replaces: displaced ? 'older connection' : undefined,
    });
    // Newest wins: a client that reconnects after a network change must not wait for its dead old connection.
    if (displaced instanceof ClientConn) displaced.replaced();
    this.announce(conn, true);
    return true;
  }

  private admitMeshPeer(conn: ClientConn): boolean {
    const presented = conn.info?.meshKey ?? '';
    let refusal: string | null = null;
    if (this.draining) refusal = 'relay is shutting down';
    else if (!this.meshKey) refusal = 'it presented a mesh key, but this relay has none (set HSE_DERP_MESH_KEY or HSE_DERP_MESH_KEY_FILE to mesh)';
    else if (!meshKeyMatches(this.meshKey, presented))
      refusal = "its mesh key is not this relay's (every relay of the region needs the same HSE_DERP_MESH_KEY)";
    if (refusal) {
      this.counters.meshRefused++;
      this.log.warn('mesh peer refused', { ip: conn.meta.clientIp || 'unknown', key: conn.logKey, reason: refusal });
      return false;
    }
    conn.meshPeer = true;
    this.log.info('mesh peer connected', { ip: conn.meta.clientIp || 'unknown', key: conn.logKey, transport: conn.meta.transport });
    return true;
  }

  /** Tells every mesh watcher that `conn`, a local client, arrived or is gone from this relay. */
  private announce(conn: ClientConn, present: boolean): void {
    if (this.watchers.size === 0) return;
    const frame = present ? encodePeerPresent(conn.key, conn.meta.clientIp, 0, presentFlags(conn)) : encodePeerGone(conn.key, PeerGoneReason.Disconnected);
    for (const w of this.watchers) w.presence(conn.keyHex, frame);
  }

  watchConns(conn: ClientConn): void {
    // Our own mesh link dialled us (our address is in HSE_DERP_MESH_WITH): it will notice and stop; nothing to say.
    if (conn.key.equals(this.serverPublic)) return;
    if (this.watchers.has(conn)) return;
    this.watchers.add(conn);
    for (const c of this.registry.clients()) {
      if (c instanceof ClientConn) conn.presence(c.keyHex, encodePeerPresent(c.key, c.meta.clientIp, 0, presentFlags(c)));
    }
    this.log.debug('mesh peer watches our clients', { key: conn.logKey, clients: this.registry.size });
  }

  forwarded(from: ClientConn, src: Buffer, dst: Buffer, packet: Buffer): void {
    // Only to a local client: a forwarded packet is never forwarded again (derpserver.go handleFrameForwardPacket).
    const dest = this.registry.local(dst.toString('hex'));
    if (dest) {
      this.counters.packetsForwardedIn++;
      this.counters.bytesRelayed += packet.length;
      dest.deliver(Buffer.from(src), packet);
      return;
    }
    this.counters.packetsToNowhere++;
    // The peer's link then drops its route to `dst` (and its sender hears nothing: derper's behaviour too).
    if (looksLikeDisco(packet)) from.notHere(dst);
  }

  closePeer(from: ClientConn, peer: Buffer): void {
    const found = this.closeHex(peer.toString('hex'), 'closed at the request of a mesh peer');
    this.log.info('mesh peer asked to close a client', { by: from.logKey, key: formatKey('nodekey', peer).slice(0, 20), found });
  }

  route(from: ClientConn, dst: Buffer, packet: Buffer): void {
    const dest = this.registry.lookup(dst.toString('hex'));
    if (dest) {
      this.counters.packetsRelayed++;
      this.counters.bytesRelayed += packet.length;
      if (!(dest instanceof ClientConn)) this.counters.packetsForwardedOut++;
      dest.deliver(from.key, packet);
      return;
    }
    this.counters.packetsToNowhere++;
    // Only disco packets get an answer: they are how the sender decides where to route, and answering every data
    // packet would double the traffic of a client that keeps sending to a peer that left.
    if (looksLikeDisco(packet)) from.notHere(dst);
  }

  watchSender(conn: ClientConn, srcHex: string): void {
    this.registry.watchGone(srcHex, conn);
  }

  closed(conn: ClientConn, reason: string): void {
    this.conns.delete(conn);
    this.counters.droppedClosed += conn.dropped;
    if (conn.meshPeer) {
      this.watchers.delete(conn);
      this.log.info('mesh peer disconnected', {
        ip: conn.meta.clientIp || 'unknown',
        key: conn.logKey,
        reason,
        seconds: Math.round((Date.now() - conn.connectedAt) / 1000),
        packetsIn: conn.packetsIn,
      });
      return;
    }
    if (!conn.keyHex) {
      this.log.debug('relay connection closed before login', { ip: conn.meta.clientIp || 'unknown', reason });
      return;
    }
    for (const src of conn.senders()) this.registry.unwatchGone(src, conn);
    // A no-op for a client never registered (refused, or gone during admission) or already displaced by a newer one.
    if (this.registry.remove(conn)) this.announce(conn, false);
    if (reason === 'refused') return; // logged as refused already
    this.log.info('relay client disconnected', {
      ip: conn.meta.clientIp || 'unknown',
      key: conn.logKey,
      reason,
      seconds: Math.round((Date.now() - conn.connectedAt) / 1000),
      packetsIn: conn.packetsIn,
      packetsOut: conn.packetsOut,
      dropped: conn.dropped || undefined,
    });
  }

  // --- revocation and shutdown ---------------------------------------------------------------------------------

  /** Closes the connection holding `nodeKey` ("nodekey:<hex>"); returns whether there was one. */
  closeKey(nodeKey: string, reason: string): boolean {
    const raw = parseKey('nodekey', nodeKey);
    if (!raw) return false;
    return this.closeHex(raw.toString('hex'), reason);
  }

  private closeHex(hex: string, reason: string): boolean {
    let found = false;
    // Also connections still in admission, which are not in the registry yet; never a mesh peer's.
    for (const c of this.conns) {
      if (c.keyHex === hex && !c.meshPeer) {
        found = true;
        c.close(reason, 'graceful');
      }
    }
    return found;
  }

  /**
   * Asks admission again about every connected client and closes those now refused for a reason about the key itself
   * (not a store outage). Run after the change feed was interrupted, when deletions may have gone unheard.
   */
  async reverify(): Promise<number> {
    let closed = 0;
    for (const c of [...this.registry.clients()]) {
      if (!(c instanceof ClientConn) || c.isClosed) continue;
      const v = await this.admission.check(formatKey('nodekey', c.key));
      if (!v.admitted && !v.unavailable && !c.isClosed) {
        c.close(`no longer admitted: ${v.reason}`, 'graceful');
        closed++;
      }
    }
    return closed;
  }

  /**
   * Stops admitting, tells every client the relay is restarting (reconnect soon, keep trying a while), closes them,
   * and resolves once they are gone or after a short wait.
   */
  async drain(): Promise<void> {
    this.draining = true;
    const conns = [...this.conns];
    if (conns.length > 0) this.log.info('closing relay clients', { connections: conns.length });
    const restarting = encodeRestarting(1_000, 30_000);
    for (const c of conns) c.close('relay shutting down', 'graceful', c.isReady ? restarting : undefined);
    const deadline = Date.now() + DRAIN_WAIT_MS;
    while (this.streams.size > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  }
}

/** PeerPresent flags for one of our clients (derpserver.go presentFlags). */
function presentFlags(c: ClientConn): number {
  return c.info?.isProber ? PeerPresentFlags.IsProber : PeerPresentFlags.IsRegular;
}
