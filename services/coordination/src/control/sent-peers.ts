// Which open streams list each node among the peers they were sent: the streams that a change to that node (its
// endpoints, Hostinfo, online state, primary routes, its deletion) concerns. The map hub used to find them by asking
// every open stream, which is O(streams) per change and O(N²) when a network of N nodes comes online; with 10,000
// streams that was the largest share of the coordination's CPU (bench/control-policy.ts). Now each stream's record of
// sent peers (SentPeers) keeps this index up to date as it changes, and a change costs O(streams that see the node).
import type { MapSession } from './map-session.ts';

export class PeerViewers {
  private readonly byPeer = new Map<number, Set<MapSession>>();

  /** The streams whose last-sent peers include `peerId` (a snapshot: safe to change views while iterating). */
  of(peerId: number): MapSession[] {
    const set = this.byPeer.get(peerId);
    return set ? [...set] : [];
  }

  add(peerId: number, s: MapSession): void {
    let set = this.byPeer.get(peerId);
    if (!set) {
      set = new Set();
      this.byPeer.set(peerId, set);
    }
    set.add(s);
  }

  remove(peerId: number, s: MapSession): void {
    const set = this.byPeer.get(peerId);
    if (!set) return;
    set.delete(s);
    if (set.size === 0) this.byPeer.delete(peerId);
  }
}

/** One stream's sent peers — peer id to the routes key of the Node sent — that keeps PeerViewers in step. */
export class SentPeers extends Map<number, string> {
  private readonly session: MapSession;
  private readonly viewers: PeerViewers;

  constructor(session: MapSession, viewers: PeerViewers) {
    super();
    this.session = session;
    this.viewers = viewers;
  }

  override set(id: number, key: string): this {
    if (!super.has(id)) this.viewers.add(id, this.session);
    return super.set(id, key);
  }

  override delete(id: number): boolean {
    if (!super.delete(id)) return false;
    this.viewers.remove(id, this.session);
    return true;
  }

  override clear(): void {
    for (const id of super.keys()) this.viewers.remove(id, this.session);
    super.clear();
  }
}
