// Console sessions: koa-session with the data kept server-side in Redis (K.consoleSessionPrefix + id); the cookie
// carries only the random id, signed. A session exists only once somebody has signed in (the sign-in form's CSRF
// token lives in a cookie), so anonymous visitors never create Redis keys.
//
// Lifetimes: idle IDLE_MS (no request for that long ends it) and absolute ABSOLUTE_MS from sign-in, both checked on
// every request and both reflected in the Redis TTL, so a stolen id dies on schedule even if nobody asks for it.
import crypto from 'node:crypto';
import type { Redis } from 'ioredis';
import type { ConsoleContext } from '../request/context.ts';
import type { CreateSessionOptions } from 'koa-session';
import type { Config } from '../../../../shared/config.ts';
import { K } from '../../../../shared/redis-keys.ts';
import type { Role } from './accounts.ts';

export const IDLE_MS = 60 * 60 * 1000;
export const ABSOLUTE_MS = 8 * 60 * 60 * 1000;
/** `seen` is written back at most this often, so reading pages does not write to Redis on every request. */
const SEEN_RESOLUTION_MS = 60 * 1000;

/** What a signed-in session holds. */
export interface SessionData {
  /** Account key (lower-cased user name), to find the account. */
  account: string;
  /** The account's id (accounts.ts): the session belongs to this account, not to whoever holds the name later. */
  accountId: string;
  role: Role;
  /** Per-session CSRF token (security/csrf.ts). */
  csrf: string;
  /** Sign-in time, ms. */
  authAt: number;
  /** Last request, ms (to SEEN_RESOLUTION_MS). */
  seen: number;
  /** Address the session was signed in from (shown to the user; not enforced, mobile clients roam). */
  ip: string;
}

export function sessionCookieName(cfg: Config): string {
  // The __Secure- prefix makes browsers refuse the cookie unless it is Secure and set over https, so a plain-http
  // neighbour on the same domain cannot plant one.
  return cfg.secure ? '__Secure-hse_session' : 'hse_session';
}

export function loginCookieName(cfg: Config): string {
  return cfg.secure ? '__Secure-hse_login' : 'hse_login';
}

export function isLive(s: Partial<SessionData> | null | undefined, now = Date.now()): s is SessionData {
  if (!s || typeof s.account !== 'string' || typeof s.csrf !== 'string') return false;
  if (typeof s.authAt !== 'number' || typeof s.seen !== 'number') return false;
  return now - s.authAt < ABSOLUTE_MS && now - s.seen < IDLE_MS;
}

/** Milliseconds until the session ends by either lifetime. */
function remaining(s: Partial<SessionData>, now = Date.now()): number {
  const authAt = typeof s.authAt === 'number' ? s.authAt : now;
  const seen = typeof s.seen === 'number' ? s.seen : now;
  return Math.min(authAt + ABSOLUTE_MS, seen + IDLE_MS) - now;
}

export function sessionKey(id: string): string {
  return `${K.consoleSessionPrefix}${id}`;
}

export function redisSessionStore(redis: Redis) {
  return {
    async get(id: string): Promise<Record<string, unknown> | null> {
      const json = await redis.get(sessionKey(id));
      if (json === null) return null;
      let data: Record<string, unknown> | null = null;
      try {
        data = JSON.parse(json) as Record<string, unknown>;
      } catch {
        // unreadable: treated like an ended session below
      }
      if (!isLive(data as Partial<SessionData> | null)) {
        // Past a lifetime: delete it now rather than leave it to its TTL.
        await redis.del(sessionKey(id));
        return null;
      }
      return data;
    },
    async set(id: string, sess: Record<string, unknown>): Promise<void> {
      const ttl = remaining(sess as Partial<SessionData>);
      if (ttl <= 0) {
        await redis.del(sessionKey(id));
        return;
      }
      await redis.set(sessionKey(id), JSON.stringify(sess), 'PX', ttl);
    },
    async destroy(id: string): Promise<void> {
      await redis.del(sessionKey(id));
    },
  };
}

export function sessionOptions(cfg: Config, redis: Redis): CreateSessionOptions & { path: string } {
  return {
    key: sessionCookieName(cfg),
    // Cookie lifetime: at most the absolute lifetime; the server ends it earlier when idle.
    maxAge: ABSOLUTE_MS,
    httpOnly: true,
    signed: true,
    sameSite: 'lax',
    secure: cfg.secure,
    path: '/console',
    overwrite: true,
    rolling: false,
    renew: false,
    autoCommit: true,
    store: redisSessionStore(redis),
    // 256 random bits, unguessable (the default is a UUID, 122 bits).
    genid: () => crypto.randomBytes(32).toString('base64url'),
    valid: (_ctx: unknown, data: Record<string, unknown>) => isLive(data as Partial<SessionData>),
  };
}

/** The signed-in session of this request, or null. */
export function currentSession(ctx: ConsoleContext): SessionData | null {
  const s = ctx.session;
  return isLive(s) ? s : null;
}

/** Marks the session as used now; written back only when `seen` is stale, which also extends the Redis TTL. */
export function touch(ctx: ConsoleContext, now = Date.now()): void {
  const s = ctx.session;
  if (s && typeof s.seen === 'number' && now - s.seen >= SEEN_RESOLUTION_MS) s.seen = now;
}

/** The session id, for code that must check the session again later (the live tail). */
export function sessionId(ctx: ConsoleContext): string | null {
  return ctx.session?.externalKey ?? null;
}
