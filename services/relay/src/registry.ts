// Who is connected to this relay, by node key, and who must hear when one of them leaves.
//
// The DERP server talks to the registry only through ClientRegistry, so a later mesh of relays in one region can
// implement it: lookup() would then also return forwarders to clients held by other relays (learnt through
// WatchConns / PeerPresent), and "gone" would mean gone from the whole region (PeerGone from every mesh peer).
import { PeerGoneReason } from './frames.ts';

/** Something a packet can be handed to: a local client now, a mesh forwarder later. */
export interface PacketDestination {
  /** Queues a packet from `src`; never blocks, may drop (see DropOldestQueue). */
  deliver(src: Buffer, packet: Buffer): void;
}

/** A client connection as the registry sees it. */
export interface RelayClient extends PacketDestination {
  readonly key: Buffer;
  /** 64 lowercase hex, the map key. */
  readonly keyHex: string;
  /** Tells the client that `peer`, which sent it packets, is gone. */
  peerGone(peer: Buffer, reason: number): void;
}

export interface ClientRegistry {
  /** Makes `client` the holder of its key and returns the connection it displaced: the newest connection wins. */
  add(client: RelayClient): RelayClient | null;
  /**
   * Forgets `client` if it still holds its key, and tells everyone who received packets from it that it is gone.
   * Returns false (and does nothing) when a newer connection already holds the key.
   */
  remove(client: RelayClient): boolean;
  /** Where a packet for `keyHex` goes, or null when nobody with that key is reachable. */
  lookup(keyHex: string): PacketDestination | null;
  /** The local connection holding `keyHex`, if any. */
  local(keyHex: string): RelayClient | null;
  /** `watcher` will hear PeerGone(Disconnected) when `peerHex` leaves. */
  watchGone(peerHex: string, watcher: RelayClient): void;
  unwatchGone(peerHex: string, watcher: RelayClient): void;
  readonly size: number;
  clients(): IterableIterator<RelayClient>;
}

/** The single-relay registry: everything is local. */
export class LocalRegistry implements ClientRegistry {
  private readonly byKey = new Map<string, RelayClient>();
  private readonly goneWatchers = new Map<string, Set<RelayClient>>();

  get size(): number {
    return this.byKey.size;
  }

  clients(): IterableIterator<RelayClient> {
    return this.byKey.values();
  }

  add(client: RelayClient): RelayClient | null {
    const previous = this.byKey.get(client.keyHex) ?? null;
    this.byKey.set(client.keyHex, client);
    return previous === client ? null : previous;
  }

  remove(client: RelayClient): boolean {
    if (this.byKey.get(client.keyHex) !== client) return false;
    this.byKey.delete(client.keyHex);
    const watchers = this.goneWatchers.get(client.keyHex);
    this.goneWatchers.delete(client.keyHex);
    if (watchers) for (const w of watchers) if (w !== client) w.peerGone(client.key, PeerGoneReason.Disconnected);
    return true;
  }

  lookup(keyHex: string): PacketDestination | null {
    return this.byKey.get(keyHex) ?? null;
  }

  local(keyHex: string): RelayClient | null {
    return this.byKey.get(keyHex) ?? null;
  }

  watchGone(peerHex: string, watcher: RelayClient): void {
    let set = this.goneWatchers.get(peerHex);
    if (!set) {
      set = new Set();
      this.goneWatchers.set(peerHex, set);
    }
    set.add(watcher);
  }

  unwatchGone(peerHex: string, watcher: RelayClient): void {
    const set = this.goneWatchers.get(peerHex);
    if (!set) return;
    set.delete(watcher);
    if (set.size === 0) this.goneWatchers.delete(peerHex);
  }
}
