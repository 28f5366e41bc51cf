// Several instances (advanced/ha.md): the control plane as one instance and as two on one Redis, in the same run, with
// N simulated nodes (bench/load-client/) reaching them through nginx with the upstream block and proxy settings of
// advanced/ha/nginx/hse.conf (plain HTTP here: TLS would measure nginx, not us). For each setup:
//   register, full maps, all online   as bench/control.ts (the fleet spread over the instances by nginx);
//   Redis operations/s                INFO commandstats over --steady seconds of steady state (N streams open, no changes):
//                                     what N idle nodes cost the store, and which commands it is;
//   join → every stream               K new nodes register and open their streams (through nginx, so on either
//                                     instance): latency until each of the N streams lists the new node, p50/p99 over
//                                     every stream, and over the streams on the other instance than the new node's
//                                     (the change crossed Redis pub/sub) — the goal is a cross-instance p99 of at most
//                                     1.5× the one-instance p99 of the same run;
//   losing an instance                (two only) kill -9 of one instance's coordination and router; the streams it held
//                                     end, and every node reconnects through nginx with the backoff of
//                                     test/reliability/lib/sim-node.ts (250 ms doubling to 8 s, full jitter): time
//                                     from the kill until every one of them has its full map again on the other.
// Which instance holds a stream is read from the store's presence entries. Both instances, nginx, Redis and the load
// client share one machine, so two instances here have no more CPU than one: the figures show what the hop through
// Redis costs, not what a second machine adds.
//
//   node bench/ha.ts                     N = 2000, 10 joins per setup
//   options: --n=N  --events=K  --concurrency=C (registrations in flight, default 64)  --steady=S (default 30)
import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { K } from '../shared/redis-keys.ts';
import { freePort, ROOT } from '../test/harness/process.ts';
import { parseArgs } from './lib/args.ts';
import { type Hse, startHse } from './lib/hse.ts';
import { startNginx } from './lib/nginx.ts';
import { fmtMs, fmtNum, header, median, percentile, table } from './lib/report.ts';
import { fetchServerKey } from './load-client/dial.ts';
import { type EventResult, Fleet } from './load-client/fleet.ts';

const args = parseArgs(process.argv.slice(2));
const N = args.int('n', 2000);
const events = args.int('events', 10);
const concurrency = args.int('concurrency', 64);
const steadyS = args.int('steady', 30);
const log = (s: string) => process.stderr.write(`[ha] ${s}\n`);
// Interrupted: exit normally, so the harness's exit handler stops the servers this run started.
for (const sig of ['SIGINT', 'SIGTERM'] as const) process.on(sig, () => process.exit(130));

const EXAMPLE = path.join(ROOT, 'advanced/ha/nginx/hse.conf');

/** advanced/ha/nginx/hse.conf's map, upstream and location blocks around a plain-HTTP listener on `port`. */
function nginxHttp(port: number, upstreams: number[]): string {
  const text = fs.readFileSync(EXAMPLE, 'utf8');
  const block = (re: RegExp, what: string) => {
    const m = re.exec(text);
    if (!m) throw new Error(`${EXAMPLE}: no ${what} block; update bench/ha.ts with the example`);
    return m[0];
  };
  const map = block(/^map \$http_upgrade[\s\S]*?^\}/m, 'map');
  const servers = block(/^upstream hse \{[\s\S]*?^\}/m, 'upstream').split('\n');
  const lines = servers.filter((l) => !/^\s*server hse-[ab]:8080/.test(l));
  const template = servers.find((l) => /^\s*server hse-a:8080/.test(l));
  if (!template) throw new Error(`${EXAMPLE}: no "server hse-a:8080" line`);
  const upstream = [...lines.slice(0, -1), ...upstreams.map((p) => template.replace('hse-a:8080', `127.0.0.1:${p}`)), lines.at(-1)!].join('\n');
  const location = block(/^ {4}location \/ \{[\s\S]*?^ {4}\}/m, 'location');
  return `${map}\n${upstream}\nserver {\n    listen 127.0.0.1:${port} backlog=4096;\n${location}\n}\n`;
}

interface Setup {
  name: 'one' | 'two';
  registerMs: number;
  fullAllMs: number;
  allOnlineMs: number;
  onInstance: Record<string, number>;
  opsPerSec: number;
  topCommands: string;
  join: EventResult[];
  /** Per join: latencies of streams on the other instance than the new node's. */
  cross: number[];
  comeback?: { lost: number; back: number[]; missing: number };
  error?: string;
}

/** INFO commandstats as command -> calls. */
function commandCalls(info: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const m of info.matchAll(/^cmdstat_(\S+):calls=(\d+)/gm)) out.set(m[1], Number(m[2]));
  return out;
}

async function runSetup(name: 'one' | 'two'): Promise<Setup> {
  const out: Setup = {
    name,
    registerMs: NaN,
    fullAllMs: NaN,
    allOnlineMs: NaN,
    onInstance: {},
    opsPerSec: NaN,
    topCommands: '',
    join: [],
    cross: [],
  };
  const instances: Hse[] = [];
  let nginx: Awaited<ReturnType<typeof startNginx>> | null = null;
  let fleet: Fleet | null = null;
  let redis: Redis | null = null;
  try {
    const a = await startHse({ processes: ['redis', 'coordination', 'router'] });
    instances.push(a);
    const socket = path.join(a.dataDir, 'run', 'redis.sock');
    if (name === 'two') {
      instances.push(
        await startHse({
          processes: ['coordination', 'router'],
          env: { HSE_REDIS_URL: `unix://${socket}` },
          dataFiles: { 'noise_private.key': fs.readFileSync(path.join(a.dataDir, 'noise_private.key')) },
        }),
      );
    }
    const ids = instances.map((h) => /listening .*instance=([0-9a-f]+)/.exec(h.servers.coordination!.output())?.[1] ?? '?');
    const label = (inst: string) => (ids.indexOf(inst) >= 0 ? 'AB'[ids.indexOf(inst)] : '?');
    const port = await freePort();
    nginx = await startNginx(`ha-${name}`, {
      workers: 'auto',
      workerConnections: 4 * N + 1024,
      http: nginxHttp(
        port,
        instances.map((h) => h.port),
      ),
    });
    redis = new Redis({ path: socket });
    const key = await a.preAuthKey('bench');
    const probeKey = await a.preAuthKey('bench', { ephemeral: true });
    const target = { host: '127.0.0.1', port, serverKey: await fetchServerKey(`http://127.0.0.1:${port}`) };
    fleet = new Fleet(target, N, `ha-${name}`);
    log(`${name}: registering ${N}`);
    out.registerMs = await fleet.register(key, concurrency);
    log(`${name}: opening ${N} map streams`);
    await fleet.openAll();
    const full = await fleet.waitFull(Math.max(120_000, N * 150));
    out.fullAllMs = full.missing === 0 ? Math.max(...full.times) : Infinity;
    log(`${name}: full maps in ${fmtMs(out.fullAllMs)}; waiting for every stream to see every node online`);
    const missingOnline = await fleet.waitAllOnline(Math.max(120_000, N * 300));
    out.allOnlineMs = missingOnline > 0 ? Infinity : fleet.allOnlineMs;
    log(`${name}: all online in ${fmtMs(out.allOnlineMs)}`);
    await fleet.settle(1000, 120_000);

    // Which instance holds which stream.
    const holderOf = async (): Promise<Map<number, string>> => {
      const m = new Map<number, string>();
      for (const [id, v] of Object.entries(await redis!.hgetall(K.presence))) {
        const holders = Object.keys(JSON.parse(v) as Record<string, number>);
        m.set(Number(id), holders.length === 1 ? label(holders[0]) : '?');
      }
      return m;
    };
    let holders = await holderOf();
    for (const n of fleet.nodes) out.onInstance[holders.get(n.id) ?? '?'] = (out.onInstance[holders.get(n.id) ?? '?'] ?? 0) + 1;

    log(`${name}: ${steadyS} s of steady state for the Redis figure`);
    // Counted per command from INFO commandstats, leaving out INFO itself (that is this benchmark asking).
    const cmd0 = commandCalls(await redis.info('commandstats'));
    const t0 = performance.now();
    await sleep(steadyS * 1000);
    const cmd1 = commandCalls(await redis.info('commandstats'));
    const elapsed = (performance.now() - t0) / 1000;
    const deltas = [...cmd1].map(([c, n]) => [c, n - (cmd0.get(c) ?? 0)] as const).filter(([c, n]) => n > 0 && c !== 'info');
    out.opsPerSec = deltas.reduce((sum, [, n]) => sum + n, 0) / elapsed;
    out.topCommands = deltas
      .sort((x, y) => y[1] - x[1])
      .slice(0, 5)
      .map(([c, n]) => `${c} ${fmtNum(n / elapsed, 2)}/s`)
      .join(', ');

    for (let k = 0; k < events; k++) {
      const { node, result } = await fleet.probeJoin(probeKey, 30_000);
      out.join.push(result);
      holders = await holderOf();
      const probeOn = holders.get(node.id);
      for (let i = 0; i < fleet.nodes.length; i++) {
        const on = holders.get(fleet.nodes[i].id);
        if (on !== undefined && probeOn !== undefined && on !== probeOn && !Number.isNaN(result.byStream[i])) out.cross.push(result.byStream[i]);
      }
      await fleet.settle(300, 15_000);
      await fleet.probeLeave(node, 30_000);
      await fleet.settle(300, 15_000);
    }
    log(`${name}: ${events} joins measured`);

    if (name === 'two') {
      const victim = instances[1];
      log(`two: kill -9 of instance B (${out.onInstance.B ?? 0} streams)`);
      fleet.reconnectOnEnd({ minMs: 250, maxMs: 8000 });
      const t = performance.now();
      for (const p of ['coordination', 'router'] as const) victim.servers[p]!.proc.kill('SIGKILL');
      await Promise.all((['coordination', 'router'] as const).map((p) => victim.servers[p]!.exited()));
      const deadline = Date.now() + 180_000;
      await sleep(1000);
      while (Date.now() < deadline) {
        const c = fleet.comeback(t);
        if (c.lost > 0 && c.missing === 0) break;
        await sleep(250);
      }
      out.comeback = fleet.comeback(t);
    }
  } catch (e) {
    out.error = (e as Error).message;
    log(`${name} failed: ${out.error}\n${instances.map((h) => h.logs().slice(-3000)).join('\n')}`);
  } finally {
    fleet?.close();
    redis?.disconnect();
    await nginx?.stop();
    for (const h of instances.reverse()) await h.stop();
  }
  return out;
}

function lat(rs: EventResult[]): number[] {
  return rs.flatMap((r) => r.latencies);
}

process.stdout.write(
  header('Several instances: one vs two on one Redis, behind nginx', {
    nginx: ['nginx', ['-v']],
    'redis-server': ['redis-server', ['--version']],
  }),
);
process.stdout.write(
  `N = ${N} simulated nodes; ${events} joins per setup; registrations ${concurrency} in flight; nginx with advanced/ha/nginx/hse.conf's upstream and location blocks (plain HTTP); one load-client process; everything on one machine\n\n`,
);

const one = await runSetup('one');
const two = await runSetup('two');

const rows: (string | number)[][] = [];
const ratio = (a: number, b: number) => (Number.isFinite(a) && Number.isFinite(b) && a > 0 ? `${(b / a).toFixed(2)}×` : '–');
const add = (label: string, a: number, b: number, fmt: (v: number) => string) => rows.push([label, fmt(a), fmt(b), ratio(a, b)]);
add('register, nodes/s', (N / one.registerMs) * 1000, (N / two.registerMs) * 1000, (v) => fmtNum(v));
add('all full maps', one.fullAllMs, two.fullAllMs, fmtMs);
add('all streams see all nodes online', one.allOnlineMs, two.allOnlineMs, fmtMs);
add('join → every stream p50', percentile(lat(one.join), 50), percentile(lat(two.join), 50), fmtMs);
add('join → every stream p99', percentile(lat(one.join), 99), percentile(lat(two.join), 99), fmtMs);
rows.push([
  'join → streams on the other instance p50 / p99',
  '–',
  `${fmtMs(percentile(two.cross, 50))} / ${fmtMs(percentile(two.cross, 99))}`,
  ratio(percentile(lat(one.join), 99), percentile(two.cross, 99)),
]);
add('join → all streams (median of slowest)', median(one.join.map((r) => r.allMs)), median(two.join.map((r) => r.allMs)), fmtMs);
add('Redis operations/s, steady state', one.opsPerSec, two.opsPerSec, (v) => fmtNum(v, 1));
const cb = two.comeback;
rows.push([
  'kill -9 of one instance: all its streams back (p50 / all)',
  '–',
  cb ? `${cb.lost} streams: ${fmtMs(median(cb.back))} / ${cb.missing === 0 ? fmtMs(Math.max(...cb.back)) : `${cb.missing} not back`}` : '–',
  '',
]);
process.stdout.write(`${table(['metric', 'one instance', 'two instances', 'two/one'], rows)}\n\n`);
for (const s of [one, two]) {
  process.stdout.write(
    `${s.name}: ${s.error ? `FAILED: ${s.error.split('\n')[0]}; ` : ''}streams by instance ${JSON.stringify(s.onInstance)}; join deliveries missing ${s.join.reduce((x, r) => x + r.missing, 0)}; Redis commands in steady state: ${s.topCommands}\n`,
  );
}
process.stdout.write(`\ngoal: cross-instance join p99 ≤ 1.5× the one-instance p99 (row "join → streams on the other instance", last column).\n`);
