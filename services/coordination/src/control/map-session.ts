// One /machine/map long-poll stream: the full map first, then deltas, then keep-alives when nothing else was sent for
// KEEPALIVE_MS (the client's watchdog fires after 120 s; many proxies cut idle streams at 60 s). Changes that arrive in
// the same tick are coalesced into one message; a stream that sent a delta less than one busy window ago waits for the
// next window boundary, so a burst (a whole network coming online: N×(N-1) status changes) becomes a few messages per
// stream instead of one per change, while a lone change still leaves at once. A client that stops reading is disconnected once its unsent backlog
// passes MAX_BACKLOG; it reconnects and gets a fresh full map, which is cheaper than buffering without bound.
import type { Http2ServerResponse } from 'node:http2';
import { countedBy } from '../../../../shared/metrics.ts';
import type { FilterRule, MapResponse, PeerChange, SSHPolicy, UserProfile } from '../tailcfg/tailcfg.ts';
import { encodeJsonBytesFrame, encodeJsonFrame } from './map-frame.ts';

export const KEEPALIVE_MS = 50_000;
const MAX_BACKLOG = 8 * 1024 * 1024;
/**
 * The busy window grows with the number of open streams: BUSY_WINDOW_MS at BUSY_WINDOW_FULL_AT streams and more,
 * proportionally less below, never under BUSY_WINDOW_MIN_MS. Measured with bench/control.ts: with no window, 500 nodes
 * opening their streams at once got ~500 messages each and the last "online" took 34 s to reach everyone; with a fixed
 * 100 ms window a 100-node network took 259 ms to see itself online against headscale's 215 ms, the last window alone
 * adding up to 100 ms after the last full map, for work that a small network does in a few milliseconds. Windows are
 * aligned to the clock, so busy streams flush in the same timer pass and build the same messages.
 */
export const BUSY_WINDOW_MS = 100;
const BUSY_WINDOW_MIN_MS = 10;
const BUSY_WINDOW_FULL_AT = 500;
let openSessions = 0;

/** The busy window for the number of streams open now. */
export function busyWindowMs(streams = openSessions): number {
  return Math.max(BUSY_WINDOW_MIN_MS, Math.min(BUSY_WINDOW_MS, Math.round((BUSY_WINDOW_MS * streams) / BUSY_WINDOW_FULL_AT)));
}

// Every message written to a map stream (full maps, deltas, keep-alives), and its bytes as framed on the wire (after
// zstd when the client asked for it). Plain numbers: the counters read them when scraped.
const sent = { messages: 0, bytes: 0 };
countedBy('hse_map_messages_total', 'Map messages (full maps, deltas, keep-alives) written to map streams.', () => sent.messages);
countedBy('hse_map_sent_bytes_total', 'Bytes of map messages written to map streams, as framed (compressed when the client asked).', () => sent.bytes);

export class MapSession {
  readonly nodeId: number;
  readonly compress: boolean;
  private readonly res: Http2ServerResponse;
  private keepAlive: NodeJS.Timeout | null = null;
  private closed = false;
  private scheduled = false;
  private lastDeltaAt = 0;
  // Pending deltas, keyed by peer id. Cached peer JSON strings are spliced in as-is.
  private changed = new Map<number, string>();
  private removed = new Set<number>();
  private patches = new Map<number, PeerChange>();
  private self: string | null = null;
  private dns: string | null = null;
  private profiles = new Map<number, UserProfile>();
  private filter: FilterRule[] | null = null;
  private ssh: SSHPolicy | null = null;
  onClose: (() => void) | null = null;

  constructor(nodeId: number, res: Http2ServerResponse, compress: boolean) {
    this.nodeId = nodeId;
    this.res = res;
    this.compress = compress;
    openSessions++;
    res.on('close', () => this.close());
  }

  get isClosed(): boolean {
    return this.closed;
  }

  /** Writes a message whose JSON is already built. */
  sendJson(json: string): void {
    if (this.closed) return;
    this.write(encodeJsonFrame(json, this.compress));
  }

  /** Writes a message whose JSON is already UTF-8 bytes (the full map, spliced from cached peer bytes). */
  sendJsonBytes(json: Buffer): void {
    if (this.closed) return;
    this.write(encodeJsonBytesFrame(json, this.compress));
  }

  private write(frame: Buffer): void {
    sent.messages++;
    sent.bytes += frame.length;
    this.res.write(frame);
    if (this.res.writableLength > MAX_BACKLOG) {
      this.close();
      return;
    }
    this.armKeepAlive();
  }

  send(msg: MapResponse): void {
    this.sendJson(JSON.stringify(msg));
  }

  private armKeepAlive(): void {
    // refresh() restarts the countdown, also on a timer that already fired (it fired through send(), which re-arms).
    if (this.keepAlive) this.keepAlive.refresh();
    else this.keepAlive = setTimeout(() => this.send({ KeepAlive: true }), KEEPALIVE_MS - Math.floor(Math.random() * 5000));
  }

  peerChanged(id: number, nodeJson: string): void {
    this.removed.delete(id);
    this.patches.delete(id);
    this.changed.set(id, nodeJson);
    this.schedule();
  }

  peerRemoved(id: number): void {
    this.changed.delete(id);
    this.patches.delete(id);
    this.removed.add(id);
    this.schedule();
  }

  peerPatch(p: PeerChange): void {
    if (this.removed.has(p.NodeID)) return;
    const prev = this.patches.get(p.NodeID);
    this.patches.set(p.NodeID, prev ? { ...prev, ...p } : p);
    this.schedule();
  }

  selfChanged(nodeJson: string): void {
    this.self = nodeJson;
    this.schedule();
  }

  /** A new PacketFilter for this node replaces the old one whole ([] would block everything; null = unchanged). */
  packetFilter(rules: FilterRule[]): void {
    this.filter = rules;
    this.schedule();
  }

  /** A new SSH policy; {rules: []} clears one sent before (leaving it out means "unchanged" to the client). */
  sshPolicy(p: SSHPolicy): void {
    this.ssh = p;
    this.schedule();
  }

  /** The tailnet's new DNSConfig, as JSON (built once by the hub for every stream). */
  dnsConfig(json: string): void {
    this.dns = json;
    this.schedule();
  }

  /** Profiles are merged by the client, so only new or changed users need sending. */
  userProfiles(p: UserProfile[]): void {
    for (const u of p) this.profiles.set(u.ID, u);
    this.schedule();
  }

  private schedule(): void {
    if (this.scheduled || this.closed) return;
    this.scheduled = true;
    const now = Date.now();
    const window = busyWindowMs();
    if (now - this.lastDeltaAt >= window) setImmediate(() => this.flush());
    else setTimeout(() => this.flush(), window - (now % window));
  }

  private flush(): void {
    this.scheduled = false;
    if (this.closed) return;
    const parts: string[] = [];
    if (this.self !== null) parts.push(`"Node":${this.self}`);
    if (this.dns !== null) parts.push(`"DNSConfig":${this.dns}`);
    if (this.changed.size > 0) parts.push(`"PeersChanged":[${[...this.changed.values()].join(',')}]`);
    if (this.removed.size > 0) parts.push(`"PeersRemoved":${JSON.stringify([...this.removed])}`);
    // Every patch held here arrived after the peer's whole Node was queued (peerChanged drops the older ones), so it
    // is newer than that Node — e.g. "online" landing in the same tick as the Node built while it was still offline.
    // The client applies PeersChangedPatch after PeersChanged (controlclient map.go), so sending both is right;
    // dropping the patch left peers showing the node offline until its next change.
    const patches = [...this.patches.values()];
    if (patches.length > 0) parts.push(`"PeersChangedPatch":${JSON.stringify(patches)}`);
    if (this.profiles.size > 0) parts.push(`"UserProfiles":${JSON.stringify([...this.profiles.values()])}`);
    if (this.filter !== null) parts.push(`"PacketFilter":${JSON.stringify(this.filter)}`);
    if (this.ssh !== null) parts.push(`"SSHPolicy":${JSON.stringify(this.ssh)}`);
    this.filter = null;
    this.ssh = null;
    this.dns = null;
    this.self = null;
    this.changed.clear();
    this.removed.clear();
    this.patches.clear();
    this.profiles.clear();
    if (parts.length > 0) {
      this.lastDeltaAt = Date.now();
      this.sendJson(`{${parts.join(',')}}`);
    }
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    openSessions--;
    if (this.keepAlive) clearTimeout(this.keepAlive);
    if (!this.res.writableEnded) {
      try {
        this.res.stream.close();
      } catch {
        // the stream is already gone
      }
    }
    this.onClose?.();
  }
}
