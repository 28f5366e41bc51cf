// Webhook endpoints and their deliveries in Redis, so a delivery waiting for its receiver survives a restart of any
// process or of the whole image (AOF), and every instance sees the same queue:
//   K.webhooks                    endpoint id -> WebhookEndpoint JSON (with its secret: it must sign)
//   K.webhookDeliveries           delivery id -> WebhookDelivery JSON
//   K.webhookDue                  sorted set: pending delivery ids by the time (ms) their next attempt is due
//   K.webhookEndpointDeliveriesPrefix<id>   sorted set: an endpoint's deliveries by id; the newest KEEP are kept
//   K.webhookCursor               the last activity-log entry turned into events (moved in the same MULTI that queues
//                                 its deliveries, so an entry is turned into deliveries exactly once)
import crypto from 'node:crypto';
import type { Redis } from 'ioredis';
import { HseError } from '../../../../shared/errors.ts';
import type { WebhookDelivery, WebhookEndpoint, WebhookEventType } from '../../../../shared/model.ts';
import { K } from '../../../../shared/redis-keys.ts';

/** Deliveries kept per endpoint for the console (older finished ones are dropped). */
const KEEP = 100;

const endpointSet = (id: number) => `${K.webhookEndpointDeliveriesPrefix}${id}`;

export class WebhookStore {
  readonly redis: Redis;

  constructor(redis: Redis) {
    this.redis = redis;
  }

  async createEndpoint(o: { url: string; events: WebhookEventType[]; createdBy: string }): Promise<WebhookEndpoint> {
    const id = await this.redis.incr(K.webhookSeq);
    // Tailscale's webhook secrets are shown once and sign every delivery; this one is 32 random bytes.
    const e: WebhookEndpoint = {
      id,
      url: o.url,
      events: o.events,
      secret: `hse-webhook-${crypto.randomBytes(32).toString('base64url')}`,
      createdBy: o.createdBy,
      created: new Date().toISOString(),
    };
    await this.redis.hset(K.webhooks, String(id), JSON.stringify(e));
    return e;
  }

  async endpoints(): Promise<WebhookEndpoint[]> {
    return (await this.redis.hvals(K.webhooks)).map((s) => JSON.parse(s) as WebhookEndpoint).sort((a, b) => a.id - b.id);
  }

  async endpoint(id: number): Promise<WebhookEndpoint | null> {
    const s = await this.redis.hget(K.webhooks, String(id));
    return s === null ? null : (JSON.parse(s) as WebhookEndpoint);
  }

  /** Deletes an endpoint and its deliveries (pending ones are not sent any more). */
  async deleteEndpoint(id: number): Promise<WebhookEndpoint> {
    const e = await this.endpoint(id);
    if (!e) throw new HseError(404, `no webhook endpoint with id ${id}`);
    const ids = await this.redis.zrange(endpointSet(id), 0, -1);
    const m = this.redis.multi().hdel(K.webhooks, String(id)).del(endpointSet(id));
    if (ids.length > 0) m.hdel(K.webhookDeliveries, ...ids).zrem(K.webhookDue, ...ids);
    await m.exec();
    return e;
  }

  private newDelivery(id: number, endpointId: number, type: string, body: string, now: number): WebhookDelivery {
    const t = new Date(now).toISOString();
    return {
      id,
      endpointId,
      type,
      body,
      status: 'pending',
      attempts: 0,
      created: t,
      nextAttempt: t,
      lastAttempt: null,
      lastStatus: null,
      lastError: null,
      deliveredAt: null,
    };
  }

  /**
   * Queues one delivery per (endpoint, event) and, in the same transaction, moves the activity cursor past the
   * entries they came from (`cursor` null = no cursor change).
   */
  async enqueue(items: { endpointId: number; type: string; body: string }[], cursor: string | null, now = Date.now()): Promise<WebhookDelivery[]> {
    const out: WebhookDelivery[] = [];
    const m = this.redis.multi();
    for (const it of items) {
      const id = await this.redis.incr(K.webhookDeliverySeq);
      const d = this.newDelivery(id, it.endpointId, it.type, it.body, now);
      out.push(d);
      m.hset(K.webhookDeliveries, String(id), JSON.stringify(d)).zadd(K.webhookDue, now, String(id)).zadd(endpointSet(it.endpointId), id, String(id));
    }
    if (cursor !== null) m.set(K.webhookCursor, cursor);
    await m.exec();
    for (const it of new Set(items.map((i) => i.endpointId))) await this.trim(it);
    return out;
  }

  /** Drops an endpoint's oldest finished deliveries beyond KEEP. */
  private async trim(endpointId: number): Promise<void> {
    const n = await this.redis.zcard(endpointSet(endpointId));
    if (n <= KEEP) return;
    const old = await this.redis.zrange(endpointSet(endpointId), 0, n - KEEP - 1);
    const due = new Set((await this.redis.zmscore(K.webhookDue, ...old)).map((s, i) => (s === null ? null : old[i])).filter((x) => x !== null));
    const drop = old.filter((x) => !due.has(x));
    if (drop.length > 0)
      await this.redis
        .multi()
        .zrem(endpointSet(endpointId), ...drop)
        .hdel(K.webhookDeliveries, ...drop)
        .exec();
  }

  async delivery(id: number): Promise<WebhookDelivery | null> {
    const s = await this.redis.hget(K.webhookDeliveries, String(id));
    return s === null ? null : (JSON.parse(s) as WebhookDelivery);
  }

  /** An endpoint's deliveries, newest first. */
  async deliveries(endpointId: number, limit = KEEP): Promise<WebhookDelivery[]> {
    const ids = await this.redis.zrevrange(endpointSet(endpointId), 0, limit - 1);
    if (ids.length === 0) return [];
    const vals = await this.redis.hmget(K.webhookDeliveries, ...ids);
    return vals.filter((v): v is string => v !== null).map((v) => JSON.parse(v) as WebhookDelivery);
  }

  /** Delivery ids due now, oldest first. */
  async due(now: number, limit: number): Promise<number[]> {
    return (await this.redis.zrangebyscore(K.webhookDue, '-inf', now, 'LIMIT', 0, limit)).map(Number);
  }

  /** Records an attempt's outcome: delivered, retried at `retryAt`, or given up (failed). */
  async settle(d: WebhookDelivery): Promise<void> {
    const m = this.redis.multi().hset(K.webhookDeliveries, String(d.id), JSON.stringify(d));
    if (d.status === 'pending' && d.nextAttempt) m.zadd(K.webhookDue, Date.parse(d.nextAttempt), String(d.id));
    else m.zrem(K.webhookDue, String(d.id));
    await m.exec();
  }

  /** Sends a delivery again from the start (an administrator's "Resend"): pending, due now, attempts from zero. */
  async resend(id: number, now = Date.now()): Promise<WebhookDelivery> {
    const d = await this.delivery(id);
    if (!d) throw new HseError(404, `no webhook delivery with id ${id}`);
    const t = new Date(now).toISOString();
    const next: WebhookDelivery = { ...d, status: 'pending', attempts: 0, created: t, nextAttempt: t, lastError: null };
    await this.settle(next);
    return next;
  }

  async cursor(): Promise<string | null> {
    return this.redis.get(K.webhookCursor);
  }

  /** Key expiry already warned about for a node (so each expiry is announced once), and noting it. */
  async expiryNotified(nodeId: number): Promise<string | null> {
    return this.redis.hget(K.webhookExpiryNotified, String(nodeId));
  }

  async noteExpiryNotified(nodeId: number, what: string): Promise<void> {
    await this.redis.hset(K.webhookExpiryNotified, String(nodeId), what);
  }

  /** Drops the expiry notes of machines that no longer exist. */
  async forgetExpiryNotices(exists: (nodeId: number) => boolean): Promise<void> {
    const gone = (await this.redis.hkeys(K.webhookExpiryNotified)).filter((id) => !exists(Number(id)));
    if (gone.length > 0) await this.redis.hdel(K.webhookExpiryNotified, ...gone);
  }
}
