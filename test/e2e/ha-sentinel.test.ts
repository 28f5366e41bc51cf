// Redis failover under Sentinel (advanced/ha.md): two whole images on a Redis primary with one replica and three
// sentinels (Debian's redis-server and redis-sentinel, HSE_REDIS_SENTINELS). While official clients and simulated
// nodes hold map streams on both instances and new devices keep trying to register:
//   - the primary is killed with -9: the sentinels promote the replica; the open streams stay up (not one simulated
//     node reconnects); a registration during the switch is answered "retry" (503) and never anything else; one
//     succeeds again soon after; every process of both instances is connected to the new primary; a device that
//     registered after the switch reaches the streams of both instances (each resubscribed and resynchronised);
//   - the new primary is demoted by an operator (SENTINEL FAILOVER) without dying: nothing closes its connections, and
//     yet every process moves to the new primary (ioredis's failover detector) and none stays on the old one.
import { setTimeout as sleep } from 'node:timers/promises';
import test from 'ava';
import type { Redis } from 'ioredis';
import { connectionNameOf } from '../../shared/redis.ts';
import { AdminClient } from '../../shared/admin-client.ts';
import { parseConfig } from '../../shared/config.ts';
import { adminSocket } from '../../shared/paths.ts';
import { ControlClient, serverKey } from '../harness/control-client.ts';
import type { Image } from '../harness/image.ts';
import { startInstances } from '../harness/instances.ts';
import { missingSentinel, type SentinelSet, startSentinelSet } from '../harness/sentinel.ts';
import { haveTailscale, TsNode, type TsStatus } from '../harness/tailscale.ts';
import { SimNode } from '../reliability/lib/sim-node.ts';
import { CAP_VERSION } from '../harness/noise-client.ts';

const missing = !haveTailscale() ? 'tailscaled/tailscale not found; run .ci/run' : missingSentinel();
const cli = { actor: 'cli', ip: '' };

if (missing) {
  test('official Tailscale client, redis-server and redis-sentinel are installed', (t) => t.fail(missing));
} else {
  let rs: SentinelSet;
  let A: Image;
  let B: Image;
  let key = '';
  const sims: SimNode[] = [];
  const nodes: TsNode[] = [];
  const clients: Redis[] = [];

  const running = (s: TsStatus) => s.BackendState === 'Running';

  /** One registration attempt of a new device through `img`: the status and answer it gets. */
  async function tryRegister(img: Image, hostname: string): Promise<{ status: number; body: string }> {
    let c: ControlClient | null = null;
    try {
      c = await ControlClient.connect(img.port, await serverKey(img.url));
      const r = await c.post('/machine/register', {
        Version: CAP_VERSION,
        NodeKey: c.nodeKey,
        Hostinfo: { Hostname: hostname, OS: 'linux' },
        Auth: { AuthKey: key },
      });
      return { status: r.status, body: r.body.toString() };
    } catch (e) {
      return { status: 0, body: (e as Error).message };
    } finally {
      c?.close();
    }
  }

  /** Keeps new devices trying to register through both instances until stopped; records every answer. */
  function registrations(): { answers: { at: number; status: number; body: string }[]; stop: () => Promise<void> } {
    const answers: { at: number; status: number; body: string }[] = [];
    let on = true;
    let n = 0;
    const loop = (async () => {
      while (on) {
        const img = n % 2 === 0 ? A : B;
        const r = await tryRegister(img, `reg-${n++}`);
        answers.push({ at: Date.now(), ...r });
        await sleep(200);
      }
    })();
    return {
      answers,
      stop: async () => {
        on = false;
        await loop;
      },
    };
  }

  /** The names of the connections every process of `img` holds (shared/redis.ts connectionNameOf). */
  function namesOf(img: Image): string[] {
    const pid = (p: keyof Image['procs']) => img.procs[p]!.pid;
    return [
      connectionNameOf('coordination', undefined, pid('coordination')),
      connectionNameOf('coordination-sub', undefined, pid('coordination')),
      connectionNameOf('relay', undefined, pid('relay')),
      connectionNameOf('relay-sub', undefined, pid('relay')),
      connectionNameOf('console', undefined, pid('console')),
    ];
  }

  async function clientNames(port: number): Promise<string[]> {
    const c = rs.client(port);
    clients.push(c);
    const list = (await c.client('LIST')) as string;
    return [...list.matchAll(/ name=(\S*)/g)].map((m) => m[1]);
  }

  /** Waits until every process of both images is connected to `port`; returns how long that took. */
  async function allOn(port: number, ms = 30_000): Promise<string[]> {
    const want = [...namesOf(A), ...namesOf(B)];
    const deadline = Date.now() + ms;
    let missingNow = want;
    while (Date.now() < deadline) {
      const have = new Set(await clientNames(port));
      missingNow = want.filter((n) => !have.has(n));
      if (missingNow.length === 0) return [];
      await sleep(250);
    }
    return missingNow;
  }

  test.before(async () => {
    rs = await startSentinelSet();
    await rs.waitForReplicas();
    [A, B] = await startInstances(2, {
      store: { HSE_REDIS_SENTINELS: rs.sentinelsEnv, HSE_REDIS_SENTINEL_NAME: rs.name },
      env: { HSE_LOG_LEVEL: 'debug' },
    });
    const api = new AdminClient(adminSocket(parseConfig(A.env)));
    const u = await api.createUser(cli, 'sentinel');
    key = (await api.createPreAuthKey(cli, { user: u.id, reusable: true })).key;
    for (const img of [A, B]) {
      const pub = await serverKey(img.url);
      for (let i = 0; i < 8; i++) {
        const s = new SimNode({ port: img.port, serverPublic: pub, hostname: `sim-${img.port}-${i}` });
        await s.register(key);
        s.start();
        sims.push(s);
      }
    }
    for (const [name, img] of [
      ['ts-a', A],
      ['ts-b', B],
    ] as const) {
      const n = new TsNode({ name, env: { TS_DEBUG_USE_DERP_HTTP: '1' } });
      nodes.push(n);
      await n.start();
      await n.up(img.url, [`--auth-key=${key}`]);
    }
    await nodes[0].waitFor((s) => running(s) && nodes[0].peers(s).some((p) => p.HostName === 'ts-b' && p.Online), 'ts-a to see ts-b online');
    const deadline = Date.now() + 60_000;
    while (sims.some((s) => !s.streaming) && Date.now() < deadline) await sleep(100);
  });

  test.after.always(async () => {
    for (const c of clients) c.disconnect();
    for (const s of sims) await s.stop();
    for (const n of nodes) await n.destroy();
    await B?.stop();
    await A?.stop();
    await rs?.stop();
  });

  test.serial('the Redis primary is killed: the replica takes over, streams stay up, registrations succeed again, every process follows', async (t) => {
    t.true(
      sims.every((s) => s.streaming),
      'every simulated node has its stream',
    );
    const opened = sims.map((s) => s.streamsOpened);
    const reg = registrations();
    await sleep(1500);
    const t0 = Date.now();
    const killed = await rs.killPrimary();
    const now = await rs.waitForFailover(killed);
    const failover = Date.now() - t0;
    // Registrations go on until one made after the switch succeeded.
    const deadline = Date.now() + 60_000;
    while (!reg.answers.some((a) => a.at > t0 + failover && a.status === 200) && Date.now() < deadline) await sleep(100);
    await reg.stop();
    const during = reg.answers.filter((a) => a.at > t0);
    const firstOk = during.find((a) => a.status === 200);
    t.truthy(firstOk, `a registration succeeded after the failover; answers: ${JSON.stringify(during.map((a) => [a.at - t0, a.status]))}`);
    const others = during.filter((a) => a.status !== 200 && !(a.status === 503 && /retrying shortly is safe/.test(a.body)));
    t.deepEqual(others, [], 'during the switch, a registration is answered 200 or 503 "retry", nothing else');

    const left = await allOn(now);
    t.deepEqual(left, [], `every process of both instances is connected to the new primary (missing: ${left.join(', ')})`);
    t.deepEqual(
      sims.map((s) => s.streamsOpened),
      opened,
      'no simulated node had to reopen its stream',
    );
    t.true(
      sims.every((s) => s.streaming),
      'every stream is still open',
    );

    // A device that registers after the switch reaches the streams on both instances (each resubscribed).
    const newcomer = new SimNode({ port: B.port, serverPublic: await serverKey(B.url), hostname: 'after-failover' });
    sims.push(newcomer);
    const r = await newcomer.register(key);
    t.true(r.MachineAuthorized);
    newcomer.start();
    for (const n of nodes) await n.waitFor((s) => n.peers(s).some((p) => p.HostName === 'after-failover' && p.Online), `${n.name} to see the new device`);
    t.true(
      nodes.every(() => true),
      'both official clients see it',
    );
    const st = await nodes[0].status();
    t.true(
      nodes[0].peers(st).some((p) => p.HostName === 'ts-b' && p.Online),
      'the official clients still see each other online',
    );
    const codes = during.map((a) => a.status);
    t.log(
      `primary killed: sentinels switched in ${failover} ms; first registration answered 200 after ${firstOk!.at - t0} ms; answers during the switch: ${codes.filter((c) => c === 503).length}× 503, ${codes.filter((c) => c === 200).length}× 200`,
    );
    await rs.restart(killed);
    await rs.waitForReplicas(1, 60_000, { linkUp: true });
  });

  test.serial('a primary demoted without dying (SENTINEL FAILOVER): every process moves to the new primary, none stays behind', async (t) => {
    const old = await rs.primaryPort();
    const opened = sims.map((s) => s.streamsOpened);
    const admin = rs.client(rs.sentinelPorts[0]);
    clients.push(admin);
    const t0 = Date.now();
    await admin.call('SENTINEL', 'FAILOVER', rs.name);
    const now = await rs.waitForFailover(old);
    const left = await allOn(now);
    t.deepEqual(left, [], `every process is on the new primary (missing: ${left.join(', ')})`);
    const moved = Date.now() - t0;
    const ours = new Set([...namesOf(A), ...namesOf(B)]);
    let stale: string[] = [];
    for (let i = 0; i < 40; i++) {
      stale = (await clientNames(old)).filter((n) => ours.has(n));
      if (stale.length === 0) break;
      await sleep(250);
    }
    t.deepEqual(stale, [], 'no process is left on the demoted primary');
    t.deepEqual(
      sims.map((s) => s.streamsOpened),
      opened,
      'no simulated node had to reopen its stream',
    );
    const r = await tryRegister(A, 'after-demotion');
    t.is(r.status, 200, r.body);
    t.log(`operator failover: every process on the new primary ${moved} ms after SENTINEL FAILOVER`);
  });
}
