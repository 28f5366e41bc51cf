// Simulated nodes under a tailnet policy, for bench/control-policy.ts: each node registers with its own pre-auth key
// (its user's, or one carrying its tags), so each map holds only the peers the policy gives it, not all N-1 — which
// is why this is not fleet.ts, whose "full map" is "knows every other node".
//
// A node "has its full map" with the first message carrying its own Node (every server's first message on a stream
// is the full map; a map with no peers leaves Peers out, so Peers cannot be the sign). Its size is taken as framed on
// the wire and as JSON. When the caller gives the expected peers (by node index), each full map's peer list is
// compared with them, and the nodes whose map differs are counted.
//
// An event (a join, a leave, a policy change) is watched on every stream: for the streams in its audience — the ones
// the policy says it affects — the latency from the action until the first message that carries it; for the others,
// whether they got such a message anyway (work a server did that the policy did not call for).
// Like the rest of this folder it is independent of the server's code (see fleet.ts).
import { until } from '../../test/harness/pool.ts';
import { ControlNode, type ServerTarget } from './control-node.ts';
import type { MapMessage, MessageSize } from './map-frames.ts';

export interface Watched {
  /** One latency (ms) per audience stream that got the event. */
  latencies: number[];
  /** Audience streams that did not get it within the time limit. */
  missing: number;
  /** Until the last audience stream had it (NaN when some did not). */
  allMs: number;
  /** Streams outside the audience that got a matching message while the event was watched. */
  others: number;
  /** Streams that got any message but keep-alives while the event was watched. */
  touched: number;
}

interface Watch {
  since: number;
  match: (m: MapMessage) => boolean;
  inAudience: Uint8Array;
  latency: Float64Array;
  remaining: number;
  others: number;
  touched: Uint8Array;
}

export class PolicyFleet {
  readonly nodes: ControlNode[];
  private readonly target: ServerTarget;
  private readonly index = new Map<string, number>();
  private openedAt = 0;
  /** Per node, ms from openAll to its full map (NaN before). */
  readonly fullAt: Float64Array;
  readonly fullWire: Float64Array;
  readonly fullJson: Float64Array;
  readonly fullPeers: Int32Array;
  private fullRemaining: number;
  private expected: Int32Array[] | null = null;
  /** Nodes whose full map's peers differ from the expected ones, and by how many peers in all (missing + extra). */
  mismatchedMaps = 0;
  mismatchedPeers = 0;
  /** First few mismatches, for the report. */
  readonly mismatchSamples: string[] = [];
  private watch: Watch | null = null;
  lastChangeAt = 0;
  messages = 0;
  streamsEnded = 0;
  private probeCount = 0;

  constructor(target: ServerTarget, n: number, prefix = 'pol') {
    this.target = target;
    this.nodes = Array.from({ length: n }, (_, i) => new ControlNode(`${prefix}-${i}`));
    for (const [i, node] of this.nodes.entries()) this.index.set(node.nodeKey, i);
    this.fullAt = new Float64Array(n).fill(NaN);
    this.fullWire = new Float64Array(n).fill(NaN);
    this.fullJson = new Float64Array(n).fill(NaN);
    this.fullPeers = new Int32Array(n).fill(-1);
    this.fullRemaining = n;
  }

  /** Expected peers per node index, to check each full map against. */
  expectPeers(expected: Int32Array[]): void {
    this.expected = expected;
  }

  /**
   * Dials and registers node i with keys[i], `concurrency` at a time, until all are done or `limitMs` passes.
   * Returns the elapsed ms and how many registered.
   */
  async register(keys: string[], concurrency: number, limitMs: number): Promise<{ ms: number; done: number; error?: string }> {
    const t0 = performance.now();
    let next = 0;
    let done = 0;
    let error: string | undefined;
    const worker = async () => {
      while (error === undefined && next < this.nodes.length && performance.now() - t0 < limitMs) {
        const i = next++;
        try {
          await this.nodes[i].connect(this.target);
          await this.nodes[i].register(keys[i]);
          done++;
        } catch (e) {
          error ??= `node ${i}: ${(e as Error).message}`;
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(concurrency, this.nodes.length) }, worker));
    return { ms: performance.now() - t0, done, error };
  }

  private onMessage(i: number, m: MapMessage, at: number, size: MessageSize): void {
    if (m.KeepAlive && Object.keys(m).length === 1) return;
    this.messages++;
    this.lastChangeAt = at;
    if (m.Node && Number.isNaN(this.fullAt[i])) this.markFull(i, m, at, size);
    const w = this.watch;
    if (w) {
      w.touched[i] = 1;
      if (Number.isNaN(w.latency[i]) && w.match(m)) {
        w.latency[i] = at - w.since;
        if (w.inAudience[i]) w.remaining--;
        else w.others++;
      }
    }
  }

  private markFull(i: number, m: MapMessage, at: number, size: MessageSize): void {
    this.fullAt[i] = at - this.openedAt;
    this.fullWire[i] = size.wire;
    this.fullJson[i] = size.json;
    const peers = m.Peers ?? [];
    this.fullPeers[i] = peers.length;
    this.fullRemaining--;
    const want = this.expected?.[i];
    if (!want) return;
    const got = new Set<number>();
    let foreign = 0;
    for (const p of peers) {
      const k = this.index.get(p.Key);
      if (k === undefined) foreign++;
      else got.add(k);
    }
    let missing = 0;
    for (const k of want) if (!got.delete(k)) missing++;
    const extra = got.size + foreign;
    if (missing + extra > 0) {
      this.mismatchedMaps++;
      this.mismatchedPeers += missing + extra;
      if (this.mismatchSamples.length < 5)
        this.mismatchSamples.push(`node ${i}: ${peers.length} peers, expected ${want.length} (${missing} missing, ${extra} extra)`);
    }
  }

  /** Opens every node's map stream at once (a restart of the server or of the network). */
  async openAll(): Promise<void> {
    this.openedAt = performance.now();
    await Promise.all(
      this.nodes.map((node, i) =>
        node.openMap(
          (m, at, size) => this.onMessage(i, m, at, size),
          () => this.streamsEnded++,
        ),
      ),
    );
  }

  /** Resolves when every node has its full map, or after `ms`; returns how many have none. */
  async waitFull(ms: number): Promise<number> {
    await until(() => this.fullRemaining === 0, ms, 10);
    return this.fullRemaining;
  }

  /** Waits until no stream got anything but keep-alives for `quietMs` (at most `maxMs`); returns whether it did. */
  async settle(quietMs: number, maxMs: number): Promise<boolean> {
    const deadline = performance.now() + maxMs;
    for (;;) {
      const idle = performance.now() - this.lastChangeAt;
      if (idle >= quietMs) return true;
      if (performance.now() > deadline) return false;
      await new Promise((r) => setTimeout(r, Math.max(5, quietMs - idle)));
    }
  }

  /**
   * Runs `act` and watches every stream for a message that `match`es: latencies for `audience`, until each of them
   * has it or `timeoutMs` passes; then `quietMs` more of quiet, so streams outside the audience that also get it are
   * counted.
   */
  async observe(audience: number[], match: (m: MapMessage) => boolean, act: () => Promise<void>, timeoutMs: number, quietMs = 1000): Promise<Watched> {
    const n = this.nodes.length;
    const inAudience = new Uint8Array(n);
    for (const k of audience) inAudience[k] = 1;
    const w: Watch = {
      since: performance.now(),
      match,
      inAudience,
      latency: new Float64Array(n).fill(NaN),
      remaining: audience.length,
      others: 0,
      touched: new Uint8Array(n),
    };
    this.watch = w;
    await act();
    await until(() => w.remaining === 0, timeoutMs, 5);
    await this.settle(quietMs, Math.max(quietMs * 3, 10_000));
    this.watch = null;
    const latencies = audience.map((k) => w.latency[k]).filter((x) => !Number.isNaN(x));
    return {
      latencies,
      missing: w.remaining,
      allMs: w.remaining === 0 && latencies.length > 0 ? Math.max(...latencies) : NaN,
      others: w.others,
      touched: w.touched.reduce((s, x) => s + x, 0),
    };
  }

  /** A new node (its Noise connection made beforehand) registers with `authKey` and opens its stream. */
  async probeJoin(authKey: string, audience: number[], timeoutMs: number): Promise<{ node: ControlNode; result: Watched }> {
    const node = new ControlNode(`probe-${++this.probeCount}`);
    await node.connect(this.target);
    const key = node.nodeKey;
    const result = await this.observe(
      audience,
      (m) => (m.PeersChanged?.some((p) => p.Key === key) ?? false) || (m.Peers?.some((p) => p.Key === key) ?? false),
      async () => {
        await node.register(authKey);
        await node.openMap(() => {});
      },
      timeoutMs,
    );
    return { node, result };
  }

  /** The probe logs out (an ephemeral node is then deleted): until each audience stream has it in PeersRemoved. */
  async probeLeave(node: ControlNode, audience: number[], timeoutMs: number): Promise<Watched> {
    await until(() => node.id !== 0, 10_000);
    if (node.id === 0) throw new Error(`probe ${node.hostname} never got its own map, so its ID is unknown`);
    const id = node.id;
    const result = await this.observe(
      audience,
      (m) => m.PeersRemoved?.includes(id) ?? false,
      async () => void (await node.logout()),
      timeoutMs,
    );
    node.close();
    return result;
  }

  close(): void {
    for (const n of this.nodes) n.close();
  }
}

/** A message that changes what a node may reach or see: a packet filter, or peers added or removed. */
export function isViewDelta(m: MapMessage): boolean {
  return m.PacketFilter !== undefined || m.PacketFilters !== undefined || m.PeersChanged !== undefined || m.PeersRemoved !== undefined || m.Peers !== undefined;
}
