// Relay mesh: what crossing the mesh costs. Two relays (each behind its own router, as in two images), meshed both
// ways with a shared mesh key. The same load as bench/relay.ts (bench/derp/load.ts: 10 client pairs, 1400-byte
// packets, 256 in flight per pair; 64-byte echo round trips idle and under that load), once with senders and
// receivers on relay A ("within one relay"), once with the senders on A and the receivers on B ("across the mesh":
// client → router A → relay A → mesh link → router B → relay B → router B → client). Admission off
// (HSE_DERP_VERIFY_CLIENTS=off), so no Redis.
//
//   node bench/relay-mesh.ts [--seconds=5]
import crypto from 'node:crypto';
import type { DerpConn, DerpTarget } from './derp/derp-conn.ts';
import { type LoadResult, throughput } from './derp/load.ts';
import { parseArgs } from './lib/args.ts';
import { type Hse, startHse } from './lib/hse.ts';
import { setTimeout as sleep } from 'node:timers/promises';
import { fmtMs, fmtNum, header, percentile, ratio, table } from './lib/report.ts';
import { freePort } from '../test/harness/process.ts';

const args = parseArgs(process.argv.slice(2));
const seconds = args.int('seconds', 5);
const PAIRS = 10;
const PACKET = 1400;
const log = (s: string) => process.stderr.write(`[relay-mesh] ${s}\n`);

/** Until `b` has received a packet from `a` (the mesh learns of a new client a moment after it connects). */
async function reachable(a: DerpConn, b: DerpConn): Promise<void> {
  const before = b.packets;
  const deadline = Date.now() + 10_000;
  while (b.packets === before) {
    if (Date.now() > deadline) throw new Error('a client on one relay never reached a client on the other');
    a.send(b.publicKey, Buffer.from('hello'));
    await sleep(20);
  }
}

/** Every sender reaches its receiver, and the echo probe works both ways; then the counters start from zero. */
async function settle(conns: DerpConn[]): Promise<void> {
  const [probeA, probeB, ...rest] = conns;
  const senders = rest.slice(0, PAIRS);
  const receivers = rest.slice(PAIRS);
  await reachable(probeA, probeB);
  await reachable(probeB, probeA);
  await Promise.all(senders.map((s, i) => reachable(s, receivers[i])));
  for (const c of conns) {
    c.packets = 0;
    c.packetBytes = 0;
  }
}

const meshKey = crypto.randomBytes(32).toString('hex');
const [portA, portB] = [await freePort(), await freePort()];
const common = { HSE_DERP_VERIFY_CLIENTS: 'off', HSE_DERP_MESH_KEY: meshKey };
let A: Hse | null = null;
let B: Hse | null = null;
let within: LoadResult;
let across: LoadResult;
try {
  A = await startHse({ processes: ['relay', 'router'], port: portA, env: { ...common, HSE_DERP_MESH_WITH: `http://127.0.0.1:${portB}` } });
  B = await startHse({ processes: ['relay', 'router'], port: portB, env: { ...common, HSE_DERP_MESH_WITH: `http://127.0.0.1:${portA}` } });
  await A.servers.relay!.waitFor(/mesh link up/, 30_000);
  await B.servers.relay!.waitFor(/mesh link up/, 30_000);
  const a: DerpTarget = { host: '127.0.0.1', port: A.port };
  const b: DerpTarget = { host: '127.0.0.1', port: B.port };
  log('within relay A');
  within = await throughput(a, a, { pairs: PAIRS, packet: PACKET, seconds, settle });
  log('across the mesh, A to B');
  across = await throughput(a, b, { pairs: PAIRS, packet: PACKET, seconds, settle });
} catch (e) {
  log(`${A?.logs().slice(-3000) ?? ''}\n${B?.logs().slice(-3000) ?? ''}`);
  throw e;
} finally {
  await B?.stop();
  await A?.stop();
}

process.stdout.write(header('Relay mesh: within one relay vs across the mesh', {}));
process.stdout.write(
  `${PAIRS} client pairs, ${PACKET}-byte packets, ${seconds} s per measurement; one client process for every connection, sharing the machine with both relays\n\n`,
);
type Row = [string, (r: LoadResult) => number, (v: number) => string];
const rows: Row[] = [
  ['packets/s delivered', (r) => r.pps, (v) => fmtNum(v)],
  ['Mbit/s delivered (packet bytes)', (r) => r.mbps, (v) => fmtNum(v)],
  ['packets/s sent (≤ 256 in flight per pair)', (r) => r.sentPps, (v) => fmtNum(v)],
  ['RTT idle p50 (echo: there and back)', (r) => percentile(r.rttIdle, 50), fmtMs],
  ['RTT idle p99', (r) => percentile(r.rttIdle, 99), fmtMs],
  ['RTT under load p50', (r) => percentile(r.rttLoad, 50), fmtMs],
  ['RTT under load p99', (r) => percentile(r.rttLoad, 99), fmtMs],
  ['probes lost under load', (r) => r.lostProbes, (v) => fmtNum(v)],
  ['load client CPU (cores busy)', (r) => r.clientCpu, (v) => fmtNum(v, 2)],
];
process.stdout.write(
  `${table(
    ['metric', 'within relay A', 'across the mesh (A → B)', 'across/within'],
    rows.map(([label, get, fmt]) => [label, fmt(get(within)), fmt(get(across)), ratio(get(across), get(within))]),
  )}\n\n`,
);
process.stdout.write(
  'across the mesh, each packet passes two relays and three router hops; the echo crosses the mesh twice (A → B over A’s link, back over B’s).\n',
);
