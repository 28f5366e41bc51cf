// Floods and abuse against the running image, small enough for every test run (the large runs with their figures:
// `node test/reliability/run-faults.ts floods`). For each: the attacked process stays up, its memory stays bounded,
// a well-behaved client keeps being served during the attack, and the defence does what it says — slow and silent
// connections are closed at their deadlines, oversized heads refused, a slow relay reader loses its oldest packets
// instead of growing a queue, and the sign-in rate limiter keeps one expiring key per address.
import path from 'node:path';
import test from 'ava';
import type { Redis } from 'ioredis';
import { AdminClient } from '../../shared/admin-client.ts';
import { DerpClient } from '../../services/relay/src/derp-client.ts';
import { Client } from '../harness/console-client.ts';
import { serverKey } from '../harness/control-client.ts';
import { CAP_VERSION } from '../harness/noise-client.ts';
import { startImage, type Image } from '../harness/image.ts';
import {
  derpBlast,
  derpPing,
  liteMapUpdate,
  measure,
  oversizedHeads,
  signInSpray,
  silentHandshakes,
  slowHeads,
  sprayAddresses,
  stunFlood,
  stunOnce,
  type FloodFigure,
} from './lib/floods.ts';
import { SimNode } from './lib/sim-node.ts';
import { CONSOLE_PASSWORD } from './lib/supervised-image.ts';

const who = { actor: 'reliability-test', ip: '' };
let image: Image;
let redis: Redis;
let serverPublic: Buffer;
const nodes: SimNode[] = [];

test.before(async () => {
  image = await startImage({
    env: { HSE_HEADER_TIMEOUT: '2', HSE_TRUSTED_PROXIES: '127.0.0.1', HSE_CONSOLE_PASSWORD: CONSOLE_PASSWORD, HSE_STUN_LISTEN: '127.0.0.1' },
  });
  redis = image.redis!.client();
  const admin = new AdminClient(path.join(image.runDir, 'coordination-admin.sock'));
  await admin.createUser(who, 'flood');
  const key = (await admin.createPreAuthKey(who, { user: 'flood', reusable: true, expiresInSeconds: 3600 })).key;
  serverPublic = await serverKey(image.url);
  for (let i = 0; i < 4; i++) {
    const n = new SimNode({ port: image.port, serverPublic, hostname: `flood-${i}` });
    await n.register(key);
    nodes.push(n);
  }
});

test.after.always(async () => {
  for (const n of nodes) await n.stop();
  await image?.stop();
});

const pid = (name: 'router' | 'coordination' | 'console' | 'relay') => image.procs[name]!.proc.pid!;
const getKey = async () => {
  const r = await fetch(`${image.url}/key?v=${CAP_VERSION}`);
  if (r.status !== 200) throw new Error(`/key answered ${r.status}`);
  await r.arrayBuffer();
};

function bounded(
  t: { true: (v: boolean, m?: string) => void; is: (a: unknown, b: unknown, m?: string) => void; log: (...v: unknown[]) => void },
  f: FloodFigure,
  maxGrowthMiB: number,
): void {
  t.log(JSON.stringify(f));
  t.true(f.stayedUp, `${f.target} stayed up`);
  t.true(f.peak.rssMiB - f.before.rssMiB < maxGrowthMiB, `${f.target} grew ${f.peak.rssMiB - f.before.rssMiB} MiB (bound ${maxGrowthMiB})`);
  t.is(f.legit.failed, 0, 'legitimate requests failed during the attack');
  t.true(f.legit.ok > 0, 'legitimate requests were served during the attack');
}

test.serial('slow and silent request heads: the router closes every one at the header timeout', async (t) => {
  const f = await measure('300 connections with unfinished heads', 'router', pid('router'), getKey, () => slowHeads(image.port, 300, 15_000));
  bounded(t, f, 64);
  t.is(f.detail.closedByRouter, f.detail.connections);
});

test.serial('oversized heads are refused with 431', async (t) => {
  const f = await measure('100 requests with 40 KiB heads', 'router', pid('router'), getKey, () => oversizedHeads(image.port, 100));
  bounded(t, f, 64);
  t.is(f.detail['status 431'], 100);
});

test.serial('/ts2021 upgrades that never finish the handshake are closed at the 30 s deadline', async (t) => {
  const [n] = nodes;
  const lite = liteMapUpdate(n);
  const f = await measure('100 silent Noise handshakes', 'coordination', pid('coordination'), lite, () =>
    silentHandshakes(image.port, serverPublic, 100, 45_000),
  );
  bounded(t, f, 64);
  t.is(f.detail.answered101, 100);
  t.is(f.detail.closedByServer, 100);
});

test.serial('a DERP client sending at full speed to a slow reader: the relay drops the oldest packets, memory stays flat', async (t) => {
  const [, a, b, c] = nodes;
  const x = await DerpClient.connect({ host: '127.0.0.1', port: image.port, privateKey: c.nodePrivate });
  await x.waitFor('serverInfo');
  // The legitimate traffic: a client pinging the relay and being answered.
  const ping = derpPing(x);
  try {
    const f = await measure('full-speed sender to a slow reader, 5 s', 'relay', pid('relay'), ping, () => derpBlast(image.port, a, b, 5_000, 200));
    // The heap grows while millions of packets pass before the collector settles (run-faults.ts floods shows it
    // levelling off, and staying under a 64 MiB heap cap); the bound here only catches a runaway queue.
    bounded(t, f, 128);
    // What the relay logged for the receiver when its connection closed: packets dropped from its queue.
    await new Promise((r) => setTimeout(r, 300));
    const dropped = [...image.procs.relay!.output().matchAll(/relay client disconnected[^\n]*dropped=(\d+)/g)].map((m) => Number(m[1]));
    t.log(`relay dropped ${dropped.join(', ')} packets for slow readers`);
    t.true(
      dropped.some((d) => d > 0),
      'the slow reader lost packets rather than the relay growing a queue',
    );
  } finally {
    x.close();
  }
});

test.serial('a STUN flood: the relay keeps answering legitimate binding requests', async (t) => {
  // A legitimate client retries STUN (Tailscale does): a request lost in the flooded UDP queues is asked again.
  const legit = async () => {
    for (let i = 0; ; i++) {
      try {
        return await stunOnce(image.stunPort, 700);
      } catch (e) {
        if (i === 2) throw e;
      }
    }
  };
  const f = await measure('20,000 STUN datagrams', 'relay', pid('relay'), legit, () => stunFlood(image.stunPort, 20_000));
  bounded(t, f, 64);
  t.true(Number(f.detail.answersReceived) > 0);
});

test.serial('sign-in attempts from many addresses: one rate-limit key per address (per /64), each expiring; a /64 shares one budget', async (t) => {
  const page = async () => {
    const r = await new Client(image.url).request('/console/login');
    if (r.status !== 200) throw new Error(`sign-in page answered ${r.status}`);
  };
  const f = await measure('failed sign-ins from 60 IPv4 addresses and 20 in one IPv6 /64', 'console', pid('console'), page, () =>
    signInSpray(image.url, redis, sprayAddresses(60, 20)),
  );
  // argon2id takes 19 MiB per check and libuv runs four at once: that, not the number of attempts, bounds memory.
  bounded(t, f, 200);
  // The /64 shares one budget: its first 10 attempts are checked, the other 10 refused (429) without a check.
  t.is(f.detail['status 401'], 70);
  t.is(f.detail['status 429'], 10);
  // 60 IPv4 addresses + one /64, plus the /64's "already noted as limited" marker.
  t.is(f.detail.rateLimitKeys, 62);
  t.is(f.detail.keysWithoutExpiry, 0);
  t.true(Number(f.detail.longestExpiryS) <= 600);
});
