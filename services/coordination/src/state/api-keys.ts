// Keys for the remote API (/api/v2): created by an administrator (console, `hse apikeys create`), shown once, kept
// only as a sha256 hash under their visible prefix, with an expiry, a revocation time and the time and address of
// their last use. A key looks like a pre-auth key: "hse-api-<12 hex>-<32 base64url>" (24 random bytes of secret).
import crypto from 'node:crypto';
import type { Redis } from 'ioredis';
import { HseError } from '../../../../shared/errors.ts';
import type { ApiKeyRecord, ApiKeyView } from '../../../../shared/model.ts';
import { K } from '../../../../shared/redis-keys.ts';
import { sha256, timingSafeEqualHex } from './store.ts';

/** Last-use time and address are written at most this often per key: a busy script must not write on every call. */
const LAST_USED_EVERY_MS = 60_000;

const KEY_RE = /^(hse-api-[0-9a-f]{12})-[A-Za-z0-9_-]{32}$/;

export class ApiKeyStore {
  private readonly redis: Redis;
  private readonly lastWritten = new Map<number, number>();

  constructor(redis: Redis) {
    this.redis = redis;
  }

  async create(o: { description: string; role: ApiKeyRecord['role']; createdBy: string; expiration: Date }): Promise<{ key: string; record: ApiKeyRecord }> {
    const id = await this.redis.incr(K.apiKeySeq);
    const prefix = `hse-api-${crypto.randomBytes(6).toString('hex')}`;
    const key = `${prefix}-${crypto.randomBytes(24).toString('base64url')}`;
    const record: ApiKeyRecord = {
      id,
      prefix,
      hash: sha256(key),
      description: o.description,
      role: o.role,
      createdBy: o.createdBy,
      created: new Date().toISOString(),
      expiration: o.expiration.toISOString(),
      revoked: null,
    };
    await this.redis.multi().hset(K.apiKeys, String(id), JSON.stringify(record)).hset(K.apiKeyByPrefix, prefix, String(id)).exec();
    return { key, record };
  }

  async list(): Promise<ApiKeyView[]> {
    const [all, used] = await Promise.all([this.redis.hvals(K.apiKeys), this.redis.hgetall(K.apiKeyLastUsed)]);
    return all
      .map((s) => JSON.parse(s) as ApiKeyRecord)
      .sort((a, b) => a.id - b.id)
      .map((r) => view(r, used[String(r.id)] ?? null));
  }

  async get(id: number): Promise<ApiKeyView | null> {
    const [s, used] = await Promise.all([this.redis.hget(K.apiKeys, String(id)), this.redis.hget(K.apiKeyLastUsed, String(id))]);
    return s === null ? null : view(JSON.parse(s) as ApiKeyRecord, used);
  }

  /** Revokes a key at once; revoking twice keeps the first time. */
  async revoke(id: number): Promise<ApiKeyView> {
    const s = await this.redis.hget(K.apiKeys, String(id));
    if (s === null) throw new HseError(404, `no API key with id ${id}`);
    const r = JSON.parse(s) as ApiKeyRecord;
    if (r.revoked === null) {
      r.revoked = new Date().toISOString();
      await this.redis.hset(K.apiKeys, String(id), JSON.stringify(r));
    }
    return view(r, await this.redis.hget(K.apiKeyLastUsed, String(id)));
  }

  /**
   * The key's record if `key` is a valid, unexpired, unrevoked API key; null otherwise (the caller answers 401 and
   * counts the failure). The hash is compared in constant time.
   */
  async verify(key: string): Promise<ApiKeyRecord | null> {
    const m = KEY_RE.exec(key);
    const id = m ? await this.redis.hget(K.apiKeyByPrefix, m[1]) : null;
    const s = id === null ? null : await this.redis.hget(K.apiKeys, id);
    if (s === null) return null;
    const r = JSON.parse(s) as ApiKeyRecord;
    if (!timingSafeEqualHex(r.hash, sha256(key))) return null;
    if (r.revoked !== null || Date.parse(r.expiration) <= Date.now()) return null;
    return r;
  }

  /** Notes a use (time and client address), at most once a minute per key per process. */
  async touch(id: number, ip: string): Promise<void> {
    const now = Date.now();
    if (now - (this.lastWritten.get(id) ?? 0) < LAST_USED_EVERY_MS) return;
    this.lastWritten.set(id, now);
    await this.redis.hset(K.apiKeyLastUsed, String(id), JSON.stringify({ time: new Date(now).toISOString(), ip }));
  }
}

function view(r: ApiKeyRecord, lastUsed: string | null): ApiKeyView {
  const { hash: _h, ...rest } = r;
  return {
    ...rest,
    lastUsed: lastUsed === null ? null : (JSON.parse(lastUsed) as { time: string; ip: string }),
    expired: Date.parse(r.expiration) <= Date.now(),
  };
}
