// What "nothing registered is lost" means, made checkable: the identity of every node (id, keys, addresses, name,
// owner), every user and every pre-auth key, read straight from Redis. Fields that legitimately change while nodes
// come and go (last seen, endpoints, Hostinfo, disco key, home DERP) are left out.
import type { Redis } from 'ioredis';
import type { NodeRecord, PreAuthKeyRecord, UserRecord } from '../../../shared/model.ts';
import { K } from '../../../shared/redis-keys.ts';

export type Snapshot = Map<string, string>;

export async function registrations(redis: Redis): Promise<Snapshot> {
  const [nodes, users, keys] = await Promise.all([redis.hgetall(K.nodes), redis.hgetall(K.users), redis.hgetall(K.preAuthKeys)]);
  const out: Snapshot = new Map();
  for (const [id, json] of Object.entries(nodes)) {
    const n = JSON.parse(json) as NodeRecord;
    out.set(`node:${id}`, [n.stableId, n.machineKey, n.nodeKey, n.ipv4, n.ipv6, n.givenName, n.userId, n.created].join(' '));
  }
  for (const [id, json] of Object.entries(users)) {
    const u = JSON.parse(json) as UserRecord;
    out.set(`user:${id}`, `${u.name} ${u.created}`);
  }
  for (const [id, json] of Object.entries(keys)) {
    const k = JSON.parse(json) as PreAuthKeyRecord;
    out.set(`authkey:${id}`, `${k.prefix} ${k.hash} ${k.userId} ${k.expiration}`);
  }
  return out;
}

/** Entries of `before` that are missing or different in `after`. */
export function lost(before: Snapshot, after: Snapshot): string[] {
  const out: string[] = [];
  for (const [k, v] of before) {
    const now = after.get(k);
    if (now === undefined) out.push(`${k} missing (was ${v})`);
    else if (now !== v) out.push(`${k} changed: ${v} -> ${now}`);
  }
  return out;
}
