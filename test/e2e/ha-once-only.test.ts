// Work that must happen once across all instances (state/housekeeping.ts under the lease of shared/lease.ts): the
// presence sweep, the clean-up of ephemeral nodes whose instance is gone, the activity-log pruning. Three coordination
// instances on one Redis: exactly one holds the lease and prunes; the holder is killed with -9 while an ephemeral node
// has its stream there; exactly one of the two others takes the lease over, prunes, marks the orphaned node offline
// and removes it — announced once, logged once — and a node watching from a surviving instance sees it go.
import { setTimeout as sleep } from 'node:timers/promises';
import test from 'ava';
import { AdminClient } from '../../shared/admin-client.ts';
import { parseConfig } from '../../shared/config.ts';
import { adminSocket } from '../../shared/paths.ts';
import { K } from '../../shared/redis-keys.ts';
import { serverKey } from '../harness/control-client.ts';
import type { Image } from '../harness/image.ts';
import { killImage, startInstances } from '../harness/instances.ts';
import { startRedis, type TestRedis } from '../harness/redis.ts';
import { SimNode } from '../reliability/lib/sim-node.ts';

const cli = { actor: 'cli', ip: '' };
let redis: TestRedis;
let all: Image[] = [];
const sims: SimNode[] = [];

const count = (img: Image, re: RegExp) => (img.procs.coordination?.output().match(new RegExp(re.source, 'g')) ?? []).length;
const holderOf = (imgs: Image[]) => imgs.filter((i) => count(i, /took the lease/) > 0);

test.before(async () => {
  redis = await startRedis();
  all = await startInstances(3, {
    services: ['coordination'],
    store: { HSE_REDIS_URL: redis.url },
    env: { HSE_LOG_LEVEL: 'debug', HSE_EPHEMERAL_TIMEOUT: '3' },
  });
});

test.after.always(async () => {
  for (const s of sims) await s.stop();
  for (const i of all) await i.stop();
  await redis?.stop();
});

test.serial(
  'one instance of three runs the once-only work; when it dies, exactly one other takes it over and removes the ephemeral node it left behind',
  async (t) => {
    // Each attempts the lease at start and every 10 s; the work runs every 10 s on the holder.
    const deadline = Date.now() + 30_000;
    while (Date.now() < deadline && all.reduce((n, i) => n + count(i, /activity log pruned/), 0) === 0) await sleep(250);
    await sleep(3000);
    const holders = holderOf(all);
    t.is(holders.length, 1, 'one instance took the lease');
    t.is(
      all.reduce((n, i) => n + count(i, /activity log pruned/), 0),
      1,
      'the activity log was pruned once',
    );
    const [holder] = holders;
    const others = all.filter((i) => i !== holder);
    t.regex((await redis.client().get(K.leaseHousekeeping)) ?? '', /:coordination:\d+$/, 'the lease names its holder');

    // An ephemeral node on the holder; a node watching from another instance.
    const api = new AdminClient(adminSocket(parseConfig(holder.env)));
    const u = await api.createUser(cli, 'once');
    const eph = (await api.createPreAuthKey(cli, { user: u.id, reusable: true, ephemeral: true })).key;
    const plain = (await api.createPreAuthKey(cli, { user: u.id, reusable: true })).key;
    const node = new SimNode({ port: holder.port, serverPublic: await serverKey(holder.url), hostname: 'orphan' });
    const watcher = new SimNode({ port: others[0].port, serverPublic: await serverKey(others[0].url), hostname: 'watcher' });
    sims.push(node, watcher);
    await node.register(eph);
    await watcher.register(plain);
    node.start();
    watcher.start();
    while (!(node.self && watcher.peers.get(node.self.id) === true)) await sleep(100);
    const id = node.self!.id;

    const deletes: string[] = [];
    const sub = redis.client();
    sub.on('message', (_c: string, m: string) => {
      if (m.includes('"node.delete"') && m.includes(`"nodeId":${id}`)) deletes.push(m);
    });
    await sub.subscribe(K.changes);

    // The holder dies with the node's stream; the node does not come back (it stops trying).
    const t0 = Date.now();
    await killImage(holder);
    await node.stop();

    while (Date.now() - t0 < 150_000 && watcher.peers.has(id)) await sleep(250);
    t.false(watcher.peers.has(id), 'the watcher on another instance sees the orphaned ephemeral node removed');
    const gone = Date.now() - t0;
    await sleep(12_000); // another round of the work on both survivors
    t.is(holderOf(others).length, 1, 'exactly one survivor took the lease over');
    t.is(deletes.length, 1, 'the removal was announced once');
    t.is(
      others.reduce((n, i) => n + count(i, /ephemeral node removed/), 0),
      1,
      'and logged once',
    );
    t.is(
      others.reduce((n, i) => n + count(i, /node offline: its instance stopped renewing/), 0),
      1,
      'one survivor marked it offline',
    );
    t.is(
      others.reduce((n, i) => n + count(i, /activity log pruned/), 0),
      1,
      'the new holder pruned the activity log, once',
    );
    t.log(`orphaned ephemeral node removed ${gone} ms after its instance was killed (lease 30 s, presence 60 s, ephemeral timeout 3 s)`);
  },
);
