// Whether a session id still belongs to a live session of an enabled account that has not had its sessions revoked.
// Long-lived responses (event streams) ask this on every heartbeat, because they outlive the request that passed the
// session gate: a sign-out elsewhere, an expiry, or an administrator disabling the account must end them too.
import type { Redis } from 'ioredis';
import type { Accounts } from './accounts.ts';
import { isLive, sessionKey, type SessionData } from './session.ts';

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
  const account = await accounts.get(s.account);
  return account !== null && !account.disabled && s.authAt >= account.sessionsNotBefore;
}
