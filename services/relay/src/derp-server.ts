// The DERP server: accepts connections, admits clients, routes packets between them through the registry, and
// closes clients whose node was deleted or re-keyed. One instance per relay process.
// Reference: derp/derpserver/derpserver.go (accept, registerClient, unregisterClient, handleFrameSendPacket).
import type { Duplex } from 'node:stream';
import { formatKey, parseKey } from '../../../shared/keys.ts';
import type { Logger } from '../../../shared/log.ts';
import type { Admission, Verdict } from './admission.ts';
import { ClientConn, type ConnHost, type ConnMeta, type ConnOptions } from './client-conn.ts';
import { encodeRestarting, looksLikeDisco } from './frames.ts';
import { LocalRegistry, type ClientRegistry } from './registry.ts';

export interface DerpServerOptions {
  privateKey: Buffer;
  publicKey: Buffer;
  admission: Admission;
  log: Logger;
  queueDepth: number;
  registry?: ClientRegistry;
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
  private readonly onRefused: DerpServerOptions['onRefused'];
  /** Every open connection, logged in or not. */
  private readonly conns = new Set<ClientConn>();
  /** Transports not yet closed: a drain waits for these, so goodbyes reach the wire before the process exits. */
  private readonly streams = new Set<Duplex>();
  private draining = false;
  private readonly counters = { accepted: 0, refused: 0, packetsRelayed: 0, packetsToNowhere: 0 };

  constructor(o: DerpServerOptions) {
    this.serverPrivate = o.privateKey;
    this.serverPublic = o.publicKey;
    this.admission = o.admission;
    this.log = o.log;
    this.registry = o.registry ?? new LocalRegistry();
    this.onRefused = o.onRefused;
    this.options = {
      queueDepth: o.queueDepth,
      keepAliveMs: o.keepAliveMs ?? 60_000,
      keepAliveJitterMs: o.keepAliveJitterMs ?? 5_000,
      handshakeTimeoutMs: o.handshakeTimeoutMs ?? 10_000,
      writeStallMs: o.writeStallMs ?? 10_000,
    };
  }

  get stats(): DerpStats {
    return { clients: this.registry.size, connections: this.conns.size, ...this.counters };
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
    return true;
  }

  route(from: ClientConn, dst: Buffer, packet: Buffer): void {
    const dest = this.registry.lookup(dst.toString('hex'));
    if (dest) {
      this.counters.packetsRelayed++;
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
    if (!conn.keyHex) {
      this.log.debug('relay connection closed before login', { ip: conn.meta.clientIp || 'unknown', reason });
      return;
    }
    for (const src of conn.senders()) this.registry.unwatchGone(src, conn);
    // A no-op for a client never registered (refused, or gone during admission) or already displaced by a newer one.
    this.registry.remove(conn);
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
    const hex = raw.toString('hex');
    let found = false;
    // Also connections still in admission, which are not in the registry yet.
    for (const c of this.conns) {
      if (c.keyHex === hex) {
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
