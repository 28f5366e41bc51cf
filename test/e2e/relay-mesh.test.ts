// Two whole images on one Redis, their relays meshed (HSE_DERP_MESH_KEY, each HSE_DERP_MESH_WITH the other's router),
// and two official Tailscale clients (pinned, relay-only paths: TS_DEBUG_ALWAYS_USE_DERP=1) homed on different
// instances' relays: each logs in through its own instance, whose DERP map lists its own relay first in the one region
// (HSE_DERP_NODES), so the client's region-900 connection is to that relay. A ping between them can only go
// client → relay A → mesh → relay B → client. Then every process of instance B is killed: the mesh link notices, and
// B's client moves to the region's next node (A) and keeps reaching its peer. (Clients move to the next node only when
// the first cannot be reached at all: while B's router answers, a dead relay behind it is a refused upgrade, which the
// client retries on the same node until pm2 has restarted the relay.)
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import test from 'ava';
import { startImage, type Image } from '../harness/image.ts';
import { hseOut } from '../harness/hse-cli.ts';
import { freePort, freeUdpPort } from '../harness/process.ts';
import { startRedis, type TestRedis } from '../harness/redis.ts';
import { haveTailscale, TsNode, type TsStatus } from '../harness/tailscale.ts';

if (!haveTailscale()) {
  test('official Tailscale client is installed', (t) => t.fail('tailscaled/tailscale not found; run .ci/run or go install them (see README)'));
} else {
  let redis: TestRedis;
  let A: Image;
  let B: Image;
  const nodes: TsNode[] = [];

  const hse = (...args: string[]): Promise<string> => hseOut(A, args);

  const running = (s: TsStatus) => s.BackendState === 'Running';
  /** How the relay logs a node key: "nodekey:" and the first 12 hex digits. */
  const logKey = (s: TsStatus) => ((s.Self as unknown as { PublicKey: string }).PublicKey ?? '').slice(0, 20);

  /** `tailscale ping` output; relay-only clients end it with "direct connection not established" and status 1. */
  async function ping(n: TsNode, ip: string): Promise<string> {
    return n.cli(['ping', '--c=5', '--timeout=10s', ip], 60_000).then(
      (r) => r.stdout,
      (e: { stdout?: string }) => e.stdout ?? '',
    );
  }

  test.before(async () => {
    redis = await startRedis();
    const [portA, portB] = [await freePort(), await freePort()];
    const [stunA, stunB] = [await freeUdpPort(), await freeUdpPort()];
    const node = (port: number, stun: number) => `http://127.0.0.1:${port}?stun=${stun}`;
    const meshKey = crypto.randomBytes(32).toString('hex');
    const common = { HSE_REDIS_URL: redis.url, HSE_DERP_MESH_KEY: meshKey, HSE_LOG_LEVEL: 'debug' };
    A = await startImage({
      redis: false,
      port: portA,
      stunPort: stunA,
      env: { ...common, HSE_DERP_MESH_WITH: `http://127.0.0.1:${portB}`, HSE_DERP_NODES: `${node(portA, stunA)},${node(portB, stunB)}` },
    });
    // The second instance gets the first one's Noise key (one tailnet, one control key) but keeps its own relay key.
    B = await startImage({
      redis: false,
      port: portB,
      stunPort: stunB,
      dataFiles: { 'noise_private.key': fs.readFileSync(path.join(A.dataDir, 'noise_private.key')) },
      env: { ...common, HSE_DERP_MESH_WITH: `http://127.0.0.1:${portA}`, HSE_DERP_NODES: `${node(portB, stunB)},${node(portA, stunA)}` },
    });
    await A.procs.relay!.waitFor(/mesh link up/, 30_000);
    await B.procs.relay!.waitFor(/mesh link up/, 30_000);
  });

  test.after.always(async () => {
    for (const n of nodes) await n.destroy();
    await B?.stop();
    await A?.stop();
    await redis?.stop();
  });

  test.serial('clients homed on different instances’ relays ping each other via DERP through the mesh', async (t) => {
    await hse('users', 'create', 'mesh');
    const key = (JSON.parse(await hse('keys', 'create', '--user', 'mesh', '--reusable', '--json')) as { key: string }).key;
    for (const name of ['on-a', 'on-b']) {
      const n = new TsNode({ name, env: { TS_DEBUG_USE_DERP_HTTP: '1' } });
      nodes.push(n);
      await n.start();
    }
    const [ca, cb] = nodes;
    await ca.up(A.url, [`--auth-key=${key}`]);
    await cb.up(B.url, [`--auth-key=${key}`]);
    const sa = await ca.waitFor((s) => running(s) && ca.peers(s).some((p) => p.HostName === 'on-b' && p.Online), 'on-a to see on-b online');
    const sb = await cb.waitFor((s) => running(s) && cb.peers(s).some((p) => p.HostName === 'on-a' && p.Online), 'on-b to see on-a online');

    const onB = ca.peers(sa).find((p) => p.HostName === 'on-b')!;
    const onA = cb.peers(sb).find((p) => p.HostName === 'on-a')!;
    t.regex(await ping(ca, onB.TailscaleIPs[0]), /pong from on-b \(100\.\d+\.\d+\.\d+\) via DERP\(hse\)/);
    t.regex(await ping(cb, onA.TailscaleIPs[0]), /pong from on-a \(100\.\d+\.\d+\.\d+\) via DERP\(hse\)/);

    // Each client is on its own instance's relay and on no other: the pongs crossed the mesh.
    const relayA = A.procs.relay!.output();
    const relayB = B.procs.relay!.output();
    const connected = (log: string, s: TsStatus) => new RegExp(`relay client connected .*key=${logKey(s)}`).test(log);
    t.true(connected(relayA, sa), `on-a on relay A:\n${relayA}`);
    t.false(connected(relayA, sb), 'on-b not on relay A');
    t.true(connected(relayB, sb), `on-b on relay B:\n${relayB}`);
    t.false(connected(relayB, sa), 'on-a not on relay B');
  });

  test.serial('when one instance dies, the mesh drops its clients and they move to the other node of the region', async (t) => {
    const [ca, cb] = nodes;
    const sb = await cb.status();
    for (const p of Object.values(B.procs)) p.proc.kill('SIGKILL');
    // A's link to B breaks and takes on-b out of reach; B's link to A is gone, having forwarded on-b's packets.
    await A.procs.relay!.waitFor(/mesh link down .*clientsLost=1/, 30_000);
    await A.procs.relay!.waitFor(/mesh peer disconnected .*packetsIn=[1-9]/, 30_000);
    // on-b's map lists relay A as the region's second node: it reconnects there.
    await A.procs.relay!.waitFor(new RegExp(`relay client connected .*key=${logKey(sb)}`), 60_000);
    const sa = await ca.status();
    const onB = ca.peers(sa).find((p) => p.HostName === 'on-b')!;
    t.regex(await ping(ca, onB.TailscaleIPs[0]), /pong from on-b \(100\.\d+\.\d+\.\d+\) via DERP\(hse\)/);
  });
}
