// The key that signs console cookies (koa-session's id cookie and the sign-in form's CSRF cookie). Generated once and
// kept in Redis (K.consoleSecrets, field "cookie"), so every console process and every restart signs alike, and a
// restart does not sign everybody out.
import crypto from 'node:crypto';
import type { Redis } from 'ioredis';
import { K } from '../../../../shared/redis-keys.ts';

export async function loadCookieKeys(redis: Redis): Promise<string[]> {
  await redis.hsetnx(K.consoleSecrets, 'cookie', crypto.randomBytes(32).toString('base64url'));
  const key = await redis.hget(K.consoleSecrets, 'cookie');
  if (!key) throw new Error(`the cookie signing key in Redis (${K.consoleSecrets} cookie) vanished while it was read`);
  return [key];
}
