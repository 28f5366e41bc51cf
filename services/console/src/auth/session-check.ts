// Whether a session still belongs to its account: the account it signed in to (by id, not name), enabled, not revoked.
// Long-lived responses (event streams) ask this on every heartbeat, because they outlive the request that passed the
// session gate: a sign-out elsewhere, an expiry, or an administrator disabling the account must end them too.
import type { Redis } from 'ioredis';
import type { Account, Accounts } from './accounts.ts';
import { isLive, sessionKey, type SessionData } from './session.ts';

/**
 * The account a live session belongs to, if it still does: an account under the session's name with the id it was
 * signed in to (not a later account that reused the name), enabled, and without a revocation since the sign-in.
 */
export async function accountOfSession(accounts: Accounts, s: SessionData): Promise<Account | null> {
  const account = await accounts.get(s.account);
  if (!account || account.id !== s.accountId || account.disabled || s.authAt < account.sessionsNotBefore) return null;
  return account;
}

/** true = live, false = ended; throws when the store cannot be asked (callers keep the stream and ask again). */
export async function sessionStillLive(redis: Redis, accounts: Accounts, sid: string | null): Promise<boolean> {
  if (!sid) return false;
  const json = await redis.get(sessionKey(sid));
  let s: Partial<SessionData> | null = null;
  try {
    s = json ? (JSON.parse(json) as Partial<SessionData>) : null;
  } catch {
    return false;
  }
  if (!isLive(s)) return false;
  return (await accountOfSession(accounts, s)) !== null;
}
