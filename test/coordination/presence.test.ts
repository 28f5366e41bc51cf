// Who is online across instances (state/presence.ts), against a real redis-server: a node is held per instance, the
// last holder to let go makes it offline, a holder that stops renewing runs out, an entry renewed meanwhile is not
// cleared by the sweep, and an entry written before several instances ("<instance>:<until>") still reads.
import test from 'ava';
import { K } from '../../shared/redis-keys.ts';
import { holdersOf, Presence } from '../../services/coordination/src/state/presence.ts';
import { startRedis, type TestRedis } from '../harness/redis.ts';

let redis: TestRedis;
test.before(async () => {
  redis = await startRedis();
});
test.after.always(async () => {
  await redis?.stop();
});

test.serial('a node held by two instances stays online until the last one lets go', async (t) => {
  const p = new Presence(redis.client());
  await p.touch([1], 'aaaa', 60_000);
  await p.touch([1], 'bbbb', 60_000);
  t.true((await p.onlineIds()).has(1));
  t.is(await p.release(1, 'aaaa'), 1, 'one other holder left');
  t.true((await p.onlineIds()).has(1), 'still online');
  t.is(await p.release(1, 'bbbb'), 0, 'no holder left');
  t.false((await p.onlineIds()).has(1));
  t.is(await redis.client().hget(K.presence, '1'), null, 'the entry is gone');
});

test.serial('a holder that stopped renewing runs out; the sweep clears only what nobody renewed meanwhile', async (t) => {
  const p = new Presence(redis.client());
  const now = Date.now();
  await p.touch([2, 3], 'dead', 1_000, now - 5_000);
  await p.touch([3], 'live', 60_000, now);
  const expired = await p.expired(now);
  t.deepEqual(
    expired.map((e) => e.nodeId),
    [2],
    'node 3 is still held by a live instance',
  );
  t.deepEqual(expired[0].holders, ['dead']);
  // Renewed between the sweep's read and its clearing: kept.
  await p.touch([2], 'back', 60_000);
  t.false(await p.clearIf(2, expired[0].entry));
  t.true((await p.onlineIds()).has(2));
  // A live holder's touch drops the expired ones from the entry.
  t.deepEqual([...holdersOf((await redis.client().hget(K.presence, '3'))!).keys()], ['live']);
});

test.serial('an entry written before several instances ("<instance>:<until>") reads as one holder', async (t) => {
  const p = new Presence(redis.client());
  await redis.client().hset(K.presence, '4', `c0ffee00:${Date.now() + 60_000}`);
  t.true((await p.onlineIds()).has(4));
  t.deepEqual([...holdersOf(`c0ffee00:${123}`)], [['c0ffee00', 123]]);
  t.is(await p.release(4, 'c0ffee00'), 0);
  await redis.client().hset(K.presence, '5', 'c0ffee00:1000');
  t.deepEqual(
    (await p.expired()).map((e) => e.nodeId),
    [5],
  );
});
