// Many simulated nodes in one process, one Noise connection each, and the measurements bench/control.ts makes with
// them: how long until every node holds its full map, and how long a join or a leave takes to reach every stream.
//
// This folder is the load client, and it is independent of the server on purpose: its Noise IK initiator and
// transport (noise-handshake.ts, noise-transport.ts), the /ts2021 upgrade (dial.ts) and the map-stream reader
// (map-frames.ts) are written from the Noise spec and tailscale's sources, and nothing here imports
// services/coordination/ (test/architecture.test.ts checks that). Sharing the server's code would prove only that
// the server agrees with itself; a client of its own, which headscale serves too, proves the server speaks the
// protocol and not our dialect. Do not replace it with the server's noise/ code or the tests' noise-client.ts.
//
// A node "has its full map" once it knows all N-1 peers: from its first map message's Peers when that list is
// complete (the usual case), else from Peers plus the PeersChanged that follow. A join reaches a stream with the
// first message that lists the new node's key in Peers or PeersChanged; a leave, with the first PeersRemoved holding
// its ID. Times are performance.now() at the chunk that completed the message.
//
// "All online": once every stream has opened, each server tells every stream that each of the other N-1 nodes is now
// online (Online in Peers/PeersChanged, or a PeersChangedPatch) — N×(N-1) facts to deliver. The time until every
// stream holds all of them is the cost of a whole network (re)connecting, beyond the full maps themselves.
//
// Failover: a subnet router that is primary for a prefix goes offline (its connection closes, as when tailscaled
// stops); it reaches a stream with the first message holding another node with that prefix in PrimaryRoutes, in
// PeersChanged. Peers learn of a new primary only from a full Node: tailcfg.PeerChange has no field for routes. The
// streams measured are those of the nodes that use the route: the other routers of the prefix route it themselves
// and are not given it (policy/compile.ts routesFor).
import { setTimeout as sleep } from 'node:timers/promises';
import { pool, until } from '../../test/harness/pool.ts';
import { ControlNode, type ServerTarget } from './control-node.ts';
import type { MapMessage, MapNode } from './map-frames.ts';

interface Watch {
  kind: 'join' | 'leave' | 'primary';
  key: string;
  id: number;
  /** 'primary': the subnet whose primary router (`id`) went offline. */
  prefix: string;
  since: number;
  /** Per stream: latency in ms, NaN until it arrived. */
  latency: Float64Array;
  remaining: number;
}

export interface EventResult {
  /** One latency per stream that saw the event, ms. */
  latencies: number[];
  /** Latency by stream (fleet node index), NaN where it never arrived: to tell streams on different instances apart. */
  byStream: Float64Array;
  /** Until the last stream had it, ms (NaN if some never did within the timeout). */
  allMs: number;
  missing: number;
}

export class Fleet {
  readonly nodes: ControlNode[];
  private readonly target: ServerTarget;
  private readonly fullAt: Float64Array;
  private readonly partial = new Map<number, Set<string>>();
  private fullRemaining: number;
  private openedAt = 0;
  private watch: Watch | null = null;
  /** Last time any stream got something other than a keep-alive. */
  lastChangeAt = 0;
  messages = 0;
  /** Streams that ended without the fleet closing them. */
  streamsEnded = 0;
  /** Nodes whose connection the fleet closed on purpose (a failover probe). */
  private readonly closing = new Set<number>();
  private probeCount = 0;
  // Per stream, a byte per peer ID (IDs are small integers on both servers): 1 = the stream was told it is online.
  private readonly online: Uint8Array[];
  private readonly onlineCount: Int32Array;
  private onlineRemaining: number;
  /** ms from openAll until every stream knew every other node online; NaN until then. */
  allOnlineMs = NaN;
  /** reconnectOnEnd(): whether streams that end are reopened, and when each one that ended got its map again. */
  private reconnecting = false;
  private readonly lostAt: Float64Array;
  private readonly backAt: Float64Array;

  constructor(target: ServerTarget, n: number, prefix = 'bench') {
    this.target = target;
    this.nodes = Array.from({ length: n }, (_, i) => new ControlNode(`${prefix}-${i}`));
    this.fullAt = new Float64Array(n).fill(NaN);
    this.fullRemaining = n;
    this.online = Array.from({ length: n }, () => new Uint8Array(2 * n + 256));
    this.onlineCount = new Int32Array(n);
    this.onlineRemaining = n;
    this.lostAt = new Float64Array(n).fill(NaN);
    this.backAt = new Float64Array(n).fill(NaN);
  }

  private setOnline(i: number, id: number, on: boolean, at: number): void {
    const flags = this.online[i];
    if (id >= flags.length || this.onlineCount[i] < 0) return;
    if (on && flags[id] === 0) {
      flags[id] = 1;
      if (++this.onlineCount[i] >= this.nodes.length - 1) {
        this.onlineCount[i] = -1; // done; later changes no longer matter
        if (--this.onlineRemaining === 0) this.allOnlineMs = at - this.openedAt;
      }
    } else if (!on && flags[id] === 1) {
      flags[id] = 0;
      this.onlineCount[i]--;
    }
  }

  private trackOnline(i: number, m: MapMessage, at: number): void {
    for (const p of m.Peers ?? []) if (p.Online !== undefined) this.setOnline(i, p.ID, p.Online, at);
    for (const p of m.PeersChanged ?? []) if (p.Online !== undefined) this.setOnline(i, p.ID, p.Online, at);
    for (const p of m.PeersChangedPatch ?? []) if (p.Online !== undefined) this.setOnline(i, p.NodeID, p.Online, at);
    for (const id of m.PeersRemoved ?? []) this.setOnline(i, id, false, at);
  }

  /**
   * The nodes some stream does not know online (its full map said offline, or nothing said online yet), each with how
   * many streams, most first: which node a "missed some online peer" count is about.
   */
  onlineGaps(limit = 5): { node: string; id: number; streams: number }[] {
    const count = new Map<number, number>();
    for (let i = 0; i < this.nodes.length; i++) {
      if (this.onlineCount[i] < 0) continue;
      for (const n of this.nodes) {
        if (n.id === 0 || n.id === this.nodes[i].id || this.online[i][n.id] === 1) continue;
        count.set(n.id, (count.get(n.id) ?? 0) + 1);
      }
    }
    const name = new Map(this.nodes.map((n) => [n.id, n.hostname]));
    return [...count]
      .sort((a, b) => b[1] - a[1])
      .slice(0, limit)
      .map(([id, streams]) => ({ node: name.get(id) ?? `id ${id}`, id, streams }));
  }

  /** Resolves when every stream knows every other node online, or after `ms`; returns how many streams do not. */
  async waitAllOnline(ms: number): Promise<number> {
    await until(() => this.onlineRemaining === 0, ms, 20);
    return this.onlineRemaining;
  }

  /** Dials and registers every node, `concurrency` at a time; returns the elapsed ms. */
  async register(authKey: string, concurrency: number): Promise<number> {
    const t0 = performance.now();
    await pool(this.nodes, concurrency, async (node) => {
      await node.connect(this.target);
      await node.register(authKey);
    });
    return performance.now() - t0;
  }

  private onMessage(i: number, m: MapMessage, at: number): void {
    if (m.KeepAlive && Object.keys(m).length === 1) return;
    if (m.Node && !Number.isNaN(this.lostAt[i]) && Number.isNaN(this.backAt[i])) this.backAt[i] = at;
    this.messages++;
    this.lastChangeAt = at;
    if (this.onlineRemaining > 0) this.trackOnline(i, m, at);
    const need = this.nodes.length - 1;
    if (Number.isNaN(this.fullAt[i])) {
      let known = this.partial.get(i);
      if (m.Peers && m.Peers.length >= need) {
        this.markFull(i, at);
      } else if (m.Peers || m.PeersChanged || known) {
        known ??= new Set();
        this.partial.set(i, known);
        for (const p of [...(m.Peers ?? []), ...(m.PeersChanged ?? [])]) known.add(p.Key);
        if (known.size >= need) {
          this.partial.delete(i);
          this.markFull(i, at);
        }
      }
    }
    const w = this.watch;
    if (w && Number.isNaN(w.latency[i])) {
      const takesOver = (p: MapNode) => p.ID !== w.id && (p.PrimaryRoutes?.includes(w.prefix) ?? false);
      const hit =
        w.kind === 'join'
          ? (m.PeersChanged?.some((p) => p.Key === w.key) ?? false) || (m.Peers?.some((p) => p.Key === w.key) ?? false)
          : w.kind === 'leave'
            ? (m.PeersRemoved?.includes(w.id) ?? false)
            : (m.PeersChanged?.some(takesOver) ?? false);
      if (hit) {
        w.latency[i] = at - w.since;
        w.remaining--;
      }
    }
  }

  private markFull(i: number, at: number): void {
    this.fullAt[i] = at - this.openedAt;
    this.fullRemaining--;
  }

  /** Opens every node's map stream at once (what a restart of the server or of the network looks like). */
  async openAll(): Promise<void> {
    this.openedAt = performance.now();
    await Promise.all(this.nodes.map((_, i) => this.openOne(i)));
  }

  private openOne(i: number): Promise<void> {
    return this.nodes[i].openMap(
      (m, at) => this.onMessage(i, m, at),
      () => this.ended(i),
    );
  }

  private ended(i: number): void {
    // A stream the fleet closed on purpose (probeFailover) is neither counted nor reopened here.
    if (this.closing.has(i)) return;
    this.streamsEnded++;
    // A failed attempt of a reconnect in progress ends its stream too; that loop retries by itself.
    if (!this.reconnecting || this.inReconnect.has(i)) return;
    if (Number.isNaN(this.lostAt[i])) this.lostAt[i] = performance.now();
    void this.comeBack(i);
  }

  private readonly inReconnect = new Set<number>();

  /**
   * From now on a stream that ends is reopened the way tailscaled does after a broken map poll: a new connection
   * (Noise handshake, HTTP/2) and a new map request, retried with exponential backoff from `minMs` doubling to
   * `maxMs` with full jitter, so a herd that lost its instance together does not come back in lock step.
   */
  reconnectOnEnd(opts: { minMs: number; maxMs: number }): void {
    this.reconnecting = true;
    this.backoff = opts;
  }

  private backoff = { minMs: 1000, maxMs: 30_000 };

  private async comeBack(i: number): Promise<void> {
    this.inReconnect.add(i);
    let wait = this.backoff.minMs;
    try {
      while (this.reconnecting) {
        await sleep(wait / 2 + Math.random() * (wait / 2));
        const node = this.nodes[i];
        try {
          node.close();
          await node.connect(this.target);
          await this.openOne(i);
          return;
        } catch {
          wait = Math.min(wait * 2, this.backoff.maxMs);
        }
      }
    } finally {
      this.inReconnect.delete(i);
    }
  }

  /**
   * The streams that ended since reconnectOnEnd(), and for each the ms from `since` until its new stream delivered a
   * full map (NaN: not back yet).
   */
  comeback(since: number): { lost: number; back: number[]; missing: number } {
    const back: number[] = [];
    let lost = 0;
    for (let i = 0; i < this.nodes.length; i++) {
      if (Number.isNaN(this.lostAt[i])) continue;
      lost++;
      if (!Number.isNaN(this.backAt[i])) back.push(this.backAt[i] - since);
    }
    return { lost, back, missing: lost - back.length };
  }

  /** Resolves when every node has its full map, or after `ms`. Returns per-node times (ms since openAll). */
  async waitFull(ms: number): Promise<{ times: number[]; missing: number }> {
    await until(() => this.fullRemaining === 0, ms, 10);
    const times = [...this.fullAt].filter((t) => !Number.isNaN(t));
    return { times, missing: this.nodes.length - times.length };
  }

  /** Waits until no stream got anything but keep-alives for `quietMs` (at most `maxMs`). */
  async settle(quietMs: number, maxMs: number): Promise<boolean> {
    const deadline = performance.now() + maxMs;
    for (;;) {
      const idle = performance.now() - this.lastChangeAt;
      if (idle >= quietMs) return true;
      if (performance.now() > deadline) return false;
      await sleep(Math.max(5, quietMs - idle));
    }
  }

  private async observe(
    what: Pick<Watch, 'kind' | 'key' | 'id'> & { prefix?: string; skip?: number[] },
    act: () => Promise<void>,
    timeoutMs: number,
  ): Promise<EventResult> {
    const w: Watch = {
      ...what,
      prefix: what.prefix ?? '',
      since: performance.now(),
      latency: new Float64Array(this.nodes.length).fill(NaN),
      remaining: this.nodes.length,
    };
    // Skipped streams are marked done (Infinity), so they are neither waited for nor counted.
    for (const i of new Set(what.skip ?? [])) {
      w.latency[i] = Infinity;
      w.remaining--;
    }
    this.watch = w;
    await act();
    await until(() => w.remaining === 0, timeoutMs, 5);
    this.watch = null;
    const latencies = [...w.latency].filter((x) => Number.isFinite(x));
    return { latencies, byStream: w.latency, allMs: w.remaining === 0 ? Math.max(...latencies) : NaN, missing: w.remaining };
  }

  /**
   * A new node (fresh machine key, its own Noise connection made beforehand) registers with `authKey` and opens its
   * map stream; measured from the register request to each fleet stream. Returns the node for probeLeave.
   */
  async probeJoin(authKey: string, timeoutMs: number): Promise<{ node: ControlNode; result: EventResult }> {
    const node = new ControlNode(`probe-${++this.probeCount}`);
    await node.connect(this.target);
    const result = await this.observe(
      { kind: 'join', key: node.nodeKey, id: 0 },
      async () => {
        await node.register(authKey);
        await node.openMap(() => {});
      },
      timeoutMs,
    );
    return { node, result };
  }

  /** The probe logs out (`tailscale logout`; with an ephemeral key the server deletes it); measured to each stream. */
  async probeLeave(node: ControlNode, timeoutMs: number): Promise<EventResult> {
    await until(() => node.id !== 0, 10_000);
    if (node.id === 0) throw new Error(`probe ${node.hostname} never got its own map, so its ID is unknown`);
    const result = await this.observe({ kind: 'leave', key: node.nodeKey, id: node.id }, async () => void (await node.logout()), timeoutMs);
    node.close();
    return result;
  }

  /**
   * Fleet node `i`, primary router for `prefix`, goes offline: its connection closes (tailscaled stopping). Measured
   * from the close to each stream but those of `coRouters` (the prefix's other routers) learning another router is
   * primary for the prefix.
   */
  async probeFailover(i: number, prefix: string, coRouters: number[], timeoutMs: number): Promise<EventResult> {
    const node = this.nodes[i];
    if (node.id === 0) throw new Error(`${node.hostname} never got its own map, so its ID is unknown`);
    this.closing.add(i);
    return this.observe({ kind: 'primary', key: node.nodeKey, id: node.id, prefix, skip: [i, ...coRouters] }, async () => node.close(), timeoutMs);
  }

  /** Brings a node closed by probeFailover back: a new connection and map stream, as tailscaled starting again. */
  async reconnect(i: number): Promise<void> {
    await this.nodes[i].connect(this.target);
    this.closing.delete(i);
    await this.openOne(i);
  }

  close(): void {
    this.reconnecting = false;
    for (const n of this.nodes) n.close();
  }
}
