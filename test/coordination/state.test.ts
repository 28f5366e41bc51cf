// The state layer against a real redis-server: addresses and names stay unique under concurrent registrations,
// single-use keys register exactly one device, and re-registration keeps identity. Several instances may run the same
// step at once or be cut off between steps (a store failover): a registration cut off half-way does not lock its
// machine out, a machine's retry gets past its own single-use key, and a node removed twice is removed once.
import test from 'ava';
import fc from 'fast-check';
import { Store } from '../../services/coordination/src/state/store.ts';
import { candidateV4, v6For } from '../../services/coordination/src/state/ip-alloc.ts';
import { labelCandidate, sanitiseLabel } from '../../services/coordination/src/state/names.ts';
import { nodeFields, testKey } from '../harness/node-fields.ts';
import { startRedis, type TestRedis } from '../harness/redis.ts';

let redis: TestRedis;
test.before(async () => {
  redis = await startRedis();
});
test.after.always(async () => {
  await redis?.stop();
});

const key = testKey;
/** A machine key for the calls where which machine asks does not matter. */
const M = key(1, 'mkey');

test.serial('concurrent registrations get distinct addresses and names', async (t) => {
  const store = new Store(redis.client());
  const u = await store.createUser('alice');
  const nodes = await Promise.all(Array.from({ length: 60 }, (_, i) => store.createNode(nodeFields(1000 + i, u.id))));
  t.is(new Set(nodes.map((n) => n.ipv4)).size, 60);
  t.is(new Set(nodes.map((n) => n.ipv6)).size, 60);
  t.is(new Set(nodes.map((n) => n.givenName)).size, 60);
  t.true(nodes.some((n) => n.givenName === 'laptop'));
  t.true(nodes.some((n) => n.givenName === 'laptop-1'));
  for (const n of nodes) t.regex(n.ipv4, /^100\.(6[4-9]|[7-9]\d|1[01]\d|12[0-7])\.\d+\.\d+$/);
  // A second registration of the same machine is refused at the store level (the registrar re-keys instead).
  await t.throwsAsync(() => store.createNode(nodeFields(1000, u.id)), { message: /already registered/ });
});

test.serial('a single-use key registers exactly one device, even when raced', async (t) => {
  const store = new Store(redis.client());
  const u = await store.createUser('bob');
  const { key: k } = await store.createPreAuthKey({
    userId: u.id,
    reusable: false,
    ephemeral: false,
    expiration: new Date(Date.now() + 60_000),
    createdBy: 'test',
  });
  const results = await Promise.allSettled(Array.from({ length: 10 }, (_, i) => store.usePreAuthKey(k, key(100 + i, 'mkey'))));
  t.is(results.filter((r) => r.status === 'fulfilled').length, 1);
  const rejected = results.filter((r) => r.status === 'rejected') as PromiseRejectedResult[];
  t.regex(String(rejected[0].reason.message), /already used/);
  const listed = (await store.listPreAuthKeys()).find((x) => x.userId === u.id)!;
  t.true(listed.used);
});

test.serial('expired, unknown and tampered keys are refused with a reason', async (t) => {
  const store = new Store(redis.client());
  const u = await store.createUser('carol');
  const { key: k, record } = await store.createPreAuthKey({
    userId: u.id,
    reusable: true,
    ephemeral: false,
    expiration: new Date(Date.now() + 60_000),
    createdBy: 'test',
  });
  t.is((await store.usePreAuthKey(k, M)).id, record.id);
  t.is((await store.usePreAuthKey(k, M)).id, record.id, 'reusable keys work twice');
  await t.throwsAsync(() => store.usePreAuthKey(k.slice(0, -1) + (k.endsWith('A') ? 'B' : 'A'), M), { message: /invalid pre-auth key/ });
  await t.throwsAsync(() => store.usePreAuthKey('nonsense', M), { message: /invalid pre-auth key/ });
  await store.expirePreAuthKey(record.id);
  await t.throwsAsync(() => store.usePreAuthKey(k, M), { message: /expired/ });
});

test.serial('deleting a user that owns machines is refused with a clear message', async (t) => {
  const store = new Store(redis.client());
  const u = await store.createUser('dave');
  const n = await store.createNode(nodeFields(5000, u.id));
  await t.throwsAsync(() => store.deleteUser(u.id), { message: /still owns 1 machine/ });
  await store.deleteNode(n.id);
  await t.notThrowsAsync(() => store.deleteUser(u.id));
  t.is(await store.getNodeByNodeKey(n.nodeKey), null);
});

test.serial('deleting a user removes its pre-auth keys, so a leftover reusable key registers nothing', async (t) => {
  const store = new Store(redis.client());
  const u = await store.createUser('erin');
  const other = await store.createUser('frank');
  const exp = new Date(Date.now() + 60_000);
  const { key: reusable } = await store.createPreAuthKey({ userId: u.id, reusable: true, ephemeral: false, expiration: exp, createdBy: 'test' });
  const { key: single, record: singleRec } = await store.createPreAuthKey({
    userId: u.id,
    reusable: false,
    ephemeral: false,
    expiration: exp,
    createdBy: 'test',
  });
  await store.usePreAuthKey(single, M);
  const { record: kept } = await store.createPreAuthKey({ userId: other.id, reusable: true, ephemeral: false, expiration: exp, createdBy: 'test' });

  const { keysRemoved } = await store.deleteUser(u.id);
  t.is(keysRemoved, 2);
  await t.throwsAsync(() => store.usePreAuthKey(reusable, M), { message: /invalid pre-auth key/ });
  const left = await store.listPreAuthKeys();
  t.false(
    left.some((k) => k.userId === u.id),
    'no key of the deleted user is listed',
  );
  t.true(
    left.some((k) => k.id === kept.id),
    "another user's key is untouched",
  );
  t.is(await store.redis.hget('hse:authkeys:used', String(singleRec.id)), null, 'the used-key marker went too');
});

test.serial('a machine is never written for a user deleted while its registration was in flight', async (t) => {
  const store = new Store(redis.client());
  const u = await store.createUser('grace');
  // The registration checked the key, then the operator deleted the (still empty) user before the machine landed.
  await store.deleteUser(u.id);
  const fields = nodeFields(6000, u.id);
  await t.throwsAsync(() => store.createNode(fields), { message: /no user with id \d+ \(it was deleted\)/ });
  t.is(await store.getNodeByNodeKey(fields.nodeKey), null);
  t.is(await store.getNodeByMachineKey(fields.machineKey), null, 'the machine-key claim is released, so it can register again');
  t.false((await store.listNodes()).some((n) => n.userId === u.id));
});

test.serial('a key whose user vanished without the cleanup (data from an older version) is refused', async (t) => {
  const store = new Store(redis.client());
  const u = await store.createUser('heidi');
  const { key: k } = await store.createPreAuthKey({
    userId: u.id,
    reusable: true,
    ephemeral: false,
    expiration: new Date(Date.now() + 60_000),
    createdBy: 'test',
  });
  await store.redis.hdel('hse:users', String(u.id));
  await t.throwsAsync(() => store.usePreAuthKey(k, M), { message: /belongs to was deleted/ });
});

test.serial('a machine retrying its registration gets past the single-use key its first attempt consumed; another machine does not', async (t) => {
  const store = new Store(redis.client());
  const u = await store.createUser('ivan');
  const { key: k } = await store.createPreAuthKey({
    userId: u.id,
    reusable: false,
    ephemeral: false,
    expiration: new Date(Date.now() + 60_000),
    createdBy: 'test',
  });
  const machine = key(7000, 'mkey');
  await store.usePreAuthKey(k, machine);
  t.is((await store.usePreAuthKey(k, machine)).used, true, 'the same machine again (its first answer was lost)');
  await t.throwsAsync(() => store.usePreAuthKey(k, key(7001, 'mkey')), { message: /already used/ });
});

test.serial('a registration cut off half-way (store lost between its steps) does not lock the machine out', async (t) => {
  const store = new Store(redis.client());
  const u = await store.createUser('judy');
  const fields = nodeFields(8000, u.id);
  // What the first steps of a registration for node id 999999 left: the machine, an address and a name claimed, no node.
  await store.redis.hset('hse:idx:mkey', fields.machineKey, '999999');
  await store.redis.hset('hse:idx:ipv4', '100.127.255.1', '999999');
  await store.redis.hset('hse:idx:name', 'judys-laptop', '999999');
  const n = await store.createNode({ ...fields, hostname: 'judys-laptop' });
  t.is(n.givenName, 'judys-laptop', 'the name claimed by the cut-off attempt is free again');
  t.is((await store.getNodeByMachineKey(fields.machineKey))?.id, n.id);
  t.is(await store.redis.hget('hse:idx:ipv4', '100.127.255.1'), null, 'the address the cut-off attempt claimed is released');
  // A machine whose node exists is still refused.
  await t.throwsAsync(() => store.createNode(fields), { message: /already registered/ });
});

test.serial('a node removed by two instances at once is removed once', async (t) => {
  const store = new Store(redis.client());
  const other = new Store(redis.client());
  const u = await store.createUser('kim');
  const n = await store.createNode(nodeFields(9000, u.id));
  const sub = redis.client();
  const events: string[] = [];
  sub.on('message', (_c, m) => events.push(m));
  await sub.subscribe('hse:changes');
  const results = await Promise.allSettled([store.deleteNode(n.id), other.deleteNode(n.id)]);
  t.is(results.filter((r) => r.status === 'fulfilled').length, 1);
  t.regex(String((results.find((r) => r.status === 'rejected') as PromiseRejectedResult).reason.message), /no machine with id/);
  await new Promise((r) => setTimeout(r, 200));
  t.is(events.filter((e) => e.includes('node.delete')).length, 1, 'announced once');
  t.is(await store.getNodeByMachineKey(n.machineKey), null);
  t.is(await store.redis.hget('hse:idx:ipv4', n.ipv4), null);
});

test('address candidates stay inside 100.64.0.0/10 and skip reserved ranges', (t) => {
  fc.assert(
    fc.property(fc.integer({ min: 1, max: 2 ** 31 }), (c) => {
      const v4 = candidateV4(c);
      if (v4 === null) return true;
      const [a, b, , d] = v4.split('.').map(Number);
      return a === 100 && b >= 64 && b <= 127 && d !== 0 && d !== 255 && !v4.startsWith('100.100.100.') && v6For(v4).startsWith('fd7a:115c:a1e0:');
    }),
  );
  t.is(candidateV4(1), '100.64.0.1');
  t.is(v6For('100.64.0.1'), 'fd7a:115c:a1e0::1');
});

test('MagicDNS labels are DNS-safe and their alternatives stay within 63 characters', (t) => {
  fc.assert(
    fc.property(fc.string({ maxLength: 200 }), fc.nat(10_000), (s, n) => {
      const l = labelCandidate(sanitiseLabel(s), n);
      return /^[a-z0-9]([a-z0-9-]*[a-z0-9])?$/.test(l) && l.length <= 63;
    }),
  );
  t.is(sanitiseLabel("Bob's MacBook Pro"), 'bob-s-macbook-pro');
  t.is(sanitiseLabel('---'), 'node');
});
