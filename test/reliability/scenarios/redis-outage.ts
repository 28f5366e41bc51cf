// A long Redis outage under the running image (longer than the 50 s map keep-alive and the 30 s presence refresh):
// what clients with open streams, new devices, console users and relay users see while it lasts, and how long each
// takes to work again once Redis is back.
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { AdminClient } from '../../../shared/admin-client.ts';
import { Client } from '../../harness/console-client.ts';
import { serverKey } from '../../harness/control-client.ts';
import { CAP_VERSION } from '../../harness/noise-client.ts';
import { startImage } from '../../harness/image.ts';
import { Fleet, waitUntil } from '../lib/fleet.ts';
import { startOfficial, type Official } from '../lib/official.ts';
import { ControlledRedis } from '../lib/redis-ctl.ts';
import { progress, save, secs, table } from '../lib/report.ts';
import { SimDerp } from '../lib/sim-derp.ts';
import { SimNode } from '../lib/sim-node.ts';
import { CONSOLE_PASSWORD } from '../lib/supervised-image.ts';

const who = { actor: 'reliability-run', ip: '' };

export async function runRedisOutage(opts: { nodes: number; outageSeconds: number }): Promise<string> {
  const redis = new ControlledRedis('image');
  await redis.start();
  const image = await startImage({ redis: false, env: { HSE_REDIS_URL: redis.url, HSE_CONSOLE_PASSWORD: CONSOLE_PASSWORD } });
  let fleet: Fleet | null = null;
  let relayUser: SimDerp | null = null;
  let official: Official | null = null;
  let lateNode: SimNode | null = null;
  try {
    const admin = new AdminClient(path.join(image.runDir, 'coordination-admin.sock'));
    await admin.createUser(who, 'fleet');
    const authKey = (await admin.createPreAuthKey(who, { user: 'fleet', reusable: true, expiresInSeconds: 86_400 })).key;
    const serverPublic = await serverKey(image.url);
    const late = new SimNode({ port: image.port, serverPublic, hostname: 'late' });
    lateNode = late;
    progress(`joining ${opts.nodes} simulated nodes`);
    fleet = new Fleet({ port: image.port, serverPublic, count: opts.nodes });
    await fleet.join(authKey, 16, 300_000);
    relayUser = new SimDerp(image.port, fleet.nodes[0].nodePrivate);
    relayUser.start();
    await waitUntil(
      () => relayUser!.ready,
      () => 'relay user',
      30_000,
    );
    official = await startOfficial(image.url, authKey, admin);
    const browser = new Client(image.url);
    await browser.signIn('admin', CONSOLE_PASSWORD);
    const opened = fleet.nodes.map((n) => n.streamsOpened);
    const keepAlives = fleet.nodes.reduce((a, n) => a + n.keepAlives, 0);

    progress(`kill -9 Redis for ${opts.outageSeconds} s`);
    const downAt = Date.now();
    await redis.kill9();
    const register = { Version: CAP_VERSION, NodeKey: late.nodeKey, Hostinfo: { Hostname: 'late', OS: 'linux' }, Auth: { AuthKey: authKey } };
    const seen = {
      register: {} as Record<string, number>,
      console: {} as Record<string, number>,
      health: {} as Record<string, number>,
      slowestRegisterMs: 0,
      slowestConsoleMs: 0,
    };
    const bump = (m: Record<string, number>, k: string | number) => (m[String(k)] = (m[String(k)] ?? 0) + 1);
    while (Date.now() - downAt < opts.outageSeconds * 1000) {
      const t0 = Date.now();
      const r = await late.post('/machine/register', register).catch((e: Error) => ({ status: 0, body: e.message }));
      seen.slowestRegisterMs = Math.max(seen.slowestRegisterMs, Date.now() - t0);
      bump(seen.register, r.status === 503 && /retrying shortly is safe/.test(r.body) ? '503 retry' : r.status);
      const t1 = Date.now();
      const page = await browser.request('/console/machines');
      seen.slowestConsoleMs = Math.max(seen.slowestConsoleMs, Date.now() - t1);
      bump(
        seen.console,
        page.status === 503 && /Store unavailable/.test(page.body) && !/\bat [^\n]*\.(ts|js):\d+/.test(page.body) ? '503 store unavailable' : page.status,
      );
      bump(seen.health, (await fetch(`${image.url}/health`)).status);
      await sleep(1_000);
    }
    const streamsKept = fleet.nodes.filter((n, i) => n.streaming && n.streamsOpened === opened[i]).length;
    const keepAlivesDuring = fleet.nodes.reduce((a, n) => a + n.keepAlives, 0) - keepAlives;
    const relayKept = relayUser.ready && relayUser.connections === 1;
    const coordLog = image.procs.coordination!.output();
    const officialDropped = official ? official.nodes.filter((o) => new RegExp(`node offline node=${o.name}\\b`).test(coordLog)).length : 0;

    progress('Redis back');
    await redis.start();
    const upAt = Date.now();
    let registeredMs = NaN;
    for (;;) {
      const r = await late.post('/machine/register', register).catch(() => ({ status: 0, body: '' }));
      if (r.status === 200) {
        registeredMs = Date.now() - upAt;
        break;
      }
      if (Date.now() - upAt > 120_000) throw new Error(`registration still failing 120 s after Redis returned: ${r.status} ${r.body}`);
      await sleep(200);
    }
    late.start();
    await waitUntil(
      () => late.streaming,
      () => `late node stream (${late.lastError})`,
      60_000,
    );
    await fleet.waitSeePeer(late.self!.id, true, 120_000);
    for (const o of official?.nodes ?? [])
      await o.waitFor((s) => o.peers(s).some((p) => p.HostName === 'late' && p.Online), `${o.name} to see the late node`, 120_000);
    const newNodeSeenMs = Date.now() - upAt;
    let consoleMs = NaN;
    for (const t0 = Date.now(); Date.now() - t0 < 60_000; await sleep(200)) {
      if ((await browser.request('/console/machines')).status === 200) {
        consoleMs = Date.now() - upAt;
        break;
      }
    }
    const result = {
      nodes: opts.nodes,
      outageSeconds: opts.outageSeconds,
      seen,
      streamsKept,
      keepAlivesDuring,
      relayKept,
      officialDropped,
      registeredMs,
      newNodeSeenMs,
      consoleMs,
    };
    const file = save('redis-outage', result);
    const fmt = (m: Record<string, number>) =>
      Object.entries(m)
        .map(([k, v]) => `${k}×${v}`)
        .join(', ');
    return [
      `Redis killed (-9) for ${opts.outageSeconds} s under the running image: ${opts.nodes} simulated nodes on map streams, 1 relay user${official ? ', 2 official clients' : ''}, a signed-in console user; a new device retrying registration every second. Raw: ${file}`,
      '',
      table(
        [
          'map streams kept through the outage',
          'keep-alives received meanwhile',
          'official clients cut',
          'relay connection kept',
          'new registration answered',
          'slowest answer',
          'console page',
          'slowest page',
          'health check',
          'registration works again',
          'new node seen by all',
          'console works again',
        ],
        [
          [
            `${streamsKept}/${opts.nodes}`,
            keepAlivesDuring,
            official ? `${officialDropped}/2` : '—',
            relayKept ? 'yes' : 'no',
            fmt(seen.register),
            `${secs(seen.slowestRegisterMs)} s`,
            fmt(seen.console),
            `${secs(seen.slowestConsoleMs)} s`,
            fmt(seen.health),
            `${secs(registeredMs)} s`,
            `${secs(newNodeSeenMs)} s`,
            `${secs(consoleMs)} s`,
          ],
        ],
      ),
    ].join('\n');
  } finally {
    await lateNode?.stop();
    await fleet?.stop();
    await relayUser?.stop();
    await official?.destroy();
    await image.stop();
    await redis.destroy();
  }
}
