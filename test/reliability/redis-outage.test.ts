// Redis going away under a running image (router, coordination, console, relay as real processes) and coming back:
// open map streams and relay connections stay up; a new registration gets a 503 that says to retry, the console a
// "store unavailable" page, the relay refuses new clients (fail closed); when Redis returns everything works again
// without a restart — the retried registration succeeds and reaches the nodes whose streams never closed. And a
// registration acknowledged to a client survives kill -9 of Redis right after the acknowledgement, with the image's
// own Redis configuration (AOF, appendfsync always).
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import test from 'ava';
import { AdminClient } from '../../shared/admin-client.ts';
import { Client } from '../harness/console-client.ts';
import { serverKey } from '../harness/control-client.ts';
import { CAP_VERSION } from '../harness/noise-client.ts';
import { startImage, type Image } from '../harness/image.ts';
import { DerpClient } from '../../services/relay/src/derp-client.ts';
import { Fleet, waitUntil } from './lib/fleet.ts';
import { ControlledRedis } from './lib/redis-ctl.ts';
import { SimDerp } from './lib/sim-derp.ts';
import { SimNode } from './lib/sim-node.ts';
import { CONSOLE_PASSWORD } from './lib/supervised-image.ts';

const who = { actor: 'reliability-test', ip: '' };

interface Setup {
  image: Image;
  redis: ControlledRedis;
  admin: AdminClient;
  serverPublic: Buffer;
  authKey: string;
}

async function setup(): Promise<Setup> {
  const redis = new ControlledRedis('image');
  await redis.start();
  const image = await startImage({ redis: false, env: { HSE_REDIS_URL: redis.url, HSE_CONSOLE_PASSWORD: CONSOLE_PASSWORD } });
  const admin = new AdminClient(path.join(image.runDir, 'coordination-admin.sock'));
  await admin.createUser(who, 'fleet');
  const authKey = (await admin.createPreAuthKey(who, { user: 'fleet', reusable: true, expiresInSeconds: 3600 })).key;
  return { image, redis, admin, serverPublic: await serverKey(image.url), authKey };
}

async function teardown(s: Setup | undefined): Promise<void> {
  await s?.image.stop();
  await s?.redis.destroy();
}

test.serial('Redis down: streams and relay connections stay up, clear retryable errors; Redis back: everything recovers by itself', async (t) => {
  const s = await setup();
  const fleet = new Fleet({ port: s.image.port, serverPublic: s.serverPublic, count: 6 });
  const relayUser = new SimDerp(s.image.port, fleet.nodes[0].nodePrivate);
  const browser = new Client(s.image.url);
  try {
    await fleet.join(s.authKey, 6);
    relayUser.start();
    await waitUntil(
      () => relayUser.ready,
      () => 'relay user admitted',
      20_000,
    );
    t.is((await browser.signIn('admin', CONSOLE_PASSWORD)).status, 303);
    const opened = fleet.nodes.map((n) => n.streamsOpened);

    await s.redis.kill9();

    // A new device registering now is told the store is down and that retrying is safe — not a 500.
    const late = new SimNode({ port: s.image.port, serverPublic: s.serverPublic, hostname: 'late' });
    const body = { Version: CAP_VERSION, NodeKey: late.nodeKey, Hostinfo: { Hostname: 'late', OS: 'linux' }, Auth: { AuthKey: s.authKey } };
    const refused = await late.post('/machine/register', body);
    t.is(refused.status, 503, refused.body);
    t.regex(refused.body, /store is temporarily unavailable; retrying shortly is safe/);

    // The console says what is wrong, as a page (no stack trace), and the health check fails.
    const page = await browser.request('/console/logs');
    t.is(page.status, 503);
    t.regex(page.body, /Store unavailable/);
    t.notRegex(page.body, /\bat [^\n]*\.(ts|js):\d+/, 'no stack trace');
    t.regex(String(page.headers['retry-after']), /^\d+$/);
    const health = await fetch(`${s.image.url}/health`);
    t.is(health.status, 503);
    t.deepEqual(await health.json(), { ok: false, error: 'store unavailable' });

    // The relay cannot check keys, so it admits nobody new (fail closed) but keeps who it has.
    const stranger = await DerpClient.connect({ host: '127.0.0.1', port: s.image.port, privateKey: fleet.nodes[1].nodePrivate });
    await t.throwsAsync(stranger.waitFor('serverInfo', () => true, 15_000));
    stranger.close();

    // Open map streams and the admitted relay connection were never cut.
    await sleep(1_000);
    t.true(
      fleet.nodes.every((n) => n.streaming),
      'every map stream still open',
    );
    t.deepEqual(
      fleet.nodes.map((n) => n.streamsOpened),
      opened,
      'no stream was reopened',
    );
    t.true(relayUser.ready && relayUser.connections === 1, 'relay connection kept');

    await s.redis.start();

    // The device's retry now succeeds, and the nodes whose streams stayed open hear about it (pub/sub came back).
    let registered = false;
    for (let i = 0; i < 100 && !registered; i++) {
      const r = await late.post('/machine/register', body);
      if (r.status === 200) registered = true;
      else await sleep(200);
    }
    t.true(registered, 'registration retried after Redis returned succeeds');
    late.start();
    await waitUntil(
      () => late.streaming,
      () => `late node streaming (${late.lastError})`,
      20_000,
    );
    await fleet.waitSeePeer(late.self!.id, true, 20_000);
    t.deepEqual(
      fleet.nodes.map((n) => n.streamsOpened),
      opened,
      'still the same streams',
    );
    t.is((await browser.request('/console/logs')).status, 200, 'the same console session works again');
    t.is((await fetch(`${s.image.url}/health`)).status, 200);
    const again = await DerpClient.connect({ host: '127.0.0.1', port: s.image.port, privateKey: fleet.nodes[1].nodePrivate });
    await again.waitFor('serverInfo', () => true, 10_000);
    again.close();
    await late.stop();
  } finally {
    await fleet.stop();
    await relayUser.stop();
    await teardown(s);
  }
});

test.serial('an acknowledged registration survives kill -9 of Redis the moment the client has its answer', async (t) => {
  const s = await setup();
  try {
    t.is(await s.redis.config('appendonly'), 'yes');
    t.is(await s.redis.config('appendfsync'), 'always');
    for (let i = 0; i < 3; i++) {
      const n = new SimNode({ port: s.image.port, serverPublic: s.serverPublic, hostname: `durable-${i}` });
      // Single-use key: its consumption must survive as well, or the key could be used twice.
      const once = (await s.admin.createPreAuthKey(who, { user: 'fleet', expiresInSeconds: 3600 })).key;
      await n.register(once);
      await s.redis.kill9();
      await s.redis.start();
      const nodes = await waitForAdmin(() => s.admin.listNodes(who));
      t.true(
        nodes.some((x) => x.nodeKey === n.nodeKey && x.hostname === `durable-${i}`),
        `node durable-${i} acknowledged before the kill is still registered`,
      );
      const reuse = new SimNode({ port: s.image.port, serverPublic: s.serverPublic, hostname: `reuse-${i}` });
      const r = await retry503(() => reuse.post('/machine/register', { Version: CAP_VERSION, NodeKey: reuse.nodeKey, Auth: { AuthKey: once } }));
      t.regex(r.body, /already used/, 'the single-use key stays used');
      n.breakConnection();
      reuse.breakConnection();
    }
  } finally {
    await teardown(s);
  }
});

/** Admin calls right after Redis restarts may meet the reconnect; retry briefly. */
async function waitForAdmin<T>(f: () => Promise<T>): Promise<T> {
  for (let i = 0; ; i++) {
    try {
      return await f();
    } catch (e) {
      if (i > 50) throw e;
      await sleep(100);
    }
  }
}

async function retry503(f: () => Promise<{ status: number; body: string }>): Promise<{ status: number; body: string }> {
  for (let i = 0; ; i++) {
    const r = await f();
    if (r.status !== 503 || i > 50) return r;
    await sleep(100);
  }
}
