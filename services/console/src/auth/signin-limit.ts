// Sign-in rate limit: at most MAX_FAILURES failed sign-ins per client address in WINDOW_MS, then 429 with
// Retry-After until the oldest failure leaves the window. koa-ratelimit (Redis driver: a sorted set per address under
// K.consoleRateLimitPrefix) counts every attempt *before* the password is checked, so a burst of parallel guesses
// cannot slip past the limit; a successful sign-in then gives its count back, which leaves only failures counted.
// Refused attempts are not counted (the limiter stops adding at the limit), so hammering does not extend the block.
//
// The address is the one the router resolved. Behind a reverse proxy that is not in HSE_TRUSTED_PROXIES every
// visitor appears as the proxy, so they all share one budget: the documented pitfall (README, proxy mode).
import type { Redis } from 'ioredis';
import type { ConsoleContext } from '../request/context.ts';
import ratelimit from 'koa-ratelimit';
import { limitKey } from '../../../../shared/attempt-limit.ts';
import { K } from '../../../../shared/redis-keys.ts';

// The per-address budget (an IPv6 /64 counts as one address) is shared with the API's authentication limit.
export { limitKey };

export const MAX_FAILURES = 10;
export const WINDOW_MS = 600 * 1000;
const NAMESPACE = `${K.consoleRateLimitPrefix}signin`;

export interface Limited {
  /** Seconds until the next attempt is allowed. */
  retryAfter: number;
}

export class SigninLimiter {
  readonly redis: Redis;
  private readonly middleware: ReturnType<typeof ratelimit>;

  constructor(redis: Redis, clientIp: (ctx: Pick<ConsoleContext, 'req'>) => string) {
    this.redis = redis;
    this.middleware = ratelimit({
      driver: 'redis',
      db: redis,
      duration: WINDOW_MS,
      max: MAX_FAILURES,
      namespace: NAMESPACE,
      id: (ctx) => limitKey(clientIp(ctx)),
      // The remaining-attempts headers would tell a guesser exactly how fast to go; Retry-After is enough.
      disableHeader: true,
    });
  }

  /**
   * Counts one attempt for this request's address. Returns null when the attempt may proceed, or how long to wait
   * (Retry-After is then already set on the response).
   */
  async attempt(ctx: ConsoleContext): Promise<Limited | null> {
    let allowed = false;
    await this.middleware(ctx, async () => {
      allowed = true;
    });
    if (allowed) return null;
    const after = Math.max(1, Number(ctx.state.rateLimit?.after ?? 1));
    ctx.set('Retry-After', String(after));
    return { retryAfter: after };
  }

  /** A sign-in succeeded: take back the attempt counted for it. */
  async giveBack(ip: string): Promise<void> {
    await this.redis.zpopmax(`${NAMESPACE}:${limitKey(ip)}`);
  }

  /**
   * True the first time an address is refused within one blocked period, so the activity log gets one
   * "rate limited" entry per block instead of one per refused request.
   */
  async firstRefusal(ip: string, retryAfterSeconds: number): Promise<boolean> {
    const ok = await this.redis.set(`${NAMESPACE}:noted:${limitKey(ip)}`, '1', 'PX', retryAfterSeconds * 1000, 'NX');
    return ok === 'OK';
  }
}
