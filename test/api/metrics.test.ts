// Metrics on HSE_METRICS_LISTEN: one scrape shows every process, passes the checks of `promtool check metrics`
// (test/promlint: the same linter, pinned), is not reachable through the public router, and its counters move when two
// official Tailscale clients join and ping each other through the relay.
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import test from 'ava';
import { goTool } from '../harness/go-tools.ts';
import { startImage, type Image } from '../harness/image.ts';
import { freePort, NODE, ROOT } from '../harness/process.ts';
import { haveTailscale, TsNode } from '../harness/tailscale.ts';

const exec = promisify(execFile);

/** Sample values by series text ("name{a=\"b\"}" with labels as written), from a text exposition. */
function samples(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const i = line.lastIndexOf(' ');
    out.set(line.slice(0, i), Number(line.slice(i + 1)));
  }
  return out;
}

/** The sum of a metric's samples whose series contains every one of `has`. */
function total(s: Map<string, number>, name: string, ...has: string[]): number {
  let n = 0;
  for (const [k, v] of s) if ((k === name || k.startsWith(`${name}{`)) && has.every((h) => k.includes(h))) n += v;
  return n;
}

if (!haveTailscale()) {
  test('official Tailscale client is installed', (t) => t.fail('tailscaled/tailscale not found; run .ci/run or go install them (see README)'));
} else {
  let image: Image;
  let metricsUrl: string;
  let lint: string;
  const nodes: TsNode[] = [];

  const scrape = async () => {
    const r = await fetch(metricsUrl);
    if (r.status !== 200) throw new Error(`scrape answered ${r.status}`);
    return r.text();
  };
  const promlint = async (text: string): Promise<{ code: number; out: string }> =>
    new Promise((resolve) => {
      const p = execFile(lint, [], (e, stdout, stderr) => resolve({ code: e ? ((e as { code?: number }).code ?? 1) : 0, out: stdout + stderr }));
      p.stdin!.end(text);
    });

  test.before(async () => {
    lint = await goTool('promlint');
    const port = await freePort();
    metricsUrl = `http://127.0.0.1:${port}/metrics`;
    image = await startImage({ env: { HSE_METRICS_LISTEN: `127.0.0.1:${port}` } });
  });

  test.after.always(async () => {
    for (const n of nodes) await n.destroy();
    await image?.stop();
  });

  test.serial('one scrape shows every process and passes promtool check metrics', async (t) => {
    const text = await scrape();
    const s = samples(text);
    for (const p of ['router', 'coordination', 'console', 'relay']) {
      t.is(s.get(`hse_up{process="${p}"}`), 1, `${p} answered`);
      t.true(total(s, 'process_resident_memory_bytes', `process="${p}"`) > 0, `${p} reports its memory`);
      t.true(s.has(`process_cpu_seconds_total{process="${p}"}`), `${p} reports its CPU`);
    }
    t.true(s.has('hse_redis_up{connection="coordination",process="coordination"}'));
    const r = await promlint(text);
    t.is(r.code, 0, r.out);
    t.regex(r.out, /metric families, no problems/);
  });

  test.serial('the metrics are not served through the public router', async (t) => {
    const r = await fetch(`${image.url}/metrics`);
    t.is(r.status, 404);
    t.notRegex(await r.text(), /hse_up/);
  });

  test.serial('counters move when clients join and send traffic through the relay', async (t) => {
    const before = samples(await scrape());
    const hse = async (...args: string[]) =>
      (await exec(NODE, [path.join(ROOT, 'bin/hse.ts'), ...args], { env: { ...image.env, PATH: process.env.PATH } })).stdout;
    await hse('users', 'create', 'alice');
    const key = JSON.parse(await hse('keys', 'create', '--user', 'alice', '--reusable', '--json')).key as string;
    for (const name of ['alpha', 'bravo']) {
      const n = new TsNode({ name, env: { TS_DEBUG_USE_DERP_HTTP: '1' } });
      nodes.push(n);
      await n.start();
      await n.up(image.url, [`--auth-key=${key}`]);
    }
    const [a, b] = nodes;
    const sa = await a.waitFor((s) => a.peers(s).some((p) => p.HostName === 'bravo' && p.Online), 'alpha to see bravo online');
    await b.waitFor((s) => b.peers(s).some((p) => p.HostName === 'alpha' && p.Online), 'bravo to see alpha online');
    const bravo = a.peers(sa).find((p) => p.HostName === 'bravo')!;
    const ping = await a.cli(['ping', '--c=5', '--timeout=10s', bravo.TailscaleIPs[0]], 60_000).then(
      (r) => r.stdout,
      (e: { stdout?: string }) => e.stdout ?? '',
    );
    t.regex(ping, /via DERP\(hse\)/);
    const after = samples(await scrape());
    const grew = (name: string, ...has: string[]) => total(after, name, ...has) - total(before, name, ...has);
    t.is(total(after, 'hse_nodes'), 2);
    t.is(total(after, 'hse_nodes_online'), 2);
    t.is(total(after, 'hse_map_streams_open'), 2);
    t.is(total(after, 'hse_relay_clients'), 2);
    t.true(grew('hse_register_total', 'outcome="authorized"') >= 2, 'two registrations authorized');
    t.true(grew('hse_register_duration_seconds_count', 'outcome="authorized"') >= 2);
    t.true(grew('hse_map_messages_total') > 0 && grew('hse_map_sent_bytes_total') > 0, 'map messages sent');
    t.true(grew('hse_relay_packets_forwarded_total') >= 5, 'the pings went through the relay');
    t.true(grew('hse_relay_forwarded_bytes_total') > 0);
    t.true(grew('hse_router_upgrades_total', 'route="coordination"') >= 2, 'control connections were tunnelled');
    t.true(grew('hse_router_upgrades_total', 'route="relay"') >= 2, 'DERP connections were tunnelled');
    t.true(grew('hse_router_requests_total', 'route="coordination"', 'status="200"') > 0, '/key was answered');
    t.true(total(after, 'hse_router_tunnels_open') >= 4);
    t.true(grew('hse_redis_command_duration_seconds_count', 'process="coordination"') > 0);
    t.true(total(after, 'hse_policy_compile_duration_seconds_count') > 0);
    const r = await promlint(await scrape());
    t.is(r.code, 0, r.out);
  });
}
