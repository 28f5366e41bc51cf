// A fleet of simulated nodes (sim-node.ts): join them with bounded concurrency, then wait for conditions over all of
// them and measure how long they took — the figures of the crash and restart tests.
import { setTimeout as sleep } from 'node:timers/promises';
import { pool, until } from '../../harness/pool.ts';
import { SimNode } from './sim-node.ts';

export interface FleetOptions {
  port: number;
  serverPublic: Buffer;
  count: number;
  /** Host names are `${prefix}-${i}`. */
  prefix?: string;
  /** Registrations in flight at once. */
  concurrency?: number;
  minBackoffMs?: number;
  maxBackoffMs?: number;
}

/** Polls `cond` every 50 ms until it is true; returns the time it first held, or throws with `what()` at the deadline. */
export async function waitUntil(cond: () => boolean, what: () => string, timeoutMs: number): Promise<number> {
  if (!(await until(cond, timeoutMs, 50))) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what()}`);
  return Date.now();
}

export class Fleet {
  readonly nodes: SimNode[];

  constructor(o: FleetOptions) {
    this.nodes = Array.from(
      { length: o.count },
      (_, i) =>
        new SimNode({
          port: o.port,
          serverPublic: o.serverPublic,
          hostname: `${o.prefix ?? 'sim'}-${i}`,
          minBackoffMs: o.minBackoffMs,
          maxBackoffMs: o.maxBackoffMs,
        }),
    );
  }

  /** Registers every node (retrying a few times each), then starts their map streams and waits for all of them. */
  async join(authKey: string, concurrency = 16, timeoutMs = 120_000): Promise<void> {
    await pool(this.nodes, concurrency, async (n) => {
      for (let attempt = 0; ; attempt++) {
        try {
          await n.register(authKey);
          return;
        } catch (e) {
          if (attempt >= 4) throw e;
          n.breakConnection();
          await sleep(200 * (attempt + 1));
        }
      }
    });
    for (const n of this.nodes) n.start();
    await this.waitStreaming(0, timeoutMs);
  }

  /** Nodes whose current stream opened after `since` (ms), or that never lost the one they had then. */
  backSince(since: number, lostOnly: Set<SimNode> | null = null): SimNode[] {
    return this.nodes.filter((n) => n.streaming && (n.streamSince >= since || (lostOnly !== null && !lostOnly.has(n))));
  }

  /** Waits until every node streams; with `since`, a stream opened after that time. Returns when that first held. */
  waitStreaming(since: number, timeoutMs: number): Promise<number> {
    return waitUntil(
      () => this.nodes.every((n) => n.streaming && n.streamSince >= since),
      () => {
        const behind = this.nodes.filter((n) => !(n.streaming && n.streamSince >= since));
        return `${behind.length}/${this.nodes.length} nodes back on a map stream (e.g. ${behind[0]?.opts.hostname}: ${behind[0]?.lastError})`;
      },
      timeoutMs,
    );
  }

  /** Waits until every node has `peerId` in its map (online, when asked). */
  waitSeePeer(peerId: number, online: boolean | null, timeoutMs: number): Promise<number> {
    const sees = (n: SimNode) => n.peers.has(peerId) && (online === null || n.peers.get(peerId) === online);
    return waitUntil(
      () => this.nodes.every((n) => n.self?.id === peerId || sees(n)),
      () => `every node to see peer ${peerId}${online === null ? '' : online ? ' online' : ' offline'} (${this.nodes.filter((n) => !sees(n)).length} do not)`,
      timeoutMs,
    );
  }

  /** Times (ms after `since`) at which each node's current stream opened: for percentiles. */
  reconnectTimes(since: number): number[] {
    return this.nodes.map((n) => n.streamSince - since).sort((a, b) => a - b);
  }

  /** The node identities as the server told them: name and addresses, by host name. */
  identities(): Map<string, string> {
    const m = new Map<string, string>();
    for (const n of this.nodes) m.set(n.opts.hostname, n.self ? `${n.self.name} ${n.self.addresses.join(',')}` : '(none)');
    return m;
  }

  async stop(): Promise<void> {
    await Promise.all(this.nodes.map((n) => n.stop()));
  }
}

/** The p-th percentile (0..100) of sorted numbers. */
export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}
