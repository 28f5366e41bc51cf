// Control plane: our image vs headscale, in one run, with the load client speaking the real protocol
// (bench/load-client/). For each N:
//   register    N nodes dial /ts2021 and register with a reusable pre-auth key (64 at a time);
//   full maps   all N open their map streams at once: time until every node holds all N-1 peers; then until every
//               stream has been told that every other node is online (the N×(N-1) online-status fan-out), and how
//               many messages each stream got until the servers went quiet;
//   join        a new node (ephemeral key) registers and opens its stream: latency until each of the N streams lists
//               it (p50/p99 over every stream of every event; "all" = median over events of the slowest stream);
//   leave       that node logs out (the server deletes it): latency until each stream has it in PeersRemoved;
//   resources   server RSS (peak, and settled with N streams open), PSS, CPU seconds from /proc.
// Counted as "server": ours = coordination + router + redis-server; headscale = its one
// process. Ours is reached through the router (what users get); headscale directly. One server runs at a time.
//
//
// With --failover, instead (ours only): subnet-router failover. Of the N nodes, R are subnet routers, R/P for each of
// P prefixes 10.100.<k>.0/24 (advertised in Hostinfo.RoutableIPs, approved at once by the policy's autoApprovers);
// once every stream has its full map and the online fan-out has settled, K times: the primary router of a prefix
// goes offline (its connection closes, as when tailscaled stops) — latency until each stream that uses the route
// (all but the prefix's routers, which route it themselves) has the new primary (a Node with the prefix in
// PrimaryRoutes); then the old primary comes back, and must not take the prefix back (counted as "flap-backs").
//
//   node bench/control.ts                       N = 100, 500
//   node bench/control.ts --n=100 --events=5     smaller
//   node bench/control.ts --full                 N = 100, 500, 1000, 2000
//   node bench/control.ts --failover             N = 2000, 50 routers, 10 prefixes (--n, --routers=R, --prefixes=P)
//   options: --only=hse|headscale  --events=K (default 10)  --concurrency=C (registrations in flight, default 64)
//            --policy=<file>: the policy put in force before the nodes register (--failover; default: every node
//            reaches every node, and autoApprovers give 10.100.0.0/16 to the bench user's routers)
//            --cpu-prof=<dir>: V8 CPU profiles of the server's Node processes, written there when they stop
//            --heap-snapshot=<dir>: a V8 heap snapshot of the coordination, written there once the streams settled
//            --server-env=K=V,K2=V2: more environment for hse's processes (to measure a runtime setting)
import fs from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { fetchServerKey } from './load-client/dial.ts';
import { Fleet, type EventResult } from './load-client/fleet.ts';
import { parseArgs } from './lib/args.ts';
import { startHeadscale } from './lib/headscale.ts';
import { startHse } from './lib/hse.ts';
import { HEADSCALE, missingPeers, PEERS } from './lib/peers.ts';
import { PeakSampler, sampleGroup, type GroupSample } from './lib/sampling.ts';
import { fmtMiB, fmtMs, fmtNum, header, median, percentile, ratio, table } from './lib/report.ts';

type ServerName = 'hse' | 'headscale';

interface Run {
  server: ServerName;
  n: number;
  registerMs: number;
  fullAllMs: number;
  fullP50Ms: number;
  fullMissing: number;
  allOnlineMs: number;
  onlineMissing: number;
  /** Non-keep-alive messages per stream from opening until the online fan-out settled. */
  messagesPerStream: number;
  join: EventResult[];
  leave: EventResult[];
  peakRssKiB: number;
  settled: GroupSample;
  cpuFull: number;
  cpuTotal: number;
  clientCpuFull: number;
  streamsEnded: number;
  error?: string;
}

const args = parseArgs(process.argv.slice(2));
const failover = args.flag('failover');
const sizes = args.flag('full') ? [100, 500, 1000, 2000] : args.ints('n', failover ? [2000] : [100, 500]);
const events = args.int('events', 10);
const concurrency = args.int('concurrency', 64);
const only = args.str('only', '');
const log = (s: string) => process.stderr.write(`[control] ${s}\n`);

if (failover) {
  await failoverScenario();
  process.exit(0);
}

let servers: ServerName[] = only === 'hse' ? ['hse'] : only === 'headscale' ? ['headscale'] : ['hse', 'headscale'];
// A missing headscale is said up front and after the table; ours is measured all the same.
const notMeasured = servers.includes('headscale') ? missingPeers([PEERS.headscale]) : [];
if (notMeasured.length > 0) {
  servers = servers.filter((s) => s !== 'headscale');
  for (const m of notMeasured) log(`${m}; ${servers.length > 0 ? 'measuring ours alone' : 'nothing to measure'}`);
  if (servers.length === 0) process.exit(2);
}

/** Environment for hse's processes: --server-env, and NODE_OPTIONS for CPU profiles (--cpu-prof) and heap snapshots on SIGUSR2 (--heap-snapshot). */
function hseEnv(): Record<string, string> {
  const profiles = args.str('cpu-prof', '');
  const snapshots = args.str('heap-snapshot', '');
  const opts = [
    ...(profiles ? [`--cpu-prof --cpu-prof-dir=${profiles}`] : []),
    ...(snapshots ? [`--heapsnapshot-signal=SIGUSR2 --diagnostic-dir=${snapshots}`] : []),
  ];
  const extra: Record<string, string> = {};
  for (const kv of args.str('server-env', '').split(',')) {
    const eq = kv.indexOf('=');
    if (eq > 0) extra[kv.slice(0, eq)] = kv.slice(eq + 1);
  }
  return { ...extra, ...(opts.length > 0 ? { NODE_OPTIONS: opts.join(' ') } : {}) };
}

/** Writes a heap snapshot of the coordination (started with --heap-snapshot) and waits until the file is complete. */
async function snapshotCoordination(pids: Record<string, number>): Promise<void> {
  const dir = args.str('heap-snapshot', '');
  const pid = pids.coordination;
  if (!dir || pid === undefined) return;
  const before = new Set(fs.readdirSync(dir));
  process.kill(pid, 'SIGUSR2');
  const deadline = Date.now() + 600_000;
  for (;;) {
    const fresh = fs.readdirSync(dir).filter((f) => !before.has(f) && f.endsWith('.heapsnapshot'));
    // The file grows while V8 writes it; done when its size holds still for a second.
    if (fresh.length > 0) {
      const file = `${dir}/${fresh[0]}`;
      const a = fs.statSync(file).size;
      await sleep(1000);
      if (a > 0 && fs.statSync(file).size === a) {
        log(`heap snapshot of the coordination: ${file} (${fmtMiB(a / 1024)})`);
        return;
      }
    } else await sleep(500);
    if (Date.now() > deadline) throw new Error('the coordination wrote no heap snapshot within 10 minutes');
  }
}

async function startServer(name: ServerName) {
  if (name === 'hse') {
    const h = await startHse({ processes: ['redis', 'coordination', 'router'], env: hseEnv() });
    return { url: h.url, port: h.port, pids: h.pids(), preAuthKey: h.preAuthKey, stop: h.stop, logs: h.logs };
  }
  const h = await startHeadscale();
  return { url: h.url, port: h.port, pids: h.pids(), preAuthKey: h.preAuthKey, stop: h.stop, logs: () => h.server.output() };
}

async function runOne(name: ServerName, n: number): Promise<Run> {
  const run: Run = {
    server: name,
    n,
    registerMs: NaN,
    fullAllMs: NaN,
    fullP50Ms: NaN,
    fullMissing: n,
    allOnlineMs: NaN,
    onlineMissing: n,
    messagesPerStream: NaN,
    join: [],
    leave: [],
    peakRssKiB: NaN,
    settled: { rssKiB: NaN, pssKiB: NaN, cpuSeconds: NaN, byProcess: {} },
    cpuFull: NaN,
    cpuTotal: NaN,
    clientCpuFull: NaN,
    streamsEnded: 0,
  };
  let srv: Awaited<ReturnType<typeof startServer>>;
  try {
    srv = await startServer(name);
  } catch (e) {
    run.error = (e as Error).message;
    log(`${name} N=${n} did not start: ${run.error}`);
    return run;
  }
  let fleet: Fleet | null = null;
  const start = sampleGroup(srv.pids);
  run.settled = start;
  const peak = new PeakSampler(srv.pids);
  try {
    const key = await srv.preAuthKey('bench');
    const probeKey = await srv.preAuthKey('bench', { ephemeral: true });
    fleet = new Fleet({ host: '127.0.0.1', port: srv.port, serverKey: await fetchServerKey(srv.url) }, n);

    log(`${name} N=${n}: registering`);
    run.registerMs = await fleet.register(key, concurrency);

    log(`${name} N=${n}: opening ${n} map streams`);
    const cpu0 = sampleGroup(srv.pids).cpuSeconds;
    const client0 = process.cpuUsage();
    await fleet.openAll();
    const full = await fleet.waitFull(Math.max(120_000, n * 150));
    run.fullMissing = full.missing;
    run.fullAllMs = full.missing === 0 ? Math.max(...full.times) : Infinity;
    run.fullP50Ms = median(full.times);
    const c = process.cpuUsage(client0);
    run.clientCpuFull = (c.user + c.system) / 1e6;
    run.cpuFull = sampleGroup(srv.pids).cpuSeconds - cpu0;
    // The online flags of N nodes coming up fan out as N×(N-1) updates after the maps; wait them out.
    log(`${name} N=${n}: full maps in ${fmtMs(run.fullAllMs)}; waiting for every stream to see every node online`);
    run.onlineMissing = await fleet.waitAllOnline(Math.max(120_000, n * 300));
    run.allOnlineMs = run.onlineMissing > 0 ? Infinity : fleet.allOnlineMs;
    await fleet.settle(1000, 120_000);
    run.messagesPerStream = fleet.messages / n;

    for (let k = 0; k < events; k++) {
      const { node, result } = await fleet.probeJoin(probeKey, 30_000);
      run.join.push(result);
      await fleet.settle(300, 15_000);
      run.leave.push(await fleet.probeLeave(node, 30_000));
      await fleet.settle(300, 15_000);
    }
    log(`${name} N=${n}: ${events} joins and leaves measured`);
    run.settled = sampleGroup(srv.pids);
    run.cpuTotal = run.settled.cpuSeconds - start.cpuSeconds;
    run.streamsEnded = fleet.streamsEnded;
    if (name === 'hse') await snapshotCoordination(srv.pids);
  } catch (e) {
    run.error = (e as Error).message;
    log(`${name} N=${n} failed: ${run.error}\n${srv.logs().slice(-3000)}`);
  } finally {
    peak.stop();
    run.peakRssKiB = peak.peakRssKiB;
    fleet?.close();
    await srv.stop();
  }
  return run;
}

function eventStats(rs: EventResult[]): { p50: number; p99: number; all: number; missing: number } {
  const lat = rs.flatMap((r) => r.latencies);
  return {
    p50: percentile(lat, 50),
    p99: percentile(lat, 99),
    all: median(rs.map((r) => (Number.isNaN(r.allMs) ? Infinity : r.allMs))),
    missing: rs.reduce((s, r) => s + r.missing, 0),
  };
}

function rows(runs: Run[]): (string | number)[][] {
  const out: (string | number)[][] = [];
  const by = (s: ServerName) => runs.find((r) => r.server === s);
  const ours = by('hse');
  const theirs = by('headscale');
  const n = runs[0].n;
  type Metric = [string, (r: Run) => number, (v: number) => string, 'lower' | 'higher'];
  const metrics: Metric[] = [
    ['register, nodes/s', (r) => (r.n / r.registerMs) * 1000, (v) => fmtNum(v), 'higher'],
    ['all full maps', (r) => r.fullAllMs, fmtMs, 'lower'],
    ['full map p50 (per node)', (r) => r.fullP50Ms, fmtMs, 'lower'],
    ['all streams see all nodes online', (r) => r.allOnlineMs, fmtMs, 'lower'],
    ['messages per stream until quiet', (r) => r.messagesPerStream, (v) => fmtNum(v), 'lower'],
    ['join → stream p50', (r) => eventStats(r.join).p50, fmtMs, 'lower'],
    ['join → stream p99', (r) => eventStats(r.join).p99, fmtMs, 'lower'],
    ['join → all streams (median)', (r) => eventStats(r.join).all, fmtMs, 'lower'],
    ['leave → stream p50', (r) => eventStats(r.leave).p50, fmtMs, 'lower'],
    ['leave → stream p99', (r) => eventStats(r.leave).p99, fmtMs, 'lower'],
    ['leave → all streams (median)', (r) => eventStats(r.leave).all, fmtMs, 'lower'],
    ['server RSS peak', (r) => r.peakRssKiB, fmtMiB, 'lower'],
    ['server RSS settled, N streams', (r) => r.settled.rssKiB, fmtMiB, 'lower'],
    ['server PSS settled, N streams', (r) => r.settled.pssKiB, fmtMiB, 'lower'],
    ['server CPU s, full-map phase', (r) => r.cpuFull, (v) => fmtNum(v, 2), 'lower'],
    ['server CPU s, whole run', (r) => r.cpuTotal, (v) => fmtNum(v, 2), 'lower'],
  ];
  for (const [label, get, fmt] of metrics) {
    const a = ours ? get(ours) : NaN;
    const b = theirs ? get(theirs) : NaN;
    out.push([String(n), label, fmt(a), fmt(b), ratio(a, b)]);
  }
  return out;
}

process.stdout.write(
  header('Control plane: hse vs headscale', {
    headscale: [HEADSCALE, ['version']],
    'redis-server': ['redis-server', ['--version']],
  }),
);
process.stdout.write(
  `N = ${sizes.join(', ')}; ${events} join/leave events per N; registrations ${concurrency} in flight; load client: one Noise connection per node, capability version 142, one process sharing the machine with the server\n\n`,
);

const all: Run[][] = [];
for (const n of sizes) {
  const runs: Run[] = [];
  for (const s of servers) runs.push(await runOne(s, n));
  all.push(runs);
}

process.stdout.write(`${table(['N', 'metric', 'hse', 'headscale', 'hse/headscale'], all.flatMap(rows))}\n\n`);
for (const runs of all) {
  for (const r of runs) {
    const j = eventStats(r.join);
    const l = eventStats(r.leave);
    const per = Object.entries(r.settled.byProcess)
      .map(([k, v]) => `${k} ${fmtMiB(v.rssKiB)} RSS/${fmtMiB(v.pssKiB)} PSS/${fmtNum(v.cpuSeconds, 1)} CPU-s`)
      .join(', ');
    process.stdout.write(
      `${r.server} N=${r.n}: ${r.error ? `FAILED: ${r.error.split('\n')[0]}; ` : ''}nodes without a full map ${r.fullMissing}; streams missing some online peer ${r.onlineMissing}; ` +
        `stream deliveries missing: join ${j.missing}, leave ${l.missing}; streams ended early ${r.streamsEnded}; ` +
        `load client CPU in the full-map phase ${fmtNum(r.clientCpuFull, 2)} s; processes: ${per}\n`,
    );
  }
}
process.stdout.write('\nratio < 1 is better for hse on every row except register (nodes/s), where > 1 is better.\n');
if (notMeasured.length > 0) process.stdout.write(`headscale not measured: ${notMeasured.join('; ')}.\n`);

// ---- --failover ----------------------------------------------------------------------------------------------------

interface FailoverRun {
  n: number;
  events: EventResult[];
  /** Times the old primary was primary again after it came back. */
  flapBacks: number;
  cpuEvents: number;
  streamsEnded: number;
  /** From full maps until the streams went quiet (the online fan-out), and streams then missing some online peer. */
  settleMs: number;
  onlineMissing: number;
  error?: string;
}

/** Every node reaches every node; the bench user's routers get 10.100.0.0/16 and its subnets approved at once. */
function defaultFailoverPolicy(): string {
  return JSON.stringify({
    acls: [{ action: 'accept', src: ['*'], dst: ['*:*'] }],
    autoApprovers: { routes: { '10.100.0.0/16': ['bench@'] } },
  });
}

async function runFailover(n: number, routers: number, prefixes: number, policy: string): Promise<FailoverRun> {
  const run: FailoverRun = { n, events: [], flapBacks: 0, cpuEvents: NaN, streamsEnded: 0, settleMs: NaN, onlineMissing: NaN };
  const h = await startHse({ processes: ['redis', 'coordination', 'router'], env: hseEnv() });
  const who = { actor: 'bench', ip: '' };
  const prefixOf = (k: number) => `10.100.${k}.0/24`;
  let fleet: Fleet | null = null;
  try {
    const key = await h.preAuthKey('bench');
    await h.admin.setPolicy(who, policy);
    fleet = new Fleet({ host: '127.0.0.1', port: h.port, serverKey: await fetchServerKey(h.url) }, n);
    for (let i = 0; i < routers; i++) fleet.nodes[i].routes = [prefixOf(i % prefixes)];
    log(`failover N=${n}: registering (${routers} routers, ${prefixes} prefixes)`);
    await fleet.register(key, concurrency);
    await fleet.openAll();
    const full = await fleet.waitFull(Math.max(120_000, n * 150));
    if (full.missing > 0) throw new Error(`${full.missing} nodes never got their full map`);
    log(`failover N=${n}: full maps in ${fmtMs(Math.max(...full.times))}; waiting for the online fan-out to settle`);
    // Failovers are measured on a quiet server: the N×(N-1) online fan-out of the whole network opening at once (the
    // default scenario's "all streams see all nodes online") must have finished, however long it takes here.
    const settleStart = performance.now();
    if (!(await fleet.settle(3000, 3_600_000))) throw new Error('the server did not go quiet within an hour after the streams opened');
    run.settleMs = performance.now() - settleStart;
    run.onlineMissing = await fleet.waitAllOnline(0);
    if (run.onlineMissing > 0) log(`failover N=${n}: nodes not known online: ${JSON.stringify(fleet.onlineGaps())}`);
    // Every router approved and in effect, one primary per prefix.
    const ready = async () => {
      const rs = await h.admin.listRoutes(who);
      return rs.filter((r) => r.active).length === routers && new Set(rs.filter((r) => r.primary).map((r) => r.prefix)).size === prefixes;
    };
    const deadline = Date.now() + 60_000;
    while (!(await ready())) {
      if (Date.now() > deadline)
        throw new Error(`the routes were not all approved with a primary each: ${JSON.stringify(await h.admin.listRoutes(who)).slice(0, 500)}`);
      await sleep(250);
    }
    const cpu0 = sampleGroup(h.pids()).cpuSeconds;
    for (let e = 0; e < events; e++) {
      const prefix = prefixOf(e % prefixes);
      const primary = (await h.admin.listRoutes(who)).find((r) => r.prefix === prefix && r.primary);
      const i = fleet.nodes.findIndex((x) => x.id === primary?.nodeId);
      if (!primary || i < 0) throw new Error(`no primary router known for ${prefix}`);
      const coRouters = fleet.nodes.flatMap((x, j) => (x.routes.includes(prefix) && j !== i ? [j] : []));
      const r = await fleet.probeFailover(i, prefix, coRouters, 30_000);
      run.events.push(r);
      const now = (await h.admin.listRoutes(who)).find((x) => x.prefix === prefix && x.primary);
      log(
        `failover ${e + 1}: ${prefix} from node ${primary.nodeId} to ${now?.nodeId ?? 'none'}: p50 ${fmtMs(percentile(r.latencies, 50))}, slowest ${fmtMs(r.allMs)}, streams missing ${r.missing}`,
      );
      await fleet.settle(300, 15_000);
      await fleet.reconnect(i);
      await fleet.settle(500, 60_000);
      const back = (await h.admin.listRoutes(who)).find((r) => r.nodeId === primary.nodeId && r.prefix === prefix);
      if (back?.primary) run.flapBacks++;
    }
    run.cpuEvents = sampleGroup(h.pids()).cpuSeconds - cpu0;
    run.streamsEnded = fleet.streamsEnded;
    log(`failover N=${n}: ${events} failovers measured`);
  } catch (e) {
    run.error = (e as Error).message;
    log(`failover N=${n} failed: ${run.error}\n${h.logs().slice(-3000)}`);
  } finally {
    fleet?.close();
    await h.stop();
  }
  return run;
}

async function failoverScenario(): Promise<void> {
  const routers = args.int('routers', 50);
  const prefixes = args.int('prefixes', 10);
  const policyFile = args.str('policy', '');
  const policy = policyFile ? fs.readFileSync(policyFile, 'utf8') : defaultFailoverPolicy();
  if (routers < 2 * prefixes) throw new Error('--routers must be at least twice --prefixes (a failover needs a second router)');
  process.stdout.write(header('Control plane: subnet-router failover (hse)', { 'redis-server': ['redis-server', ['--version']] }));
  process.stdout.write(
    `N = ${sizes.join(', ')}; ${routers} subnet routers, ${routers / prefixes} per prefix for ${prefixes} prefixes; ${events} failovers per N; policy: ${policyFile || 'allow all + autoApprovers for the routers'}; load client in one process on the same machine\n\n`,
  );
  const runs: FailoverRun[] = [];
  for (const n of sizes) runs.push(await runFailover(n, routers, prefixes, policy));
  const rowsOut = runs.map((r) => {
    const st = eventStats(r.events);
    const lat = r.events.flatMap((x) => x.latencies);
    return [
      r.n,
      r.events.length,
      fmtMs(st.p50),
      fmtMs(st.p99),
      fmtMs(st.all),
      fmtMs(lat.length ? Math.max(...lat) : NaN),
      st.missing,
      r.flapBacks,
      fmtNum(r.cpuEvents, 2),
    ];
  });
  process.stdout.write(
    `${table(['N', 'failovers', 'new primary → stream p50', 'p99', 'all streams (median)', 'slowest stream', 'deliveries missing', 'flap-backs', 'server CPU s'], rowsOut)}\n\n`,
  );
  for (const r of runs) if (r.error) process.stdout.write(`N=${r.n}: FAILED: ${r.error.split('\n')[0]}\n`);
  for (const r of runs) {
    process.stdout.write(
      `N=${r.n}: streams ended early ${r.streamsEnded}; before the failovers, the online fan-out took ${fmtMs(r.settleMs)} to settle, after which ${r.onlineMissing} streams missed some online peer\n`,
    );
  }
  process.stdout.write('goal: p99 ≤ 2 s\n');
}
