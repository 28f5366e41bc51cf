// The limits around every password check of the console: the sign-in form and the current-password check of one's
// own password change (a stolen session guessing the password to take the account over counts like any guesser).
//   before the check: the attempt is counted against the client's address (signin-limit.ts), and refused when the
//                     address is out of attempts or the account is locked against its network (account-throttle.ts);
//   after it:         a success gives the address's attempt back; a failure counts against the account.
// First refusals and the start of an account lock go to the activity log (once per blocked period, not per request).
import type { ConsoleContext } from '../request/context.ts';
import type { Logger } from '../../../../shared/log.ts';
import type { AccountThrottle } from './account-throttle.ts';
import { USERNAME_RE } from './accounts.ts';
import type { RecordActivity } from './login-routes.ts';
import type { SigninLimiter } from './signin-limit.ts';

export interface GuardDeps {
  limiter: SigninLimiter;
  throttle: AccountThrottle;
  record: RecordActivity;
  clientIp: (ctx: ConsoleContext) => string;
  log: Logger;
}

export interface Refusal {
  /** address: this address is out of attempts; account: the account is locked against this address's network. */
  kind: 'address' | 'account';
  retryAfter: number;
}

/** Call before checking a password for `name` (as typed). Null: go ahead. Otherwise Retry-After is already set. */
export async function beforePasswordCheck(ctx: ConsoleContext, d: GuardDeps, name: string): Promise<Refusal | null> {
  const ip = d.clientIp(ctx);
  const limited = await d.limiter.attempt(ctx);
  if (limited) {
    if (await d.limiter.firstRefusal(ip, limited.retryAfter)) {
      await d.record(ctx, 'console.signin_ratelimited', name, name, { retryAfterSeconds: limited.retryAfter });
      d.log.warn('sign-in rate limit reached', { ip, retryAfter: limited.retryAfter });
    }
    return { kind: 'address', retryAfter: limited.retryAfter };
  }
  const lock = USERNAME_RE.test(name) ? await d.throttle.locked(name, ip) : null;
  if (lock) {
    // Refused without looking at the password: not an attempt of this address.
    await d.limiter.giveBack(ip);
    if (await d.throttle.firstRefusal(name, lock)) {
      await d.record(ctx, 'console.signin_account_refused', name, name, { network: lock.network, retryAfterSeconds: lock.retryAfter });
    }
    ctx.set('Retry-After', String(lock.retryAfter));
    return { kind: 'account', retryAfter: lock.retryAfter };
  }
  return null;
}

/** Call after the password check that beforePasswordCheck let through. */
export async function afterPasswordCheck(ctx: ConsoleContext, d: GuardDeps, name: string, ok: boolean): Promise<void> {
  const ip = d.clientIp(ctx);
  if (ok) {
    await d.limiter.giveBack(ip);
    return;
  }
  if (!USERNAME_RE.test(name)) return;
  const f = await d.throttle.failed(name, ip);
  if (f.lockStarted) {
    await d.record(ctx, 'console.signin_account_locked', name, name, { failures: f.failures, network: f.network });
    d.log.warn('console account locked against the networks its failed sign-ins came from', { account: name, failures: f.failures });
  }
}
