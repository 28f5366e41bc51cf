// Who is online, across every instance sharing the store. A node is online while some coordination process holds a
// map stream of it; each such process vouches for the node for PRESENCE_TTL_MS and renews that every
// PRESENCE_REFRESH_MS (control/map-hub.ts). A node is kept per holder because it may be on two instances at once for
// a while: it reconnected through the load balancer to B while A has not yet noticed its old connection is dead (a
// half-open TCP connection can take minutes to fail). When A's stream finally closes, the node is not offline — B
// still holds it — so releasing a stream reports whether another holder remains, and only the last one makes the
// node offline. A holder that dies without releasing simply stops renewing; the housekeeping sweep
// (state/housekeeping.ts) finds nodes whose every holder ran out.
//
// Hash K.presence, field = node id, value = JSON {"<instance>": <until, ms since epoch>, ...}. Expired holders are
// dropped whenever an entry is written. (A value from before several instances, "<instance>:<until>", reads as one
// holder.)
import type { Redis } from 'ioredis';
import { K } from '../../../../shared/redis-keys.ts';

/** Lua: an entry's live holders as a table, expired ones dropped; accepts the old "<instance>:<until>" form. */
const HOLDERS_LUA = `
local function holders(raw, now)
  local out = {}
  if not raw then return out end
  local ok, m = pcall(cjson.decode, raw)
  if not ok or type(m) ~= 'table' then
    local inst, untilms = string.match(raw, '^(.*):(%d+)$')
    m = {}
    if inst then m[inst] = tonumber(untilms) end
  end
  for inst, untilms in pairs(m) do
    if tonumber(untilms) and tonumber(untilms) > now then out[inst] = tonumber(untilms) end
  end
  return out
end
`;

/** KEYS: presence; ARGV: instance, until, now, node ids... Records `instance` as a holder of each node until `until`. */
const TOUCH_LUA = `${HOLDERS_LUA}
local now = tonumber(ARGV[3])
for i = 4, #ARGV do
  local h = holders(redis.call('HGET', KEYS[1], ARGV[i]), now)
  h[ARGV[1]] = tonumber(ARGV[2])
  redis.call('HSET', KEYS[1], ARGV[i], cjson.encode(h))
end
return #ARGV - 3
`;

/** KEYS: presence; ARGV: node id, instance, now. Drops `instance` as a holder; returns how many others remain. */
const RELEASE_LUA = `${HOLDERS_LUA}
local h = holders(redis.call('HGET', KEYS[1], ARGV[1]), tonumber(ARGV[3]))
h[ARGV[2]] = nil
local left = 0
for _ in pairs(h) do left = left + 1 end
if left == 0 then redis.call('HDEL', KEYS[1], ARGV[1]) else redis.call('HSET', KEYS[1], ARGV[1], cjson.encode(h)) end
return left
`;

/** KEYS: presence; ARGV: node id, entry. Removes the entry only while it is still exactly `entry` (nobody renewed it). */
const CLEAR_IF_LUA = `
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then return redis.call('HDEL', KEYS[1], ARGV[1]) end
return 0
`;

/** An entry's holders (instance -> until), from either form. */
export function holdersOf(raw: string): Map<string, number> {
  const out = new Map<string, number>();
  try {
    const m = JSON.parse(raw) as unknown;
    if (m && typeof m === 'object' && !Array.isArray(m)) {
      for (const [inst, until] of Object.entries(m as Record<string, unknown>)) if (typeof until === 'number') out.set(inst, until);
      return out;
    }
  } catch {
    // the old form
  }
  const i = raw.lastIndexOf(':');
  if (i > 0 && /^\d+$/.test(raw.slice(i + 1))) out.set(raw.slice(0, i), Number(raw.slice(i + 1)));
  return out;
}

/** The latest time any holder vouches for, or 0. */
function latest(raw: string): number {
  let max = 0;
  for (const until of holdersOf(raw).values()) max = Math.max(max, until);
  return max;
}

export class Presence {
  private readonly redis: Redis;
  constructor(redis: Redis) {
    this.redis = redis;
  }

  /** `instance` holds streams of `nodeIds`: it vouches for them for `ttlMs`. */
  async touch(nodeIds: number[], instance: string, ttlMs: number, now = Date.now()): Promise<void> {
    if (nodeIds.length === 0) return;
    await this.redis.eval(TOUCH_LUA, 1, K.presence, instance, String(now + ttlMs), String(now), ...nodeIds.map(String));
  }

  /** `instance` no longer holds a stream of the node. Returns how many other instances still do (0 = offline now). */
  async release(nodeId: number, instance: string, now = Date.now()): Promise<number> {
    return (await this.redis.eval(RELEASE_LUA, 1, K.presence, String(nodeId), instance, String(now))) as number;
  }

  /** Nodes whose every holder ran out (their instances died or lost the store), with the entry as read. */
  async expired(now = Date.now()): Promise<{ nodeId: number; entry: string; until: number; holders: string[] }[]> {
    const all = await this.redis.hgetall(K.presence);
    const out: { nodeId: number; entry: string; until: number; holders: string[] }[] = [];
    for (const [id, v] of Object.entries(all)) {
      const until = latest(v);
      if (!(until > now)) out.push({ nodeId: Number(id), entry: v, until: until || now, holders: [...holdersOf(v).keys()] });
    }
    return out;
  }

  /** Removes an expired entry unless a holder renewed it meanwhile; true when removed. */
  async clearIf(nodeId: number, entry: string): Promise<boolean> {
    return (await this.redis.eval(CLEAR_IF_LUA, 1, K.presence, String(nodeId), entry)) === 1;
  }

  /** Node ids some holder vouches for now. */
  async onlineIds(now = Date.now()): Promise<Set<number>> {
    const all = await this.redis.hgetall(K.presence);
    const out = new Set<number>();
    for (const [id, v] of Object.entries(all)) if (latest(v) > now) out.add(Number(id));
    return out;
  }
}
