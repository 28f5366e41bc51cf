// Per-account sign-in throttle, on top of the per-address limit (signin-limit.ts). The address limit alone lets an
// attacker with many addresses guess without end: an IPv6 /48 holds 65,536 /64 budgets of ten guesses each. So
// failures are also counted per account name, from anywhere:
//
//   - fewer than LOCK_AFTER failed passwords for a name in WINDOW_MS: nothing changes;
//   - from LOCK_AFTER on the name is locked against every *network* that has failed on it within the window: an
//     IPv4 /24 or an IPv6 /48, the blocks one attacker typically holds, so new addresses from the same block do not
//     bring fresh guesses. A network is released WINDOW_MS after its own last failure;
//   - a network with no failure on the name is not locked: the account's owner, at home or on a phone's network,
//     still signs in while someone else hammers the account. Each new network the attacker brings gets at most one
//     failed guess before it is locked too.
//
// Counted for every well-formed name, existing or not, so the lock does not reveal which names exist. The same
// counts apply to the current-password check of one's own password change (a stolen session guessing it).
//
// Redis: K.consoleAccountThrottlePrefix + "failures:<name>" is a sorted set of failure times (one member per failure),
// + "networks:<name>" a sorted set network -> time of its last failure; both expire WINDOW_MS after the last write.
import crypto from 'node:crypto';
import type { Redis } from 'ioredis';
import { K } from '../../../../shared/redis-keys.ts';
import { parseAddress } from '../../../../shared/trusted-proxies.ts';
import { accountKey } from './accounts.ts';

export const LOCK_AFTER = 20;
export const WINDOW_MS = 15 * 60 * 1000;
/** Failures kept per name: enough to count to LOCK_AFTER, bounded whatever an attacker sends. */
const KEEP = 1000;
const PREFIX = K.consoleAccountThrottlePrefix;

/** The block an address belongs to for the lock: IPv4 /24, IPv6 /48. */
export function networkOf(ip: string): string {
  const addr = parseAddress(ip);
  if (addr === null) return 'unknown';
  if (addr.kind() === 'ipv4') {
    const o = (addr as import('ipaddr.js').IPv4).octets;
    return `${o[0]}.${o[1]}.${o[2]}.0/24`;
  }
  const p = (addr as import('ipaddr.js').IPv6).parts.slice(0, 3);
  return `${p.map((x) => x.toString(16)).join(':')}::/48`;
}

export interface AccountLock {
  /** Seconds until this network may try this name again. */
  retryAfter: number;
  network: string;
}

export interface Failure {
  /** Failures for the name within the window, this one included. */
  failures: number;
  /** True for the failure that locked the name (once per lock), so the activity log says so once. */
  lockStarted: boolean;
  network: string;
}

export class AccountThrottle {
  readonly redis: Redis;
  constructor(redis: Redis) {
    this.redis = redis;
  }

  private keys(name: string): { failures: string; networks: string; noted: string } {
    const n = accountKey(name);
    return { failures: `${PREFIX}failures:${n}`, networks: `${PREFIX}networks:${n}`, noted: `${PREFIX}noted:${n}` };
  }

  /** Whether `name` is locked against the network of `ip` now; null when an attempt may go ahead. */
  async locked(name: string, ip: string, now = Date.now()): Promise<AccountLock | null> {
    const k = this.keys(name);
    const network = networkOf(ip);
    const [count, last] = await Promise.all([this.redis.zcount(k.failures, now - WINDOW_MS, '+inf'), this.redis.zscore(k.networks, network)]);
    if (count < LOCK_AFTER || last === null || Number(last) <= now - WINDOW_MS) return null;
    return { retryAfter: Math.max(1, Math.ceil((Number(last) + WINDOW_MS - now) / 1000)), network };
  }

  /** Records a failed password for `name` from `ip`. */
  async failed(name: string, ip: string, now = Date.now()): Promise<Failure> {
    const k = this.keys(name);
    const network = networkOf(ip);
    const r = await this.redis
      .multi()
      .zadd(k.failures, now, `${now}:${crypto.randomBytes(6).toString('base64url')}`)
      .zremrangebyscore(k.failures, '-inf', now - WINDOW_MS)
      .zremrangebyrank(k.failures, 0, -KEEP - 1)
      .pexpire(k.failures, WINDOW_MS)
      .zadd(k.networks, now, network)
      .zremrangebyscore(k.networks, '-inf', now - WINDOW_MS)
      .zremrangebyrank(k.networks, 0, -KEEP - 1)
      .pexpire(k.networks, WINDOW_MS)
      .zcard(k.failures)
      .exec();
    const failures = Number(r?.[8]?.[1] ?? 0);
    let lockStarted = false;
    if (failures >= LOCK_AFTER) lockStarted = (await this.redis.set(k.noted, '1', 'PX', WINDOW_MS, 'NX')) === 'OK';
    return { failures, lockStarted, network };
  }

  /** True the first time a network is refused for `name` within one lock, so the activity log notes it once. */
  async firstRefusal(name: string, lock: AccountLock): Promise<boolean> {
    const key = `${this.keys(name).noted}:${lock.network}`;
    return (await this.redis.set(key, '1', 'PX', lock.retryAfter * 1000, 'NX')) === 'OK';
  }
}
