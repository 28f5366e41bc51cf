// The webhook worker: runs in every coordination process, works only in the one holding the webhooks lease
// (shared/lease.ts, as state/housekeeping.ts), so across instances each event is queued once and each delivery sent
// by one process. Every second, while it holds the lease:
//   1. reads the activity log from its cursor (K.webhookCursor) and queues a delivery per event per subscribed
//      endpoint, moving the cursor in the same transaction (events.ts says which entries are events). The first
//      coordination process ever started sets the cursor to the log's end before it serves (init): installing hse
//      does not replay its history, and nothing that happens after the start is skipped.
//   2. every 10 s: machines whose key expires within a day, or has expired, get nodeKeyExpiringInOneDay /
//      nodeKeyExpired, once per expiry time.
//   3. sends the deliveries that are due. A failed attempt is retried after 10 s, doubling to at most an hour, until a
//      day after the event; then the delivery is marked failed (the console shows each attempt's outcome and can
//      resend). Deliveries live in Redis, so a receiver that is down gets its events when it comes back, across
//      restarts of any process or of the whole image.
// A process that loses the lease mid-send may send that delivery once more after the next holder takes over (at most
// once per TTL); receivers that must not act twice can compare the event's timestamp and type.
import type { Redis } from 'ioredis';
import { type ActivityEntry, parseEntry } from '../../../../shared/activity.ts';
import { Lease } from '../../../../shared/lease.ts';
import type { Logger } from '../../../../shared/log.ts';
import type { WebhookDelivery, WebhookEndpoint } from '../../../../shared/model.ts';
import { K } from '../../../../shared/redis-keys.ts';
import type { Tailnet } from '../state/tailnet.ts';
import type { WebhookStore } from '../state/webhook-store.ts';
import { type EventContext, event, eventsOf, type WebhookEvent } from './events.ts';
import { send } from './sender.ts';

const TICK_MS = 1_000;
const EXPIRY_SCAN_MS = 10_000;
const DAY_MS = 86_400_000;
const FIRST_RETRY_MS = 10_000;
const MAX_RETRY_MS = 3_600_000;
/** Deliveries sent at once; the rest wait for the next tick. */
const BATCH = 20;

/** When to try again after `attempts` failed attempts, or null when the day is over. */
export function nextAttemptAt(attempts: number, created: number, now: number): number | null {
  const at = now + Math.min(FIRST_RETRY_MS * 2 ** (attempts - 1), MAX_RETRY_MS);
  return at - created > DAY_MS ? null : at;
}

export interface WorkerDeps {
  store: WebhookStore;
  redis: Redis;
  tailnet: Tailnet;
  log: Logger;
  holder: string;
  ctx: EventContext;
}

export class WebhookWorker {
  private readonly d: WorkerDeps;
  private readonly lease: Lease;
  private timer: NodeJS.Timeout | null = null;
  private running = false;
  private lastExpiryScan = 0;

  constructor(d: WorkerDeps) {
    this.d = d;
    this.lease = new Lease(d.redis, d.log, { key: K.leaseWebhooks, holder: d.holder, ttlMs: 30_000 });
  }

  /** Sets the cursor to the end of the activity log if no process ever did (SET NX); before the process serves. */
  async init(): Promise<void> {
    const last = (await this.d.redis.xrevrange(K.activity, '+', '-', 'COUNT', 1)) as [string, string[]][];
    await this.d.redis.set(K.webhookCursor, last[0]?.[0] ?? '0-0', 'NX');
  }

  start(): void {
    this.lease.start();
    this.timer = setInterval(() => void this.tick(), TICK_MS);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    await this.lease.stop();
  }

  async tick(now = Date.now()): Promise<void> {
    if (!this.lease.isHeld || this.running) return;
    this.running = true;
    try {
      await this.collect();
      if (now - this.lastExpiryScan >= EXPIRY_SCAN_MS) {
        this.lastExpiryScan = now;
        await this.expiries(now);
      }
      await this.deliver(Date.now());
    } catch (e) {
      this.d.log.warn('webhook round failed; the next one retries', { error: (e as Error).message });
    } finally {
      this.running = false;
    }
  }

  /** Queues `events` to every endpoint subscribed to each; moves the cursor to `cursor` in the same transaction. */
  private async queue(events: WebhookEvent[], cursor: string | null, endpoints: WebhookEndpoint[]): Promise<void> {
    const items: { endpointId: number; type: string; body: string }[] = [];
    for (const ev of events) {
      for (const ep of endpoints) if ((ep.events as string[]).includes(ev.type)) items.push({ endpointId: ep.id, type: ev.type, body: JSON.stringify([ev]) });
    }
    if (items.length === 0 && cursor === null) return;
    await this.d.store.enqueue(items, cursor);
  }

  private async collect(): Promise<void> {
    // Absent only if Redis lost it (a fresh external Redis): start from the log's end, as a first start does.
    let cursor = await this.d.store.cursor();
    if (cursor === null) return this.init();
    for (let round = 0; round < 10; round++) {
      const rows = (await this.d.redis.xrange(K.activity, `(${cursor}`, '+', 'COUNT', 200)) as [string, string[]][];
      if (rows.length === 0) return;
      const endpoints = await this.d.store.endpoints();
      const events: WebhookEvent[] = [];
      for (const [id, fields] of rows) events.push(...(await this.enrich(parseEntry(id, fields))));
      cursor = rows[rows.length - 1][0];
      await this.queue(events, cursor, endpoints);
    }
  }

  /** The entry's events, with what the log does not say filled in from the tailnet; nodeCreated once per machine. */
  private async enrich(entry: ActivityEntry): Promise<WebhookEvent[]> {
    const out: WebhookEvent[] = [];
    for (const ev of eventsOf(this.d.ctx, entry)) {
      const stable = ev.data.nodeID;
      if (stable) {
        const n = [...this.d.tailnet.nodes.values()].find((x) => x.stableId === stable);
        if (n) {
          ev.data.managedBy ||= n.tags.length > 0 ? n.tags.join(',') : (this.d.tailnet.users.get(n.userId)?.name ?? '');
          ev.data.url = `${this.d.ctx.publicOrigin}/console/machines/${n.id}`;
        }
      }
      // A machine is created once: a later login of the same machine (re-login, re-approval) is not a new node. Its
      // deletion forgets it (a machine that joins again after that gets a new StableID anyway).
      if (ev.type === 'nodeCreated' && (!stable || (await this.d.redis.hsetnx(K.webhookNodesAnnounced, stable, '1')) === 0)) continue;
      if (ev.type === 'nodeDeleted' && stable) await this.d.redis.hdel(K.webhookNodesAnnounced, stable);
      out.push(ev);
    }
    return out;
  }

  private async expiries(now: number): Promise<void> {
    await this.d.store.forgetExpiryNotices((id) => this.d.tailnet.nodes.has(id));
    const endpoints = await this.d.store.endpoints();
    if (!endpoints.some((e) => e.events.includes('nodeKeyExpiringInOneDay') || e.events.includes('nodeKeyExpired'))) return;
    const events: WebhookEvent[] = [];
    for (const n of this.d.tailnet.nodes.values()) {
      if (n.expiry === null) continue;
      const left = Date.parse(n.expiry) - now;
      const kind = left <= 0 ? 'expired' : left <= DAY_MS ? 'soon' : null;
      if (!kind) continue;
      const mark = `${kind} ${n.expiry}`;
      if ((await this.d.store.expiryNotified(n.id)) === mark) continue;
      await this.d.store.noteExpiryNotified(n.id, mark);
      const data = {
        nodeID: n.stableId,
        deviceName: `${n.givenName}.${this.d.ctx.baseDomain}`,
        managedBy: n.tags.length > 0 ? n.tags.join(',') : (this.d.tailnet.users.get(n.userId)?.name ?? ''),
        actor: 'system',
        url: `${this.d.ctx.publicOrigin}/console/machines/${n.id}`,
        expires: n.expiry,
      };
      events.push(
        kind === 'soon'
          ? event(this.d.ctx, 'nodeKeyExpiringInOneDay', `Key for node ${n.givenName} expires within a day`, data)
          : event(this.d.ctx, 'nodeKeyExpired', `Key for node ${n.givenName} expired`, data),
      );
    }
    await this.queue(events, null, endpoints);
  }

  private async deliver(now: number): Promise<void> {
    const ids = await this.d.store.due(now, BATCH);
    await Promise.all(ids.map((id) => this.attempt(id)));
  }

  private async attempt(id: number): Promise<void> {
    const d = await this.d.store.delivery(id);
    if (d?.status !== 'pending') return;
    const ep = await this.d.store.endpoint(d.endpointId);
    if (!ep) {
      await this.d.store.settle({ ...d, status: 'failed', nextAttempt: null, lastError: 'the endpoint was deleted' });
      return;
    }
    const started = Date.now();
    const r = await send(ep.url, ep.secret, d.body, started);
    const attempts = d.attempts + 1;
    const base: WebhookDelivery = { ...d, attempts, lastAttempt: new Date(started).toISOString(), lastStatus: r.status, lastError: r.error };
    if (r.ok) {
      await this.d.store.settle({ ...base, status: 'delivered', nextAttempt: null, deliveredAt: new Date().toISOString() });
      this.d.log.info('webhook delivered', { endpoint: ep.id, delivery: d.id, type: d.type, attempts });
      return;
    }
    const next = nextAttemptAt(attempts, Date.parse(d.created), Date.now());
    if (next === null) {
      await this.d.store.settle({ ...base, status: 'failed', nextAttempt: null });
      this.d.log.warn('webhook delivery given up after a day of retries', { endpoint: ep.id, delivery: d.id, type: d.type, error: r.error });
      return;
    }
    await this.d.store.settle({ ...base, nextAttempt: new Date(next).toISOString() });
    this.d.log.info('webhook delivery failed; will retry', {
      endpoint: ep.id,
      delivery: d.id,
      type: d.type,
      attempts,
      error: r.error,
      retryInS: Math.round((next - Date.now()) / 1000),
    });
  }
}
