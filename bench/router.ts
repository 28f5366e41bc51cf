// Router vs nginx, to the same upstream, on loopback.
//   upstream     a separate nginx (1 worker) answering `200 ok` from a Unix socket at the coordination service's
//                path in hse's run dir, so the router forwards "/" to it; it also listens on a loopback port for the
//                direct measurement. It is far faster than either proxy, so the proxy is what is measured.
//   proxies      our router: one Node process (the default), then two sharing the port (HSE_ROUTER_PROCESSES=2,
//                SO_REUSEPORT); nginx with the location block of our own example
//                (advanced/proxy/nginx/hse.conf: HTTP/1.1 upstream, Upgrade/Connection mapping, buffering off),
//                once with Debian's default `worker_processes auto` and once with 1 worker (like the router).
//                The router keeps its upstream connections alive; the example opens a fresh one per request (its
//                map sends "Connection: close" for non-upgrade requests), as operators run it.
//   load         wrk, 1 thread, keep-alive: 64 connections for requests/s and latency, then 1 connection for the
//                latency a request pays when nothing queues ("added" = proxy minus direct).
//   long-polls   --polls idle requests (default 10,000, fewer when the open-file limit cannot hold two sockets per
//                request in the proxy) held open through the router, then through nginx; RSS growth of the proxy.
//
//   node bench/router.ts [--seconds=10] [--polls=10000]
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from './lib/args.ts';
import { startHse } from './lib/hse.ts';
import { startNginx, type Nginx } from './lib/nginx.ts';
import { missingPeers, PEERS } from './lib/peers.ts';
import { sampleGroup } from './lib/sampling.ts';
import { fmtMiB, fmtMs, fmtNum, header, ratio, table } from './lib/report.ts';
import { wrk, type WrkResult } from './router/wrk.ts';
import { pool } from '../test/harness/pool.ts';
import { cpuSecondsOf } from '../test/harness/proc.ts';
import { freePorts, HEAD_AND_TAIL, NODE, ROOT, startProcess } from '../test/harness/process.ts';

const args = parseArgs(process.argv.slice(2));
const seconds = args.int('seconds', 10);
const log = (s: string) => process.stderr.write(`[router] ${s}\n`);

function openFileLimit(): number {
  const m = /^Max open files\s+(\d+)/m.exec(fs.readFileSync('/proc/self/limits', 'utf8'));
  return m ? Number(m[1]) : 1024;
}
// The proxy holds two sockets per long-poll (client and upstream); keep some room for everything else it opens.
const pollLimit = Math.floor((openFileLimit() - 300) / 2);
const polls = Math.min(args.int('polls', 10_000), pollLimit);

/** The example's location block, minus TLS; `upstream` names a Unix socket. */
function proxyHttp(port: number, socket: string): string {
  return `
  map $http_upgrade $connection_upgrade { default upgrade; '' close; }
  upstream hse { server unix:${socket}; }
  server {
    listen 127.0.0.1:${port};
    location / {
      proxy_pass http://hse;
      proxy_http_version 1.1;
      proxy_set_header Upgrade           $http_upgrade;
      proxy_set_header Connection        $connection_upgrade;
      proxy_set_header Host              $host;
      proxy_set_header X-Forwarded-For   $proxy_add_x_forwarded_for;
      proxy_set_header X-Forwarded-Proto $scheme;
      proxy_buffering         off;
      proxy_request_buffering off;
      proxy_read_timeout 3600s;
      proxy_send_timeout 3600s;
      client_max_body_size 0;
    }
  }`;
}

interface Target {
  name: string;
  url: string;
  pids: () => Record<string, number>;
}

interface Measured {
  loaded: WrkResult;
  single: WrkResult;
  cpuSeconds: number;
}

async function measure(t: Target): Promise<Measured> {
  log(`${t.name}: warm-up, then ${seconds} s at 64 connections and ${Math.max(3, seconds / 2)} s at 1`);
  await wrk(t.url, { connections: 64, seconds: 2 });
  const pids = Object.values(t.pids());
  const cpu0 = pids.reduce((s, p) => s + cpuSecondsOf(p), 0);
  const loaded = await wrk(t.url, { connections: 64, seconds });
  const cpuSeconds = pids.reduce((s, p) => s + cpuSecondsOf(p), 0) - cpu0;
  await sleep(500);
  const single = await wrk(t.url, { connections: 1, seconds: Math.max(3, seconds / 2) });
  return { loaded, single, cpuSeconds };
}

/** Opens `n` requests through the proxy and waits for each response's first bytes; returns the open sockets. */
async function holdPolls(port: number, n: number): Promise<net.Socket[]> {
  return pool(Array.from({ length: n }), 200, () => {
    return new Promise<net.Socket>((resolve, reject) => {
      const s = net.connect({ host: '127.0.0.1', port });
      s.once('error', reject);
      s.once('connect', () => s.write(`POST /machine/map HTTP/1.1\r\nHost: bench\r\nContent-Length: 0\r\n\r\n`));
      s.once('data', (d: Buffer) => {
        if (!d.toString('latin1').startsWith('HTTP/1.1 200')) reject(new Error(`long-poll answered ${d.toString('latin1').split('\r\n')[0]}`));
        else resolve(s);
      });
    });
  });
}

async function pollMemory(name: string, port: number, pids: () => Record<string, number>): Promise<{ perPollKiB: number; before: number; after: number }> {
  await sleep(1000);
  const before = sampleGroup(pids()).rssKiB;
  log(`${name}: holding ${polls} long-polls`);
  const socks = await holdPolls(port, polls);
  await sleep(3000);
  const after = sampleGroup(pids()).rssKiB;
  for (const s of socks) s.destroy();
  await sleep(2000);
  return { perPollKiB: (after - before) / polls, before, after };
}

// nginx is the upstream as well as a proxy measured, and wrk makes the load: without either there is nothing to show.
const missing = missingPeers([PEERS.nginx, PEERS.wrk]);
if (missing.length > 0) {
  for (const m of missing) log(m);
  log('nothing measured');
  process.exit(2);
}

process.stdout.write(header('Router: hse router vs nginx', { nginx: ['nginx', ['-v']], wrk: ['wrk', ['--version']] }));

const hse = await startHse({ processes: ['router'] });
const hse2 = await startHse({ processes: ['router'], routers: 2 });
const socket = hse.socket('coordination');
const socket2 = hse2.socket('coordination');
const routerPids = (h: typeof hse) => () => Object.fromEntries(Object.entries(h.pids()).filter(([n]) => n.startsWith('router')));
const [upPort, ngPort, ng1Port] = await freePorts(3);
let upstream: Nginx | null = null;
let nginxAuto: Nginx | null = null;
let nginx1: Nginx | null = null;
const results: Record<string, Measured> = {};
let routerPolls: Awaited<ReturnType<typeof pollMemory>> | null = null;
let router2Polls: Awaited<ReturnType<typeof pollMemory>> | null = null;
let nginxPolls: Awaited<ReturnType<typeof pollMemory>> | null = null;
try {
  upstream = await startNginx('upstream', {
    workers: 1,
    http: `  server {
    listen unix:${socket};
    listen unix:${socket2};
    listen 127.0.0.1:${upPort};
    location / { default_type text/plain; return 200 "ok\\n"; }
  }`,
  });
  nginxAuto = await startNginx('proxy', { workers: 'auto', http: proxyHttp(ngPort, socket), workerConnections: 20_000 });
  nginx1 = await startNginx('proxy1', { workers: 1, http: proxyHttp(ng1Port, socket), workerConnections: 20_000 });
  const targets: Target[] = [
    { name: 'direct', url: `http://127.0.0.1:${upPort}/`, pids: () => upstream!.pids() },
    { name: 'hse router', url: `${hse.url}/`, pids: routerPids(hse) },
    { name: 'hse router ×2', url: `${hse2.url}/`, pids: routerPids(hse2) },
    { name: 'nginx (auto workers)', url: `http://127.0.0.1:${ngPort}/`, pids: () => nginxAuto!.pids() },
    { name: 'nginx (1 worker)', url: `http://127.0.0.1:${ng1Port}/`, pids: () => nginx1!.pids() },
  ];
  for (const t of targets) results[t.name] = await measure(t);

  // Long-polls: a holder process takes the upstream socket instead of the 200-ok nginx.
  await upstream.stop();
  upstream = null;
  await nginx1.stop();
  nginx1 = null;
  const holders = [socket, socket2].map((s, i) =>
    startProcess(`long-poll-holder-${i + 1}`, NODE, [path.join(ROOT, 'bench/router/long-poll-holder.ts'), s], { keep: HEAD_AND_TAIL }),
  );
  try {
    await Promise.all(holders.map((h) => h.waitFor(/listening/, 30_000)));
    routerPolls = await pollMemory('hse router', hse.port, routerPids(hse));
    router2Polls = await pollMemory('hse router ×2', hse2.port, routerPids(hse2));
    nginxPolls = await pollMemory('nginx (auto workers)', ngPort, () => nginxAuto!.pids());
  } finally {
    await Promise.all(holders.map((h) => h.stop()));
  }
} finally {
  await upstream?.stop();
  await nginxAuto?.stop();
  await nginx1?.stop();
  await hse.stop();
  await hse2.stop();
}

const direct = results.direct;
const rows = Object.entries(results).map(([name, r]) => [
  name,
  fmtNum(r.loaded.rps),
  name === 'direct' ? '–' : ratio(r.loaded.rps, results['nginx (auto workers)'].loaded.rps),
  fmtNum(r.loaded.rps / Math.max(r.cpuSeconds / seconds, 0.01)),
  fmtMs(r.loaded.p50Ms),
  fmtMs(r.loaded.p99Ms),
  name === 'direct' ? '–' : fmtMs(r.loaded.p99Ms - direct.loaded.p99Ms),
  fmtMs(r.single.p50Ms),
  name === 'direct' ? '–' : fmtMs(r.single.p50Ms - direct.single.p50Ms),
  name === 'direct' ? '–' : fmtMs(r.single.p99Ms - direct.single.p99Ms),
  fmtNum(r.loaded.errors + r.single.errors),
]);
process.stdout.write(
  `${table(
    ['path', 'req/s @64', 'vs nginx auto', 'req/s per busy core', 'p50 @64', 'p99 @64', 'p99 added @64', 'p50 @1', 'p50 added @1', 'p99 added @1', 'errors'],
    rows,
  )}\n\n`,
);
const pollRow = (name: string, p: typeof routerPolls) =>
  p
    ? [name, fmtNum(polls), fmtMiB(p.before), fmtMiB(p.after), `${fmtNum(p.perPollKiB, 1)} KiB`, fmtMiB(p.perPollKiB * 10_000)]
    : [name, '–', '–', '–', '–', '–'];
process.stdout.write(
  `${table(['proxy', 'long-polls held', 'RSS before', 'RSS holding', 'per long-poll', 'per 10,000'], [pollRow('hse router', routerPolls), pollRow('hse router ×2', router2Polls), pollRow('nginx (auto workers)', nginxPolls)])}\n\n`,
);
process.stdout.write(
  `req/s per busy core: requests/s divided by the CPU the proxy processes used during the 64-connection run (nginx: master + workers; hse ×2: both routers).\n` +
    `hse router ×2: HSE_ROUTER_PROCESSES=2, two router processes on one port (SO_REUSEPORT); the image's default is one.\n` +
    `wrk shares the 2 cores with the proxy and the upstream. ${polls < 10_000 ? `Long-polls: ${polls} held (open-file limit ${openFileLimit()}, two sockets per request in the proxy); "per 10,000" scales the measured growth.` : ''}\n`,
);
