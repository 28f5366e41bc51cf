// A per-address budget of attempts that may fail (API authentication; the console's sign-in uses the same budget
// shape through koa-ratelimit): at most `max` in a sliding window of `windowMs`, kept in Redis as a sorted set per
// address, so every instance and process shares it. As in the console's sign-in limit, an attempt is counted
// *before* the credential is checked — a burst of parallel guesses cannot slip past the limit — and a success gives
// its count back, which leaves only failures counted. Refused attempts are not counted, so hammering does not extend
// the block.
import crypto from 'node:crypto';
import type { Redis } from 'ioredis';
import type { IPv6 } from 'ipaddr.js';
import { parseAddress } from './trusted-proxies.ts';

/**
 * The budget an address draws on: the address itself, except that IPv6 addresses share one per /64, because a single
 * subscriber line is handed a whole /64 and could otherwise rotate through 2^64 fresh budgets.
 */
export function limitKey(ip: string): string {
  const addr = parseAddress(ip);
  if (addr === null) return 'unknown';
  if (addr.kind() === 'ipv4') return addr.toString();
  const parts = (addr as IPv6).parts.slice(0, 4);
  return `${parts.map((p) => p.toString(16)).join(':')}::/64`;
}

/** KEYS: the address's set; ARGV: now (ms), window (ms), max, member. Returns 0 (counted) or ms until a slot frees. */
const ATTEMPT_LUA = `
local now = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return math.max(1, tonumber(oldest[2]) + window - now)
end
redis.call('ZADD', KEYS[1], now, ARGV[4])
redis.call('PEXPIRE', KEYS[1], window)
return 0
`;

export interface Attempt {
  /** Give the attempt back (it succeeded). */
  succeeded(): Promise<void>;
}

export class AttemptLimiter {
  private readonly redis: Redis;
  private readonly prefix: string;
  readonly max: number;
  readonly windowMs: number;

  constructor(redis: Redis, opts: { prefix: string; max: number; windowMs: number }) {
    this.redis = redis;
    this.prefix = opts.prefix;
    this.max = opts.max;
    this.windowMs = opts.windowMs;
  }

  /** Counts an attempt from `ip`; returns it, or how many seconds to wait when the budget is spent. */
  async attempt(ip: string): Promise<Attempt | { retryAfter: number }> {
    const key = `${this.prefix}${limitKey(ip)}`;
    const member = crypto.randomBytes(8).toString('hex');
    const wait = Number(await this.redis.eval(ATTEMPT_LUA, 1, key, String(Date.now()), String(this.windowMs), String(this.max), member));
    if (wait > 0) return { retryAfter: Math.ceil(wait / 1000) };
    return {
      succeeded: async () => {
        await this.redis.zrem(key, member);
      },
    };
  }
}
