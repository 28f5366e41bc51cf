// Work that must happen once across every instance sharing a Redis (the coordination service's housekeeping: presence
// sweep, ephemeral clean-up, activity-log pruning) runs only while this process holds a lease: a Redis key set with
// NX and a time to live, renewed well before it runs out. When the holder dies, the key expires and another instance
// takes the lease over at its next attempt, so the work stops for at most one TTL plus one renewal period.
//
// Renewing and releasing compare the holder first (one Lua script each), so an instance that lost its lease — a long
// pause, a Redis failover that dropped the key — can never extend or delete the new holder's lease; it notices at its
// next renewal and stops.
import type { Redis } from 'ioredis';
import type { Logger } from './log.ts';

const RENEW_LUA = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
`;
const RELEASE_LUA = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`;

export interface LeaseOptions {
  /** Redis key of the lease. */
  key: string;
  /** Who holds it: unique per process (instance id + process name). */
  holder: string;
  /** How long the lease lasts without renewal. */
  ttlMs: number;
}

export class Lease {
  readonly key: string;
  readonly holder: string;
  readonly ttlMs: number;
  private readonly redis: Redis;
  private readonly log: Logger;
  private timer: NodeJS.Timeout | null = null;
  private held = false;

  constructor(redis: Redis, log: Logger, opts: LeaseOptions) {
    this.redis = redis;
    this.log = log;
    this.key = opts.key;
    this.holder = opts.holder;
    this.ttlMs = opts.ttlMs;
  }

  /** True while this process holds the lease (as of the last attempt, at most a third of the TTL ago). */
  get isHeld(): boolean {
    return this.held;
  }

  /** One attempt: take the lease if it is free, renew it if it is ours. Never throws; Redis down = not held. */
  async attempt(): Promise<boolean> {
    let held: boolean;
    try {
      if (this.held) held = (await this.redis.eval(RENEW_LUA, 1, this.key, this.holder, String(this.ttlMs))) === 1;
      else held = (await this.redis.set(this.key, this.holder, 'PX', this.ttlMs, 'NX')) === 'OK';
    } catch {
      held = false;
    }
    if (held !== this.held) this.log.info(held ? 'took the lease' : 'lost the lease', { lease: this.key, holder: this.holder });
    this.held = held;
    return held;
  }

  /** Attempts now and every third of the TTL. */
  start(): void {
    if (this.timer) return;
    void this.attempt();
    this.timer = setInterval(() => void this.attempt(), Math.max(50, Math.floor(this.ttlMs / 3)));
    this.timer.unref();
  }

  /** Stops renewing and gives the lease up at once, so another instance takes over without waiting for the TTL. */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    if (!this.held) return;
    this.held = false;
    try {
      await this.redis.eval(RELEASE_LUA, 1, this.key, this.holder);
    } catch {
      // It expires on its own.
    }
  }
}
