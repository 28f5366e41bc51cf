// Who is reachable through this relay, by node key: its own clients, and the clients of the other relays of the
// region as their mesh links announce them (PeerPresent / PeerGone over WatchConns, see mesh-link.ts). And who must
// hear when a key is gone from the region.
//
// The rules follow derpserver.go (lookupDest, AddPacketForwarder, RemovePacketForwarder, unregisterClient):
//   - a local client wins over any forwarder; packets for a key held only elsewhere go to the forwarder that
//     announced it first (the one seen longest), so a client announced by two relays is not reached at random;
//   - a key is gone from the region only when no local client and no forwarder holds it: only then do the local
//     clients that received packets from it hear PeerGone(Disconnected). A client moving from one relay to another
//     is therefore never reported gone.
import { PeerGoneReason } from './frames.ts';

/** Something a packet can be handed to: a local client or the forwarder of a key held by another relay. */
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

/** A mesh link to another relay: it carries packets to the clients that relay announced on it. */
export interface MeshForwarder {
  /** The peer as configured, for logs. */
  readonly name: string;
  forward(src: Buffer, dst: Buffer, packet: Buffer): void;
}

export interface ClientRegistry {
  /** Makes `client` the holder of its key and returns the connection it displaced: the newest connection wins. */
  add(client: RelayClient): RelayClient | null;
  /**
   * Forgets `client` if it still holds its key (and tells those who received packets from it, unless the key is still
   * reachable through the mesh). Returns false (and does nothing) when a newer connection already holds the key.
   */
  remove(client: RelayClient): boolean;
  /** Where a packet for `keyHex` goes (a local client first, else a mesh forwarder), or null when nowhere. */
  lookup(keyHex: string): PacketDestination | null;
  /** The local connection holding `keyHex`, if any. */
  local(keyHex: string): RelayClient | null;
  /** `watcher` will hear PeerGone(Disconnected) when `peerHex` is gone from the region. */
  watchGone(peerHex: string, watcher: RelayClient): void;
  unwatchGone(peerHex: string, watcher: RelayClient): void;
  /** `fwd` announced that the relay behind it holds `key`. */
  addForwarder(key: Buffer, fwd: MeshForwarder): void;
  /** `fwd` says its relay no longer holds `keyHex` (or the link broke). */
  removeForwarder(keyHex: string, fwd: MeshForwarder): void;
  /** Local clients. */
  readonly size: number;
  /** Keys reachable only through the mesh. */
  readonly remoteSize: number;
  clients(): IterableIterator<RelayClient>;
}

/** A key held by other relays: packets go to the first forwarder that announced it. */
class RemoteKey implements PacketDestination {
  readonly key: Buffer;
  readonly forwarders: MeshForwarder[] = [];
  constructor(key: Buffer) {
    this.key = key;
  }
  deliver(src: Buffer, packet: Buffer): void {
    this.forwarders[0].forward(src, this.key, packet);
  }
}

export class RegionRegistry implements ClientRegistry {
  private readonly byKey = new Map<string, RelayClient>();
  private readonly remote = new Map<string, RemoteKey>();
  private readonly goneWatchers = new Map<string, Set<RelayClient>>();

  get size(): number {
    return this.byKey.size;
  }

  get remoteSize(): number {
    let n = 0;
    for (const hex of this.remote.keys()) if (!this.byKey.has(hex)) n++;
    return n;
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
    if (!this.remote.has(client.keyHex)) this.goneFromRegion(client.keyHex, client.key, client);
    return true;
  }

  lookup(keyHex: string): PacketDestination | null {
    return this.byKey.get(keyHex) ?? this.remote.get(keyHex) ?? null;
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

  addForwarder(key: Buffer, fwd: MeshForwarder): void {
    const hex = key.toString('hex');
    let r = this.remote.get(hex);
    if (!r) {
      r = new RemoteKey(Buffer.from(key));
      this.remote.set(hex, r);
    }
    // A link announces each present key again after every reconnect (and derper may repeat itself): once is enough.
    if (!r.forwarders.includes(fwd)) r.forwarders.push(fwd);
  }

  removeForwarder(keyHex: string, fwd: MeshForwarder): void {
    const r = this.remote.get(keyHex);
    if (!r) return;
    const i = r.forwarders.indexOf(fwd);
    if (i === -1) return;
    r.forwarders.splice(i, 1);
    if (r.forwarders.length > 0) return;
    this.remote.delete(keyHex);
    if (!this.byKey.has(keyHex)) this.goneFromRegion(keyHex, r.key, null);
  }

  /** Tells everyone who received packets from `hex` that it is gone, and forgets who they were. */
  private goneFromRegion(hex: string, key: Buffer, except: RelayClient | null): void {
    const watchers = this.goneWatchers.get(hex);
    this.goneWatchers.delete(hex);
    if (watchers) for (const w of watchers) if (w !== except) w.peerGone(key, PeerGoneReason.Disconnected);
  }
}
