// Relay: our DERP/STUN relay vs Tailscale's derper, on loopback, with one lean DERP client (bench/derp/derp-conn.ts)
// for both. Ours is measured through the router (clients reach /derp there; that is what users get) and, for the
// packet figures, also on the relay's own Unix socket, which shows what the router hop costs. Client admission is
// off for both (HSE_DERP_VERIFY_CLIENTS=off; derper's --verify-clients defaults to off).
//   throughput   10 client pairs, each sender keeps 256 1400-byte packets in flight to its receiver (a closed loop,
//                as a tunnel's congestion control makes it); packets/s and Mbit/s (packet bytes) counted at the
//                receivers over --seconds, after 1 s warm-up;
//   latency      one more pair: 64-byte packets echoed back through the relay (two relay hops per sample), one at a
//                time, idle and while the 10 pairs run;
//   memory       server RSS before and after --idle clients connect and finish the handshake, per 1,000 clients;
//   STUN         binding requests from 2 UDP sockets, 32 in flight each, answers per second.
//
// The figures of one run move by tens of percent on a shared VM, so by default the whole measurement runs 3 times
// (--runs), ours and derper alternating: rates are the median of the runs, RTT percentiles are over every sample of
// every run.
//
//   node bench/relay.ts [--seconds=5] [--idle=1000] [--runs=3] [--only=hse|derper]
import dgram from 'node:dgram';
import crypto from 'node:crypto';
import { DerpConn, type DerpTarget } from './derp/derp-conn.ts';
import { type LoadResult, throughput as measureThroughput } from './derp/load.ts';
import { isBindingSuccess } from './derp/stun.ts';
import { parseArgs } from './lib/args.ts';
import { startDerper } from './lib/derper.ts';
import { startHse } from './lib/hse.ts';
import { DERPER, missingPeers, PEERS } from './lib/peers.ts';
import { sampleGroup } from './lib/sampling.ts';
import { fmtMiB, fmtMs, fmtNum, header, percentile, ratio, table } from './lib/report.ts';
import { bindingRequest } from '../services/relay/src/stun.ts';
import { pool } from '../test/harness/pool.ts';
import { setTimeout as sleep } from 'node:timers/promises';

const args = parseArgs(process.argv.slice(2));
const seconds = args.int('seconds', 5);
const idleClients = args.int('idle', 1000);
const only = args.str('only', '');
const runs = args.int('runs', 3);
const PAIRS = 10;
const PACKET = 1400;
const log = (s: string) => process.stderr.write(`[relay] ${s}\n`);

interface Result extends LoadResult {
  idleKiBPer1000?: number;
  idleConnected?: number;
  stunPerSecond?: number;
}

function throughput(target: DerpTarget, serverPids: () => number[]): Promise<LoadResult> {
  return measureThroughput(target, target, { pairs: PAIRS, packet: PACKET, seconds, serverPids });
}

async function idleMemory(target: DerpTarget, pids: Record<string, number>): Promise<{ perThousandKiB: number; connected: number }> {
  await sleep(1000);
  const before = sampleGroup(pids).rssKiB;
  const conns = await pool(Array.from({ length: idleClients }), 50, () => DerpConn.connect(target));
  await sleep(3000);
  const after = sampleGroup(pids).rssKiB;
  for (const c of conns) c.close();
  await sleep(1000);
  return { perThousandKiB: ((after - before) / conns.length) * 1000, connected: conns.length };
}

async function stunRate(port: number): Promise<number> {
  const WINDOW = 32;
  let answers = 0;
  let counting = false;
  const sockets = await Promise.all(
    [0, 1].map(
      () =>
        new Promise<dgram.Socket>((resolve) => {
          const s = dgram.createSocket('udp4');
          s.bind(0, '127.0.0.1', () => resolve(s));
        }),
    ),
  );
  let running = true;
  const ask = (s: dgram.Socket) => s.send(bindingRequest(crypto.randomBytes(12)), port, '127.0.0.1');
  const state = sockets.map((s) => {
    const st = { answered: 0, lastSeen: 0 };
    s.on('message', (m: Buffer) => {
      if (!isBindingSuccess(m)) return;
      st.answered++;
      if (counting) answers++;
      if (running) ask(s);
    });
    for (let i = 0; i < WINDOW; i++) ask(s);
    return st;
  });
  // A lost datagram shrinks the window for good; refill it when a socket heard nothing for 100 ms.
  const refill = setInterval(() => {
    sockets.forEach((s, i) => {
      if (state[i].answered === state[i].lastSeen) for (let k = 0; k < WINDOW; k++) ask(s);
      state[i].lastSeen = state[i].answered;
    });
  }, 100);
  await sleep(1000);
  counting = true;
  const t0 = performance.now();
  await sleep(seconds * 1000);
  counting = false;
  const rate = answers / ((performance.now() - t0) / 1000);
  running = false;
  clearInterval(refill);
  for (const s of sockets) s.close();
  return rate;
}

async function measureHse(): Promise<{ router: Result; direct: Result }> {
  const hse = await startHse({ processes: ['relay', 'router'], env: { HSE_DERP_VERIFY_CLIENTS: 'off' } });
  try {
    const pids = hse.pids();
    log('hse: packets through the router');
    const viaRouter = await throughput({ host: '127.0.0.1', port: hse.port }, () => [pids.relay, pids.router]);
    log('hse: packets on the relay socket');
    const direct = await throughput({ socketPath: hse.socket('relay') }, () => [pids.relay]);
    log(`hse: ${idleClients} idle clients`);
    const mem = await idleMemory({ host: '127.0.0.1', port: hse.port }, pids);
    log('hse: STUN');
    const stun = await stunRate(hse.stunPort);
    return { router: { ...viaRouter, idleKiBPer1000: mem.perThousandKiB, idleConnected: mem.connected, stunPerSecond: stun }, direct };
  } catch (e) {
    log(hse.logs().slice(-3000));
    throw e;
  } finally {
    await hse.stop();
  }
}

async function measureDerper(): Promise<Result> {
  const d = await startDerper();
  try {
    const target = { host: '127.0.0.1', port: d.port };
    log('derper: packets');
    const t = await throughput(target, () => Object.values(d.pids()));
    log(`derper: ${idleClients} idle clients`);
    const mem = await idleMemory(target, d.pids());
    log('derper: STUN');
    const stun = await stunRate(d.stunPort);
    return { ...t, idleKiBPer1000: mem.perThousandKiB, idleConnected: mem.connected, stunPerSecond: stun };
  } catch (e) {
    log(d.server.output().slice(-3000));
    throw e;
  } finally {
    await d.stop();
  }
}

process.stdout.write(header('Relay: hse vs derper', { derper: [DERPER, ['--version']] }));
process.stdout.write(
  `${PAIRS} client pairs, ${PACKET}-byte packets, ${seconds} s per measurement; idle clients: ${idleClients}; one client process for every connection, sharing the machine with the server; ${runs} run(s), rates the median of the runs, RTT percentiles over every sample of every run\n\n`,
);

// A missing derper is said up front and after the table, a failing one after the table; ours is measured regardless.
const notMeasured = only === 'hse' ? [] : missingPeers([PEERS.derper]);
for (const m of notMeasured) log(`${m}; ${only === 'derper' ? 'nothing to measure' : 'measuring ours alone'}`);
if (only === 'derper' && notMeasured.length > 0) process.exit(2);
/** Several runs' results as one: every rate the median of the runs, RTT samples pooled, lost probes summed. */
function combine(rs: Result[]): Result {
  const med = (get: (r: Result) => number | undefined) =>
    percentile(
      rs.map((r) => get(r) ?? NaN),
      50,
    );
  return {
    pps: med((r) => r.pps),
    mbps: med((r) => r.mbps),
    sentPps: med((r) => r.sentPps),
    rttIdle: rs.flatMap((r) => r.rttIdle),
    rttLoad: rs.flatMap((r) => r.rttLoad),
    lostProbes: rs.reduce((n, r) => n + r.lostProbes, 0),
    clientCpu: med((r) => r.clientCpu),
    serverCpu: med((r) => r.serverCpu),
    idleKiBPer1000: med((r) => r.idleKiBPer1000),
    stunPerSecond: med((r) => r.stunPerSecond),
  };
}

const hseRuns: { router: Result; direct: Result }[] = [];
const derperRuns: Result[] = [];
for (let i = 1; i <= runs; i++) {
  if (runs > 1) log(`run ${i} of ${runs}`);
  if (only !== 'derper') hseRuns.push(await measureHse());
  if (only !== 'hse' && notMeasured.length === 0) {
    try {
      derperRuns.push(await measureDerper());
    } catch (e) {
      notMeasured.push(`it failed: ${(e as Error).message.split('\n')[0]}`);
    }
  }
}
const hse = hseRuns.length > 0 ? { router: combine(hseRuns.map((r) => r.router)), direct: combine(hseRuns.map((r) => r.direct)) } : null;
const derper: Result | null = derperRuns.length > 0 ? combine(derperRuns) : null;

type Row = [string, (r: Result) => number, (v: number) => string];
const rowsDef: Row[] = [
  ['packets/s delivered', (r) => r.pps, (v) => fmtNum(v)],
  ['Mbit/s delivered (packet bytes)', (r) => r.mbps, (v) => fmtNum(v)],
  ['packets/s sent (≤ 256 in flight per pair)', (r) => r.sentPps, (v) => fmtNum(v)],
  ['RTT idle p50 (2 relay hops)', (r) => percentile(r.rttIdle, 50), fmtMs],
  ['RTT idle p99', (r) => percentile(r.rttIdle, 99), fmtMs],
  ['RTT under load p50', (r) => percentile(r.rttLoad, 50), fmtMs],
  ['RTT under load p99', (r) => percentile(r.rttLoad, 99), fmtMs],
  ['probes lost under load', (r) => r.lostProbes, (v) => fmtNum(v)],
  ['memory per 1,000 idle clients', (r) => r.idleKiBPer1000 ?? NaN, fmtMiB],
  ['STUN answers/s', (r) => r.stunPerSecond ?? NaN, (v) => fmtNum(v)],
  ['server CPU under load (cores busy)', (r) => r.serverCpu, (v) => fmtNum(v, 2)],
  ['load client CPU (cores busy)', (r) => r.clientCpu, (v) => fmtNum(v, 2)],
];
const rows = rowsDef.map(([label, get, fmt]) => {
  const a = hse ? get(hse.router) : NaN;
  const d = hse ? get(hse.direct) : NaN;
  const b = derper ? get(derper) : NaN;
  return [label, fmt(a), fmt(d), fmt(b), ratio(a, b)];
});
process.stdout.write(`${table(['metric', 'hse via router', 'hse relay socket', 'derper', 'hse (router)/derper'], rows)}\n\n`);
process.stdout.write(
  'memory: RSS growth of the server processes (hse: relay + router, which holds both ends of each tunnel; derper: its one process) divided by the clients that connected.\n' +
    'hse relay socket: the same relay reached on its Unix socket, no router in between (not how users reach it); memory and STUN are not measured there.\n' +
    'STUN is UDP straight to each relay (the router is HTTP only).\n',
);
if (notMeasured.length > 0) process.stdout.write(`derper not measured: ${notMeasured.join('; ')}.\n`);
