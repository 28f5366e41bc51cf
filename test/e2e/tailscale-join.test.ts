// The official Tailscale client (pinned v1.102.3) against the whole image through the router: registration with a
// pre-auth key, the interactive flow approved by an operator (CLI), peers seeing each other, ping through our relay,
// deletion and offline propagation, and a whole-image restart that keeps addresses and names.
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import test from 'ava';
import { startImage, type Image } from '../harness/image.ts';
import { NODE, ROOT } from '../harness/process.ts';
import { haveTailscale, TsNode, type TsStatus } from '../harness/tailscale.ts';

const exec = promisify(execFile);

if (!haveTailscale()) {
  // .ci/run installs the client; a developer machine without it is told, and the run is marked failed.
  test('official Tailscale client is installed', (t) => t.fail('tailscaled/tailscale not found; run .ci/run or go install them (see README)'));
} else {
  let image: Image;
  const nodes: TsNode[] = [];

  async function hse(...args: string[]): Promise<string> {
    const { stdout } = await exec(NODE, [path.join(ROOT, 'bin/hse.ts'), ...args], { env: { ...image.env, PATH: process.env.PATH } });
    return stdout;
  }

  async function newNode(name: string): Promise<TsNode> {
    // An http:// login server means an http DERP node; the client needs this knob for that (real deployments are https).
    const n = new TsNode({ name, env: { TS_DEBUG_USE_DERP_HTTP: '1' } });
    nodes.push(n);
    await n.start();
    return n;
  }

  const running = (s: TsStatus) => s.BackendState === 'Running';

  test.before(async () => {
    image = await startImage({});
  });

  test.after.always(async () => {
    for (const n of nodes) await n.destroy();
    await image?.stop();
  });

  test.serial('two clients join with a pre-auth key, see each other and ping through the relay', async (t) => {
    await hse('users', 'create', 'alice');
    const key = JSON.parse(await hse('keys', 'create', '--user', 'alice', '--reusable', '--json')).key as string;
    const a = await newNode('alpha');
    const b = await newNode('bravo');
    await a.up(image.url, [`--auth-key=${key}`]);
    await b.up(image.url, [`--auth-key=${key}`]);
    const sa = await a.waitFor((s) => running(s) && a.peers(s).some((p) => p.HostName === 'bravo' && p.Online), 'alpha to see bravo online');
    await b.waitFor((s) => running(s) && b.peers(s).some((p) => p.HostName === 'alpha' && p.Online), 'bravo to see alpha online');
    t.regex(sa.Self.TailscaleIPs[0], /^100\.\d+\.\d+\.\d+$/);
    t.is(sa.Self.DNSName, 'alpha.hse.internal.');
    const bravo = a.peers(sa).find((p) => p.HostName === 'bravo')!;
    t.is(bravo.DNSName, 'bravo.hse.internal.');
    // With relay-only paths the CLI exits 1 after its pings ("direct connection not established"): read its output.
    const stdout = await a.cli(['ping', '--c=5', '--timeout=10s', bravo.TailscaleIPs[0]], 60_000).then(
      (r) => r.stdout,
      (e: { stdout?: string }) => e.stdout ?? '',
    );
    t.regex(stdout, /pong from bravo \(100\.\d+\.\d+\.\d+\) via DERP\(hse\)/);
  });

  test.serial('tailscale netcheck finds our region by STUN and measures its latency', async (t) => {
    const a = nodes[0];
    const { stdout } = await a.cli(['netcheck', '--format=json'], 60_000);
    const report = JSON.parse(stdout) as {
      UDP: boolean;
      RegionLatency?: Record<string, number>;
      RegionV4Latency?: Record<string, number>;
      PreferredDERP: number;
    };
    t.true(report.UDP, 'STUN answered over UDP');
    t.is(report.PreferredDERP, 900);
    t.true((report.RegionV4Latency?.['900'] ?? 0) > 0, `latency to region 900 measured by STUN: ${stdout}`);
  });

  test.serial('interactive login: the client prints a URL, an operator approves it, the client comes up', async (t) => {
    const c = await newNode('charlie');
    const { url, done } = await c.upInteractive(image.url);
    t.true(url.startsWith(`${image.url}/console/register/`));
    const authId = url.split('/').pop()!;
    const pending = JSON.parse(await hse('pending', 'list', '--json')) as { authId: string; hostname: string }[];
    t.true(pending.some((p) => p.authId === authId && p.hostname === 'charlie'));
    await hse('pending', 'approve', authId, '--user', 'alice');
    t.is(await done, 0);
    const s = await c.waitFor((x) => running(x) && c.peers(x).length >= 2, 'charlie running with peers');
    t.is(s.Self.DNSName, 'charlie.hse.internal.');
  });

  test.serial('deleting a node removes it from the others; stopping a daemon shows it offline', async (t) => {
    const [a, b, c] = nodes;
    const list = JSON.parse(await hse('nodes', 'list', '--json')) as { id: number; givenName: string }[];
    const charlie = list.find((n) => n.givenName === 'charlie')!;
    await hse('nodes', 'delete', String(charlie.id));
    await a.waitFor((s) => !a.peers(s).some((p) => p.HostName === 'charlie'), 'charlie gone from alpha', 20_000);
    await c.stop();
    await b.stop();
    await a.waitFor((s) => a.peers(s).some((p) => p.HostName === 'bravo' && !p.Online), 'bravo offline at alpha', 30_000);
    t.pass();
  });

  test.serial('after a whole-image restart clients come back with the same addresses and names', async (t) => {
    const [a, b] = nodes;
    const before = await a.status();
    await image.restart();
    await b.start();
    const after = await a.waitFor((s) => running(s) && a.peers(s).some((p) => p.HostName === 'bravo' && p.Online), 'alpha back with bravo online', 90_000);
    t.deepEqual(after.Self.TailscaleIPs, before.Self.TailscaleIPs);
    t.is(after.Self.DNSName, before.Self.DNSName);
    const list = JSON.parse(await hse('nodes', 'list', '--json')) as { givenName: string }[];
    t.deepEqual(list.map((n) => n.givenName).sort(), ['alpha', 'bravo']);
  });
}
