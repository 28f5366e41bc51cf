// Persistence: the only module that talks to Redis about users, nodes, pre-auth keys and pending registrations. Every
// write publishes a ChangeEvent on K.changes, so every map session (in this process or another instance), the relay
// and the console learn of it. Indices are Redis hashes claimed with HSETNX, which is what keeps addresses, names and
// keys unique under concurrent registrations.
import crypto from 'node:crypto';
import type { Redis } from 'ioredis';
import { encodeChange, type ChangeEvent } from '../../../../shared/changes.ts';
import { defaultDnsSettings, type DnsSettings } from '../../../../shared/dns-settings.ts';
import { HseError } from '../../../../shared/errors.ts';
import type { NodeRecord, PendingAuth, PreAuthKeyRecord, ProviderIdentity, UserRecord } from '../../../../shared/model.ts';
import { identityField, K } from '../../../../shared/redis-keys.ts';
import { displayNameOf, providerProfile, USER_NAME_RE, userNameBase, userNameCandidate } from './identity-user.ts';
import { candidateV4, v6For } from './ip-alloc.ts';
import { Presence } from './presence.ts';
import { labelCandidate, sanitiseLabel } from './names.ts';

const PENDING_TTL_S = 30 * 60;
const pendingKey = (authId: string) => `${K.pendingPrefix}${authId}`;

/**
 * KEYS: users, userByName, nodes, preAuthKeys, preAuthKeyByPrefix, preAuthKeyUsed; ARGV: user id, user name.
 * Returns {machines still owned, keys removed}; deletes nothing when the first is non-zero.
 */
const DELETE_USER_LUA = `
local uid = tonumber(ARGV[1])
local owned = 0
for _, v in ipairs(redis.call('HVALS', KEYS[3])) do
  if cjson.decode(v).userId == uid then owned = owned + 1 end
end
if owned > 0 then return {owned, 0} end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[2])
local removed = 0
local all = redis.call('HGETALL', KEYS[4])
for i = 1, #all, 2 do
  local k = cjson.decode(all[i + 1])
  if k.userId == uid then
    redis.call('HDEL', KEYS[4], all[i])
    redis.call('HDEL', KEYS[5], k.prefix)
    redis.call('HDEL', KEYS[6], all[i])
    removed = removed + 1
  end
end
return {0, removed}
`;

/**
 * KEYS: users, nodes, nodeByNodeKey, nodeByMachineKey, nodeByIPv4, nodeByName; ARGV: owner id, node id, node JSON,
 * node key, machine key, IPv4, name. Writes the node only if the owner exists (else 0) and the machine, address and
 * name claims made for it still name it (else -1: a retry of the same machine took the machine claim over).
 */
const WRITE_NODE_LUA = `
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return 0 end
if redis.call('HGET', KEYS[4], ARGV[5]) ~= ARGV[2] or redis.call('HGET', KEYS[5], ARGV[6]) ~= ARGV[2]
  or redis.call('HGET', KEYS[6], ARGV[7]) ~= ARGV[2] then return -1 end
redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
redis.call('HSET', KEYS[3], ARGV[4], ARGV[2])
return 1
`;

/**
 * KEYS: nodes, nodeByMachineKey, nodeByIPv4, nodeByName; ARGV: machine key, new node id. Claims the machine key for a
 * new node: 1 when claimed, 0 when the machine is registered (its claim names a node that exists).
 *
 * A claim naming a node that was never written is what a registration cut off half-way left behind — the store went
 * away between its steps, or a failover kept the first steps and lost the rest. The machine's retry must not be told
 * "already registered" forever, so the claim is taken over, and the address and name claimed for that id are released
 * (found by value; this path is rare). If that registration was in fact still running, its final write sees the claims
 * are no longer its own and gives up (WRITE_NODE_LUA returns -1).
 */
const CLAIM_MACHINE_LUA = `
if redis.call('HSETNX', KEYS[2], ARGV[1], ARGV[2]) == 1 then return 1 end
local old = redis.call('HGET', KEYS[2], ARGV[1])
if redis.call('HEXISTS', KEYS[1], old) == 1 then return 0 end
for _, idx in ipairs({KEYS[3], KEYS[4]}) do
  local all = redis.call('HGETALL', idx)
  for i = 1, #all, 2 do
    if all[i + 1] == old then redis.call('HDEL', idx, all[i]) end
  end
end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
return 1
`;

/**
 * KEYS: nodes, nodeByNodeKey, nodeByMachineKey, nodeByName, nodeByIPv4, presence; ARGV: node id. Deletes the node
 * and the index entries that still name it, in one step; returns the node's JSON, or false when it was not there — so
 * of two instances removing the same node (an ephemeral node's clean-up) exactly one does it and announces it.
 */
const DELETE_NODE_LUA = `
local raw = redis.call('HGET', KEYS[1], ARGV[1])
if not raw then return false end
local n = cjson.decode(raw)
redis.call('HDEL', KEYS[1], ARGV[1])
local idx = { {KEYS[2], n.nodeKey}, {KEYS[3], n.machineKey}, {KEYS[4], n.givenName}, {KEYS[5], n.ipv4} }
for _, e in ipairs(idx) do
  if type(e[2]) == 'string' and redis.call('HGET', e[1], e[2]) == ARGV[1] then redis.call('HDEL', e[1], e[2]) end
end
redis.call('HDEL', KEYS[6], ARGV[1])
return raw
`;

/** How long after a single-use key was used the same machine may use it again: a retry of the same registration. */
const SINGLE_USE_RETRY_MS = 10 * 60_000;

/** KEYS: a hash; ARGV: field, value. Removes the field only while it still holds that value. */
const HDEL_IF_EQUAL_LUA = `
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then return redis.call('HDEL', KEYS[1], ARGV[1]) end
return 0
`;

function parse<T>(s: string | null | undefined): T | null {
  if (s === null || s === undefined) return null;
  return JSON.parse(s) as T;
}

/** A stored node with the fields later versions added filled in (records written before them lack them). */
function nodeOf(s: string): NodeRecord {
  const n = JSON.parse(s) as NodeRecord;
  n.tags ??= [];
  n.approvedRoutes ??= [];
  return n;
}

function keyOf(s: string): PreAuthKeyRecord {
  const k = JSON.parse(s) as PreAuthKeyRecord;
  k.tags ??= [];
  return k;
}

export interface StoreOptions {
  /**
   * HSE_REDIS_WAIT_REPLICAS: replicas that must have a registration, a node change or a key before it is acknowledged.
   * Redis replicates asynchronously, so a primary that dies right after answering can take the last writes with it
   * when Sentinel promotes a replica; WAIT closes that window for the writes a client is told about.
   */
  waitReplicas?: number;
  /** How long WAIT may take before the caller is told to retry (the write stays on the primary). */
  waitTimeoutMs?: number;
}

export class Store {
  readonly redis: Redis;
  /** Who is online, per instance holding the node's stream (state/presence.ts). */
  readonly presence: Presence;
  private readonly locks = new Map<number, Promise<void>>();
  private readonly waitReplicas: number;
  private readonly waitTimeoutMs: number;
  constructor(redis: Redis, opts: StoreOptions = {}) {
    this.redis = redis;
    this.presence = new Presence(redis);
    this.waitReplicas = opts.waitReplicas ?? 0;
    this.waitTimeoutMs = opts.waitTimeoutMs ?? 2000;
  }

  /**
   * With HSE_REDIS_WAIT_REPLICAS set: waits until that many replicas have every write this connection made, or
   * refuses with a retryable 503 (the client retries; registering again is idempotent by machine key).
   */
  private async replicated(): Promise<void> {
    if (this.waitReplicas === 0) return;
    const acked = (await this.redis.call('WAIT', String(this.waitReplicas), String(this.waitTimeoutMs))) as number;
    if (acked < this.waitReplicas) {
      throw new HseError(503, `the change is not yet on ${this.waitReplicas} Redis replica(s) (${acked} confirmed); retrying shortly is safe`, {
        retryAfter: 2,
      });
    }
  }

  async publish(e: ChangeEvent): Promise<void> {
    await this.redis.publish(K.changes, encodeChange(e));
  }

  // ---- users -------------------------------------------------------------------------------------------------

  async listUsers(): Promise<UserRecord[]> {
    const all = await this.redis.hvals(K.users);
    return all.map((s) => JSON.parse(s) as UserRecord).sort((a, b) => a.id - b.id);
  }

  async getUser(id: number): Promise<UserRecord | null> {
    return parse<UserRecord>(await this.redis.hget(K.users, String(id)));
  }

  async getUserByName(name: string): Promise<UserRecord | null> {
    const id = await this.redis.hget(K.userByName, name.toLowerCase());
    return id === null ? null : this.getUser(Number(id));
  }

  async createUser(
    name: string,
    displayName?: string,
    extra: Pick<UserRecord, 'idp' | 'email' | 'picture' | 'idpGroups' | 'lastSignIn'> = {},
  ): Promise<UserRecord> {
    const n = name.trim().toLowerCase();
    if (!USER_NAME_RE.test(n)) {
      throw new HseError(400, 'a user name is 1 to 63 characters: lowercase letters, digits and . _ @ -, starting with a letter or digit');
    }
    const id = await this.redis.incr(K.userSeq);
    if ((await this.redis.hsetnx(K.userByName, n, String(id))) === 0) throw new HseError(409, `user "${n}" already exists`);
    const u: UserRecord = { id, name: n, displayName: displayName?.trim() || n, created: new Date().toISOString(), ...extra };
    await this.redis.hset(K.users, String(id), JSON.stringify(u));
    await this.replicated();
    await this.publish({ kind: 'user.change', userId: id });
    return u;
  }

  async renameUser(id: number, newName: string): Promise<UserRecord> {
    const u = await this.getUser(id);
    if (!u) throw new HseError(404, `no user with id ${id}`);
    const n = newName.trim().toLowerCase();
    if (!/^[a-z0-9][a-z0-9._@-]{0,62}$/.test(n)) {
      throw new HseError(400, 'a user name is 1 to 63 characters: lowercase letters, digits and . _ @ -, starting with a letter or digit');
    }
    if (n === u.name) return u;
    if ((await this.redis.hsetnx(K.userByName, n, String(id))) === 0) throw new HseError(409, `user "${n}" already exists`);
    await this.redis.hdel(K.userByName, u.name);
    const next: UserRecord = { ...u, name: n, displayName: u.displayName === u.name ? n : u.displayName };
    await this.redis.hset(K.users, String(id), JSON.stringify(next));
    await this.publish({ kind: 'user.change', userId: id });
    return next;
  }

  /**
   * Deletes a user and, in the same atomic step, the pre-auth keys it owned (a leftover reusable key would otherwise
   * keep registering devices to a user that no longer exists). Refused while the user still owns machines; the
   * check and the delete run as one script, so a registration cannot slip a machine in between.
   */
  async deleteUser(id: number): Promise<{ user: UserRecord; keysRemoved: number }> {
    const u = await this.getUser(id);
    if (!u) throw new HseError(404, `no user with id ${id}`);
    const [owned, keysRemoved] = (await this.redis.eval(
      DELETE_USER_LUA,
      6,
      K.users,
      K.userByName,
      K.nodes,
      K.preAuthKeys,
      K.preAuthKeyByPrefix,
      K.preAuthKeyUsed,
      String(id),
      u.name,
    )) as [number, number];
    if (owned > 0) {
      throw new HseError(409, `user "${u.name}" still owns ${owned} machine(s); delete them or move them to another user first`);
    }
    // The provider account is free again (its next sign-in makes a new user), unless the index names another user.
    if (u.idp) await this.redis.eval(HDEL_IF_EQUAL_LUA, 1, K.userByIdentity, identityField(u.idp.issuer, u.idp.subject), String(id));
    await this.publish({ kind: 'user.change', userId: id });
    return { user: u, keysRemoved };
  }

  // ---- users who sign in with the identity provider (identity-user.ts) ---------------------------------------

  async getUserByIdentity(issuer: string, subject: string): Promise<UserRecord | null> {
    const id = await this.redis.hget(K.userByIdentity, identityField(issuer, subject));
    return id === null ? null : this.getUser(Number(id));
  }

  /**
   * The user of this provider account: found by issuer and subject and its profile and groups refreshed, or created
   * at the first sign-in under a free name derived from the e-mail address.
   */
  async signInUser(identity: ProviderIdentity): Promise<{ user: UserRecord; created: boolean }> {
    const field = identityField(identity.issuer, identity.subject);
    const profile = providerProfile(identity, new Date());
    const known = await this.redis.hget(K.userByIdentity, field);
    if (known !== null) {
      const u = await this.getUser(Number(known));
      if (u) {
        const next: UserRecord = { ...u, ...profile };
        await this.redis.hset(K.users, String(u.id), JSON.stringify(next));
        await this.publish({ kind: 'user.change', userId: u.id });
        return { user: next, created: false };
      }
      await this.redis.hdel(K.userByIdentity, field); // its user was deleted while the index entry stayed
    }
    const base = userNameBase(identity);
    const { displayName: _d, ...extra } = profile;
    for (let n = 0; n < 100; n++) {
      let u: UserRecord;
      try {
        u = await this.createUser(userNameCandidate(base, n), displayNameOf(identity) || undefined, {
          ...extra,
          idp: { issuer: identity.issuer, subject: identity.subject },
        });
      } catch (e) {
        if (e instanceof HseError && e.status === 409) continue;
        throw e;
      }
      if ((await this.redis.hsetnx(K.userByIdentity, field, String(u.id))) === 1) return { user: u, created: true };
      // A concurrent first sign-in of the same account won the index: drop the user made here and use that one.
      await this.deleteUser(u.id);
      const winner = await this.getUserByIdentity(identity.issuer, identity.subject);
      if (winner) return { user: winner, created: false };
      throw new HseError(409, 'this account signed in twice at the same moment; sign in again');
    }
    throw new HseError(409, `no free user name for "${base}"; rename or delete users named like it`);
  }

  // ---- nodes -------------------------------------------------------------------------------------------------

  async listNodes(): Promise<NodeRecord[]> {
    const all = await this.redis.hvals(K.nodes);
    return all.map(nodeOf).sort((a, b) => a.id - b.id);
  }

  async getNode(id: number): Promise<NodeRecord | null> {
    const s = await this.redis.hget(K.nodes, String(id));
    return s === null ? null : nodeOf(s);
  }

  async getNodeByNodeKey(nodeKey: string): Promise<NodeRecord | null> {
    const id = await this.redis.hget(K.nodeByNodeKey, nodeKey);
    return id === null ? null : this.getNode(Number(id));
  }

  async getNodeByMachineKey(machineKey: string): Promise<NodeRecord | null> {
    const id = await this.redis.hget(K.nodeByMachineKey, machineKey);
    return id === null ? null : this.getNode(Number(id));
  }

  /** Claims the next free IPv4 address for `nodeId`. */
  private async allocateIPv4(nodeId: number): Promise<string> {
    for (let tries = 0; tries < 4096; tries++) {
      const v4 = candidateV4(await this.redis.incr(K.ipSeq));
      if (v4 === null) continue;
      if ((await this.redis.hsetnx(K.nodeByIPv4, v4, String(nodeId))) === 1) return v4;
    }
    throw new HseError(503, 'no free address found in 100.64.0.0/10');
  }

  /** Claims a unique MagicDNS label derived from `wanted` for `nodeId`. */
  private async claimName(wanted: string, nodeId: number): Promise<string> {
    const base = sanitiseLabel(wanted);
    for (let n = 0; n < 10_000; n++) {
      const label = labelCandidate(base, n);
      if ((await this.redis.hsetnx(K.nodeByName, label, String(nodeId))) === 1) return label;
      if ((await this.redis.hget(K.nodeByName, label)) === String(nodeId)) return label;
    }
    throw new HseError(409, `no free name for "${base}"`);
  }

  /** Creates a node with a fresh id, address and name. The machine key must not be registered yet. */
  async createNode(fields: Omit<NodeRecord, 'id' | 'stableId' | 'givenName' | 'ipv4' | 'ipv6' | 'created' | 'lastSeen'>): Promise<NodeRecord> {
    const id = await this.redis.incr(K.nodeSeq);
    const claimed = await this.redis.eval(CLAIM_MACHINE_LUA, 4, K.nodes, K.nodeByMachineKey, K.nodeByIPv4, K.nodeByName, fields.machineKey, String(id));
    if (claimed !== 1) throw new HseError(409, 'this machine is already registered');
    const ipv4 = await this.allocateIPv4(id);
    const givenName = await this.claimName(fields.hostname, id);
    const node: NodeRecord = {
      ...fields,
      id,
      stableId: `n${crypto.randomBytes(8).toString('hex')}`,
      givenName,
      ipv4,
      ipv6: v6For(ipv4),
      created: new Date().toISOString(),
      lastSeen: null,
    };
    const written = await this.redis.eval(
      WRITE_NODE_LUA,
      6,
      K.users,
      K.nodes,
      K.nodeByNodeKey,
      K.nodeByMachineKey,
      K.nodeByIPv4,
      K.nodeByName,
      String(node.userId),
      String(id),
      JSON.stringify(node),
      node.nodeKey,
      node.machineKey,
      ipv4,
      givenName,
    );
    if (written !== 1) {
      // Release what this attempt claimed, and only what still names it.
      for (const [hash, field] of [
        [K.nodeByMachineKey, node.machineKey],
        [K.nodeByIPv4, ipv4],
        [K.nodeByName, givenName],
      ]) {
        await this.redis.eval(HDEL_IF_EQUAL_LUA, 1, hash, field, String(id));
      }
      if (written === -1) throw new HseError(503, 'this machine registered again while this registration was running; retrying is safe', { retryAfter: 1 });
      throw new HseError(409, `no user with id ${node.userId} (it was deleted); ask an administrator for a new key`);
    }
    await this.replicated();
    await this.publish({ kind: 'node.upsert', nodeId: id, full: true });
    return node;
  }

  /**
   * Writes a changed node and keeps the node-key index in step. `full` tells map sessions whether peers need the
   * whole node again (PeersChanged) or only a patch (endpoints, DERP region, online state).
   */
  async saveNode(node: NodeRecord, prev: NodeRecord, full: boolean): Promise<void> {
    const m = this.redis.multi().hset(K.nodes, String(node.id), JSON.stringify(node));
    if (node.nodeKey !== prev.nodeKey) m.hdel(K.nodeByNodeKey, prev.nodeKey).hset(K.nodeByNodeKey, node.nodeKey, String(node.id));
    await m.exec();
    await this.replicated();
    if (node.nodeKey !== prev.nodeKey) {
      await this.publish({ kind: 'node.keyrotate', nodeId: node.id, oldNodeKey: prev.nodeKey, nodeKey: node.nodeKey });
    }
    await this.publish({ kind: 'node.upsert', nodeId: node.id, full });
  }

  /**
   * Read-modify-write of one node, serialised per node within this process so that concurrent updates (a map
   * request's endpoints, the stream closing, an operator's rename) do not overwrite each other. `change` returns the
   * new record, or null for "no change".
   */
  async updateNode(id: number, change: (n: NodeRecord) => NodeRecord | null, full: boolean, publish = true): Promise<NodeRecord | null> {
    const prevLock = this.locks.get(id) ?? Promise.resolve();
    let release!: () => void;
    const lock = new Promise<void>((r) => (release = r));
    const chained = prevLock.then(() => lock);
    this.locks.set(id, chained);
    await prevLock;
    try {
      const node = await this.getNode(id);
      if (!node) return null;
      const next = change(structuredClone(node));
      if (next === null) return node;
      if (publish) await this.saveNode(next, node, full);
      else await this.redis.hset(K.nodes, String(id), JSON.stringify(next));
      return next;
    } finally {
      release();
      if (this.locks.get(id) === chained) this.locks.delete(id);
    }
  }

  async setLastSeen(id: number, when: string): Promise<void> {
    await this.updateNode(id, (n) => ({ ...n, lastSeen: when }), false, false);
  }

  async renameNode(id: number, wanted: string): Promise<NodeRecord> {
    const node = await this.getNode(id);
    if (!node) throw new HseError(404, `no machine with id ${id}`);
    if (wanted === node.givenName) return node;
    if ((await this.redis.hsetnx(K.nodeByName, wanted, String(id))) === 0) {
      throw new HseError(409, `the name "${wanted}" is taken by another machine`);
    }
    await this.redis.hdel(K.nodeByName, node.givenName);
    return (await this.updateNode(id, (n) => ({ ...n, givenName: wanted }), true)) ?? node;
  }

  async deleteNode(id: number): Promise<NodeRecord> {
    const raw = (await this.redis.eval(DELETE_NODE_LUA, 6, K.nodes, K.nodeByNodeKey, K.nodeByMachineKey, K.nodeByName, K.nodeByIPv4, K.presence, String(id))) as
      | string
      | null;
    if (raw === null) throw new HseError(404, `no machine with id ${id}`);
    const node = nodeOf(raw);
    await this.publish({ kind: 'node.delete', nodeId: id, nodeKey: node.nodeKey });
    return node;
  }

  // ---- pre-auth keys -----------------------------------------------------------------------------------------

  async createPreAuthKey(opts: {
    userId: number;
    reusable: boolean;
    ephemeral: boolean;
    tags?: string[];
    expiration: Date;
    createdBy: string;
    description?: string;
  }): Promise<{ key: string; record: PreAuthKeyRecord }> {
    if (!(await this.getUser(opts.userId))) throw new HseError(404, `no user with id ${opts.userId}`);
    const id = await this.redis.incr(K.authKeySeq);
    const prefix = `hse-auth-${crypto.randomBytes(6).toString('hex')}`;
    const key = `${prefix}-${crypto.randomBytes(24).toString('base64url')}`;
    const record: PreAuthKeyRecord = {
      id,
      prefix,
      hash: sha256(key),
      userId: opts.userId,
      reusable: opts.reusable,
      ephemeral: opts.ephemeral,
      tags: opts.tags ?? [],
      used: false,
      created: new Date().toISOString(),
      expiration: opts.expiration.toISOString(),
      createdBy: opts.createdBy,
      ...(opts.description ? { description: opts.description } : {}),
    };
    await this.redis.multi().hset(K.preAuthKeys, String(id), JSON.stringify(record)).hset(K.preAuthKeyByPrefix, prefix, String(id)).exec();
    await this.replicated();
    return { key, record };
  }

  async listPreAuthKeys(): Promise<PreAuthKeyRecord[]> {
    const [all, used] = await Promise.all([this.redis.hvals(K.preAuthKeys), this.redis.hgetall(K.preAuthKeyUsed)]);
    return all
      .map(keyOf)
      .map((k) => ({ ...k, used: used[String(k.id)] !== undefined }))
      .sort((a, b) => a.id - b.id);
  }

  async getPreAuthKey(id: number): Promise<PreAuthKeyRecord | null> {
    const [rec, used] = await Promise.all([this.redis.hget(K.preAuthKeys, String(id)), this.redis.hexists(K.preAuthKeyUsed, String(id))]);
    const k = rec === null ? null : keyOf(rec);
    return k && { ...k, used: used === 1 };
  }

  async expirePreAuthKey(id: number): Promise<PreAuthKeyRecord> {
    const k = await this.getPreAuthKey(id);
    if (!k) throw new HseError(404, `no pre-auth key with id ${id}`);
    const now = new Date().toISOString();
    const next = { ...k, expiration: now, revoked: k.revoked ?? now };
    await this.redis.hset(K.preAuthKeys, String(id), JSON.stringify(next));
    return next;
  }

  /**
   * Finds a pre-auth key by its text and checks it may be used now by the machine `machineKey`. A single-use key is
   * consumed atomically (HSETNX on K.preAuthKeyUsed: the first registration wins), so two devices racing with the same
   * key cannot both get in. The mark names the machine, so that machine's retry of the same registration — its first
   * answer never arrived, or was "retry" (the store failed over, a WAIT for replicas timed out) after the key was
   * taken — is let through for a while instead of being locked out by its own first attempt.
   */
  async usePreAuthKey(key: string, machineKey: string): Promise<PreAuthKeyRecord> {
    const m = /^(hse-auth-[0-9a-f]{12})-[A-Za-z0-9_-]{32}$/.exec(key);
    const id = m ? await this.redis.hget(K.preAuthKeyByPrefix, m[1]) : null;
    const record = id === null ? null : await this.getPreAuthKey(Number(id));
    if (!record || !timingSafeEqualHex(record.hash, sha256(key))) throw new HseError(401, 'invalid pre-auth key');
    if (Date.parse(record.expiration) <= Date.now()) throw new HseError(401, 'pre-auth key expired; ask an administrator for a new one');
    if (!(await this.getUser(record.userId))) throw new HseError(401, 'the user this pre-auth key belongs to was deleted; ask an administrator for a new key');
    if (record.reusable) return record;
    // HSETNX is the atomic "first one wins" that makes a single-use key register exactly one device.
    const now = Date.now();
    if ((await this.redis.hsetnx(K.preAuthKeyUsed, String(record.id), `${new Date(now).toISOString()} ${machineKey}`)) === 0) {
      const [at, by] = ((await this.redis.hget(K.preAuthKeyUsed, String(record.id))) ?? '').split(' ');
      if (by !== machineKey || !(now - Date.parse(at) < SINGLE_USE_RETRY_MS)) {
        throw new HseError(401, 'pre-auth key already used; single-use keys register one device');
      }
    }
    return { ...record, used: true };
  }

  /** Makes a consumed single-use key usable again (its registration was refused after the key was taken). */
  async releasePreAuthKey(id: number): Promise<void> {
    await this.redis.hdel(K.preAuthKeyUsed, String(id));
  }

  // ---- pending interactive registrations ----------------------------------------------------------------------

  async createPending(p: Omit<PendingAuth, 'authId' | 'status' | 'created'>): Promise<PendingAuth> {
    const pending: PendingAuth = { ...p, authId: crypto.randomBytes(18).toString('base64url'), status: 'pending', created: new Date().toISOString() };
    await this.redis
      .multi()
      .set(pendingKey(pending.authId), JSON.stringify(pending), 'EX', PENDING_TTL_S)
      .zadd(K.pendingIndex, Date.now(), pending.authId)
      .exec();
    await this.publish({ kind: 'pending.change', authId: pending.authId });
    return pending;
  }

  async getPending(authId: string): Promise<PendingAuth | null> {
    if (!/^[A-Za-z0-9_-]{1,64}$/.test(authId)) return null;
    return parse<PendingAuth>(await this.redis.get(pendingKey(authId)));
  }

  async listPending(): Promise<PendingAuth[]> {
    await this.redis.zremrangebyscore(K.pendingIndex, '-inf', Date.now() - PENDING_TTL_S * 1000);
    const ids = await this.redis.zrange(K.pendingIndex, 0, -1);
    if (ids.length === 0) return [];
    const vals = await this.redis.mget(ids.map(pendingKey));
    return vals
      .filter((v): v is string => v !== null)
      .map((v) => JSON.parse(v) as PendingAuth)
      .filter((p) => p.status === 'pending');
  }

  async decidePending(p: PendingAuth): Promise<void> {
    await this.redis.set(pendingKey(p.authId), JSON.stringify(p), 'KEEPTTL');
    if (p.status !== 'pending') await this.redis.zrem(K.pendingIndex, p.authId);
    await this.publish({ kind: 'pending.change', authId: p.authId });
  }

  // ---- DNS settings -----------------------------------------------------------------------------------------

  /** The stored DNS settings, or the defaults when none were ever saved. Fields added later take their defaults. */
  async getDnsSettings(): Promise<DnsSettings> {
    const stored = parse<Partial<DnsSettings>>(await this.redis.get(K.dns));
    return { ...defaultDnsSettings(), ...stored };
  }

  /** Replaces the DNS settings (already validated) and returns the previous ones. */
  async setDnsSettings(next: DnsSettings): Promise<DnsSettings> {
    const res = await this.redis.multi().get(K.dns).set(K.dns, JSON.stringify(next)).exec();
    const prev = parse<Partial<DnsSettings>>((res?.[0]?.[1] as string | null) ?? null);
    await this.publish({ kind: 'dns.change' });
    return { ...defaultDnsSettings(), ...prev };
  }
}

export function sha256(s: string): string {
  return crypto.createHash('sha256').update(s).digest('hex');
}

export function timingSafeEqualHex(a: string, b: string): boolean {
  const x = Buffer.from(a, 'hex');
  const y = Buffer.from(b, 'hex');
  return x.length === y.length && crypto.timingSafeEqual(x, y);
}
