// Console accounts (people who sign in to the console; not tailnet users). One Redis hash, K.consoleAccounts:
// field = lower-cased user name, value = Account JSON. Names are matched without regard to case so "Admin" typed on
// a phone that capitalises the first letter still finds "admin". An administrator changes things, an auditor only
// reads (auth/role.ts).
//
// A name is not an identity: an account can be deleted and another created under the same name. So every account
// gets an id of its own when it is created, never reused, and a session belongs to that id (auth/session.ts): a
// session of a deleted account never comes back as a session of a later account that took the name.
import crypto from 'node:crypto';
import type { Redis } from 'ioredis';
import { K } from '../../../../shared/redis-keys.ts';

export type Role = 'admin' | 'auditor';

export interface Account {
  /** Random, given at creation and never changed or reused; sessions are bound to it (see the top of this file). */
  id: string;
  /** As first written, for display. */
  username: string;
  role: Role;
  /** argon2id PHC string (security/password-hash.ts); never the password. */
  passwordHash: string;
  disabled: boolean;
  createdAt: string;
  /** Account name of whoever created it, or "system" for the first administrator. */
  createdBy: string;
  passwordChangedAt: string;
  /** Sessions signed in before this time (ms) are no longer valid: bumped on password change or disable. */
  sessionsNotBefore: number;
  /**
   * Set for an account made by signing in with the identity provider (oidc/provider-accounts.ts): who it is there.
   * Its role follows the provider groups at each sign-in; its password hash is empty, which no password matches.
   */
  idp?: { issuer: string; subject: string };
  email?: string;
  displayName?: string;
}

export const USERNAME_RE = /^[A-Za-z0-9._@-]{1,64}$/;

export function accountKey(username: string): string {
  return username.toLowerCase();
}

/** An account as created: everything but the id, which createIfMissing gives it. */
export type NewAccount = Omit<Account, 'id'>;

function parse(json: string | null): Account | null {
  if (json === null) return null;
  try {
    const a = JSON.parse(json) as Account;
    if (typeof a.username !== 'string' || typeof a.passwordHash !== 'string') return null;
    // Written before accounts had ids: the creation time stands in. A re-created account gets a random id, so an
    // old account's sessions still cannot pass for the new one's.
    if (typeof a.id !== 'string' || a.id === '') a.id = `created:${a.createdAt}`;
    return a;
  } catch {
    return null;
  }
}

export class Accounts {
  readonly redis: Redis;
  constructor(redis: Redis) {
    this.redis = redis;
  }

  async get(username: string): Promise<Account | null> {
    if (!USERNAME_RE.test(username)) return null;
    return parse(await this.redis.hget(K.consoleAccounts, accountKey(username)));
  }

  /**
   * Creates the account, with a new id, unless one with that name exists (atomic, so two console processes cannot
   * both create it). Returns the account created, or null when the name was taken.
   */
  async createIfMissing(a: NewAccount): Promise<Account | null> {
    const account: Account = { id: crypto.randomBytes(16).toString('base64url'), ...a };
    return (await this.redis.hsetnx(K.consoleAccounts, accountKey(a.username), JSON.stringify(account))) === 1 ? account : null;
  }

  async put(a: Account): Promise<void> {
    await this.redis.hset(K.consoleAccounts, accountKey(a.username), JSON.stringify(a));
  }

  /** True when an account was removed. */
  async delete(username: string): Promise<boolean> {
    return (await this.redis.hdel(K.consoleAccounts, accountKey(username))) === 1;
  }

  async list(): Promise<Account[]> {
    const all = await this.redis.hvals(K.consoleAccounts);
    return all.map(parse).filter((a): a is Account => a !== null);
  }
}
