// Timed work on the shared state that must run once across all instances, under a lease (shared/lease.ts):
//   - presence sweep: a node whose presence entry ran out is marked offline. Entries are refreshed every
//     PRESENCE_REFRESH_MS by the instance holding the node's map stream, so an entry runs out only when that instance
//     died or lost Redis — then every stream learns the node is offline within PRESENCE_TTL_MS + SWEEP_MS, instead
//     of seeing it "online" forever;
//   - ephemeral clean-up: an ephemeral node offline for longer than HSE_EPHEMERAL_TIMEOUT is deleted (the instance
//     that had its stream also deletes it on time; this catches the ones whose instance is gone);
//   - activity-log pruning, hourly.
// A sweep right after Redis comes back is skipped until every live instance has had a full refresh period to renew
// its entries, so an outage does not mark the whole tailnet offline for a moment.
import type { ActivityLog } from '../../../../shared/activity.ts';
import { Lease } from '../../../../shared/lease.ts';
import type { Logger } from '../../../../shared/log.ts';
import { K } from '../../../../shared/redis-keys.ts';
import type { Store } from './store.ts';
import type { Tailnet } from './tailnet.ts';

/** How often an instance renews the presence of the nodes it serves, and how long an entry lasts without renewal. */
export const PRESENCE_REFRESH_MS = 20_000;
export const PRESENCE_TTL_MS = 60_000;
const SWEEP_MS = 10_000;
const PRUNE_MS = 3_600_000;

export interface HousekeepingDeps {
  store: Store;
  tailnet: Tailnet;
  activity: ActivityLog;
  log: Logger;
  /** Unique per process, for the lease. */
  holder: string;
  ephemeralTimeoutSeconds: number;
}

export class Housekeeping {
  private readonly d: HousekeepingDeps;
  private readonly lease: Lease;
  private readonly timers: NodeJS.Timeout[] = [];
  private readySince = Date.now();
  private lastPrune = 0;

  constructor(deps: HousekeepingDeps) {
    this.d = deps;
    this.lease = new Lease(deps.store.redis, deps.log, { key: K.leaseHousekeeping, holder: deps.holder, ttlMs: 30_000 });
  }

  start(): void {
    this.d.store.redis.on('ready', () => {
      this.readySince = Date.now();
    });
    this.lease.start();
    this.timers.push(setInterval(() => void this.tick(), SWEEP_MS).unref());
  }

  async stop(): Promise<void> {
    for (const t of this.timers) clearInterval(t);
    await this.lease.stop();
  }

  /** One round of the work; exported for tests through `tick()`. */
  async tick(now = Date.now()): Promise<void> {
    if (!this.lease.isHeld) return;
    try {
      if (now - this.readySince >= PRESENCE_REFRESH_MS + SWEEP_MS) await this.sweepPresence(now);
      await this.sweepEphemeral(now);
      if (now - this.lastPrune >= PRUNE_MS) {
        this.lastPrune = now;
        const removed = await this.d.activity.prune(now);
        this.d.log.debug('activity log pruned', { removed });
      }
    } catch (e) {
      this.d.log.warn('housekeeping round failed; next round retries', { error: (e as Error).message });
    }
  }

  private async sweepPresence(now: number): Promise<void> {
    for (const p of await this.d.store.presence.expired(now)) {
      if (!(await this.d.store.presence.clearIf(p.nodeId, p.entry))) continue;
      const lastSeen = new Date(Math.min(p.until, now)).toISOString();
      const node = this.d.tailnet.nodes.get(p.nodeId);
      if (node) await this.d.store.setLastSeen(p.nodeId, lastSeen);
      await this.d.store.publish({ kind: 'node.online', nodeId: p.nodeId, online: false, lastSeen });
      this.d.log.info('node offline: its instance stopped renewing its presence', { node: node?.givenName, id: p.nodeId, instance: p.holders.join(',') });
    }
  }

  private async sweepEphemeral(now: number): Promise<void> {
    const limit = this.d.ephemeralTimeoutSeconds * 1000;
    for (const n of this.d.tailnet.nodes.values()) {
      if (!n.ephemeral || this.d.tailnet.online.has(n.id)) continue;
      const since = Date.parse(n.lastSeen ?? n.created);
      if (!(now - since > limit)) continue;
      try {
        await this.d.store.deleteNode(n.id);
        this.d.log.info('ephemeral node removed after disconnect', { node: n.givenName, id: n.id, by: 'housekeeping' });
        await this.d.activity.record({ action: 'node.delete', actor: 'system', ip: '', target: n.givenName, details: { ephemeral: true, nodeId: n.stableId } });
      } catch (e) {
        this.d.log.debug('ephemeral node already gone', { id: n.id, error: (e as Error).message });
      }
    }
  }
}
