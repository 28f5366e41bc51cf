// Console accounts of people who sign in with the identity provider. They live with the other accounts (so the
// session gate, Accounts page, disabling and the activity log treat them alike), found by issuer and subject through
// the index K.consoleOidcAccounts, never by e-mail: a local account "alice@example.com" and the provider's
// alice@example.com are different people until an administrator says otherwise. The account name is the e-mail
// address (or the provider's user name) when free, else that name with "-2", "-3"…; the role is set from the
// groups at every sign-in, so a change of groups at the provider takes effect at the next sign-in.
import crypto from 'node:crypto';
import type { Redis } from 'ioredis';
import type { ProviderIdentity } from '../../../../shared/model.ts';
import { identityField, K } from '../../../../shared/redis-keys.ts';
import { type Account, accountKey, type Accounts, type NewAccount, type Role, USERNAME_RE } from '../auth/accounts.ts';

/** The account name to try first for this identity. */
export function accountNameBase(id: ProviderIdentity): string {
  for (const c of [id.email, id.preferredUsername]) {
    const n = c?.trim();
    if (n && USERNAME_RE.test(n) && n.length <= 60) return n;
  }
  const reduced = (id.email ?? id.preferredUsername ?? id.name ?? '').replace(/[^A-Za-z0-9._@-]+/g, '-').slice(0, 56);
  if (/[A-Za-z0-9]/.test(reduced)) return reduced;
  return `idp-${crypto.createHash('sha256').update(identityField(id.issuer, id.subject)).digest('hex').slice(0, 10)}`;
}

function candidate(base: string, n: number): string {
  return n === 0 ? base : `${base}-${n + 1}`;
}

export class ProviderAccounts {
  private readonly accounts: Accounts;
  private readonly redis: Redis;
  constructor(accounts: Accounts, redis: Redis) {
    this.accounts = accounts;
    this.redis = redis;
  }

  /** The account of this provider identity, or null when it never signed in (or its account was deleted). */
  async find(id: ProviderIdentity): Promise<Account | null> {
    const key = await this.redis.hget(K.consoleOidcAccounts, identityField(id.issuer, id.subject));
    if (key === null) return null;
    const a = await this.accounts.get(key);
    return a?.idp && a.idp.issuer === id.issuer && a.idp.subject === id.subject ? a : null;
  }

  /** Finds or creates the account for a sign-in with `role`, with the profile refreshed from the provider. */
  async signIn(id: ProviderIdentity, role: Role): Promise<Account> {
    const profile = { role, email: id.email ?? undefined, displayName: id.name ?? id.preferredUsername ?? undefined };
    const existing = await this.find(id);
    if (existing) {
      const next: Account = { ...existing, ...profile };
      await this.accounts.put(next);
      return next;
    }
    const field = identityField(id.issuer, id.subject);
    // find() found no account behind the index entry (an administrator deleted it): a new account is made.
    await this.redis.hdel(K.consoleOidcAccounts, field);
    const base = accountNameBase(id);
    const now = new Date().toISOString();
    for (let n = 0; n < 100; n++) {
      const fields: NewAccount = {
        username: candidate(base, n),
        passwordHash: '',
        disabled: false,
        createdAt: now,
        createdBy: 'identity provider',
        passwordChangedAt: now,
        sessionsNotBefore: 0,
        idp: { issuer: id.issuer, subject: id.subject },
        ...profile,
      };
      const a = await this.accounts.createIfMissing(fields);
      if (!a) continue;
      if ((await this.redis.hsetnx(K.consoleOidcAccounts, field, accountKey(a.username))) === 1) return a;
      // A concurrent first sign-in of the same person won the index: keep theirs.
      await this.accounts.delete(a.username);
      const winner = await this.find(id);
      if (winner) return winner;
      throw new Error('this account signed in twice at the same moment; sign in again');
    }
    throw new Error(`no free console account name for "${base}"`);
  }

  /** Ends every session of this identity's account (it signed in without a role: its groups no longer give one). */
  async endSessions(id: ProviderIdentity): Promise<void> {
    const a = await this.find(id);
    if (a) await this.accounts.put({ ...a, sessionsNotBefore: Date.now() });
  }
}
