// The activity log stays bounded: ActivityLog.record() trims to HSE_ACTIVITY_MAX_ENTRIES on every write (keeping the newest), and
// ActivityLog.prune() drops entries older than HSE_ACTIVITY_RETENTION_DAYS while keeping recent ones. Against a real redis-server.
// Redis trims streams by whole internal nodes ("~"), so the test makes a node 10 entries and allows one node of slack.
import test from 'ava';
import { ActivityLog, listRecent } from '../../shared/activity.ts';
import { K } from '../../shared/redis-keys.ts';
import { startRedis, type TestRedis } from '../harness/redis.ts';

const NODE = 10;
let redis: TestRedis;

test.before(async () => {
  redis = await startRedis();
  await redis.client().config('SET', 'stream-node-max-entries', String(NODE));
});
test.after.always(async () => {
  await redis?.stop();
});
test.beforeEach(async () => {
  await redis.client().del(K.activity);
});

test.serial('the size cap keeps the log near HSE_ACTIVITY_MAX_ENTRIES and keeps the newest entries', async (t) => {
  const c = redis.client();
  const limits = { maxEntries: 50, retentionDays: 90 };
  for (let i = 0; i < 500; i++) await new ActivityLog(c, limits).record({ action: 'test.cap', actor: 'cli', ip: '', target: `item-${i}` });
  const len = await c.xlen(K.activity);
  t.true(len >= 50 && len <= 50 + NODE, `stream length ${len}`);
  const newest = await listRecent(c, len);
  t.is(newest[0].target, 'item-499');
  t.true(
    newest.every((e) => Number(e.target.slice(5)) >= 500 - len),
    'only the newest entries are kept',
  );
});

test.serial('prune drops entries past the retention period and keeps recent ones', async (t) => {
  const c = redis.client();
  const limits = { maxEntries: 100_000, retentionDays: 90 };
  const old = Date.now() - 100 * 86_400_000;
  for (let i = 0; i < 3 * NODE; i++) {
    await c.xadd(K.activity, `${old + i}-0`, 'action', 'test.old', 'actor', 'cli', 'ip', '', 'target', `old-${i}`, 'details', '{}');
  }
  for (let i = 0; i < 5; i++) await new ActivityLog(c, limits).record({ action: 'test.new', actor: 'cli', ip: '', target: `new-${i}` });

  t.is(await new ActivityLog(c, limits).prune(), 3 * NODE, 'every entry older than 90 days is removed');
  const left = await listRecent(c, 100);
  t.deepEqual(
    left.map((e) => e.target),
    ['new-4', 'new-3', 'new-2', 'new-1', 'new-0'],
  );
  t.is(await new ActivityLog(c, limits).prune(), 0, 'a second prune finds nothing to drop');
});
