// The tailnet policy file as stored in Redis: every saved version (at most KEEP_VERSIONS, oldest dropped first), each
// with who saved it, from where and when, and which one is in force. A save is one Lua script — check the expected
// version (the API's If-Match), take the next number, store, point "current" at it, trim — so two administrators
// saving at once cannot both win, and the change is published on K.changes for every instance.
// Validation happens before a save (policy/ compiles the text); the store keeps whatever it is given.
// With HSE_POLICY_FILE the file is the policy and this store is not used (map/policy-source.ts).
import { HseError } from '../../../../shared/errors.ts';
import type { PolicyVersion } from '../../../../shared/model.ts';
import { K } from '../../../../shared/redis-keys.ts';
import type { Store } from './store.ts';

export const KEEP_VERSIONS = 100;

export type { PolicyVersion };

/** KEYS: versions hash, current, seq; ARGV: expected current ("" = any), JSON without version, keep. Returns the new version or -1. */
const SAVE_LUA = `
local cur = redis.call('GET', KEYS[2])
if ARGV[1] ~= '' and (cur or '0') ~= ARGV[1] then return -1 end
local v = redis.call('INCR', KEYS[3])
local rec = cjson.decode(ARGV[2])
rec['version'] = v
redis.call('HSET', KEYS[1], tostring(v), cjson.encode(rec))
redis.call('SET', KEYS[2], tostring(v))
local old = v - tonumber(ARGV[3])
if old > 0 then redis.call('HDEL', KEYS[1], tostring(old)) end
return v
`;

export class PolicyStore {
  private readonly store: Store;
  constructor(store: Store) {
    this.store = store;
  }

  private get redis() {
    return this.store.redis;
  }

  async currentVersion(): Promise<number> {
    return Number((await this.redis.get(K.policyCurrent)) ?? 0);
  }

  /** The policy in force, or null when none was ever saved (allow-all). */
  async current(): Promise<PolicyVersion | null> {
    const v = await this.currentVersion();
    return v === 0 ? null : this.get(v);
  }

  async get(version: number): Promise<PolicyVersion | null> {
    const s = await this.redis.hget(K.policyVersions, String(version));
    return s === null ? null : (JSON.parse(s) as PolicyVersion);
  }

  /** Newest first. */
  async history(): Promise<PolicyVersion[]> {
    const all = await this.redis.hvals(K.policyVersions);
    return all.map((s) => JSON.parse(s) as PolicyVersion).sort((a, b) => b.version - a.version);
  }

  /**
   * Stores `text` as the next version and makes it current. With `ifVersion`, refuses (409) unless the current version
   * is still that one — someone else saved in between.
   */
  async save(rec: Omit<PolicyVersion, 'version' | 'time'>, ifVersion?: number): Promise<PolicyVersion> {
    const record = { ...rec, time: new Date().toISOString() };
    const v = (await this.redis.eval(
      SAVE_LUA,
      3,
      K.policyVersions,
      K.policyCurrent,
      K.policySeq,
      ifVersion === undefined ? '' : String(ifVersion),
      JSON.stringify(record),
      String(KEEP_VERSIONS),
    )) as number;
    if (v === -1) throw new HseError(409, `the policy changed since version ${ifVersion} was read; reload it and apply your change again`);
    await this.store.publish({ kind: 'policy.change', version: v });
    return { ...record, version: v };
  }
}
