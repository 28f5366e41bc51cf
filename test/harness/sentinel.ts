// Redis with Sentinel for tests, all Debian's own programs on loopback TCP (Sentinel needs TCP: it finds the replicas
// and the other sentinels by their announced addresses): a primary and one replica (`redis-server`), and three
// sentinels (`redis-sentinel`, the redis-sentinel package) watching the primary under the name `hse` with quorum 2.
// The tests kill -9 the primary and watch the sentinels promote the replica, then start the old primary again, which
// the sentinels turn into a replica of the new one — so the set is ready for the next failover.
//
// Timings are shortened for tests (a primary is "down" after 1 s without an answer instead of 30 s); what an operator
// runs is in advanced/ha.md. No persistence: a restarted server gets everything from the primary by full sync.
//
//   const rs = await startSentinelSet();
//   env: { HSE_REDIS_SENTINELS: rs.sentinelsEnv, HSE_REDIS_SENTINEL_NAME: rs.name }
//   const killed = await rs.killPrimary();         // kill -9
//   const now = await rs.waitForFailover(killed);  // the address the sentinels give after the switch
//   await rs.restart(killed);                      // comes back as a replica of `now`
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { findBinary, freePorts, HEAD_AND_TAIL, type Proc, startProcess } from './process.ts';

export const SENTINEL_INSTALL = 'apt-get install redis-sentinel';

/** null when redis-server and redis-sentinel can run here, else what to install. */
export function missingSentinel(): string | null {
  if (!findBinary('redis-server')) return 'redis-server not found; install it: apt-get install redis-server';
  if (!findBinary('redis-sentinel')) return `redis-sentinel not found; install it: ${SENTINEL_INSTALL}`;
  return null;
}

export interface DataServer {
  port: number;
  dir: string;
  proc: Proc | null;
  /** Whether its process is running. */
  readonly up: boolean;
}

export interface SentinelSet {
  /** The name the sentinels know the primary by (HSE_REDIS_SENTINEL_NAME). */
  name: string;
  /** "127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3" (HSE_REDIS_SENTINELS). */
  sentinelsEnv: string;
  sentinelPorts: number[];
  servers: DataServer[];
  sentinels: Proc[];
  /** The primary's port as the sentinels report it (asks them one after another until one answers). */
  primaryPort(): Promise<number>;
  /** A plain connection to one data server (the caller disconnects it). */
  client(port: number): Redis;
  /** kill -9 of the current primary; resolves with its port once it is gone. */
  killPrimary(): Promise<number>;
  /** Waits until a majority of sentinels name another primary than `oldPort` and it answers as a primary. */
  waitForFailover(oldPort: number, ms?: number): Promise<number>;
  /** Starts a killed server again (same port, empty) as a replica of the current primary. */
  restart(port: number): Promise<void>;
  /**
   * Waits until the primary has `n` replicas online (synchronised, taking the stream) and the sentinels reach them.
   * `linkUp`: and the sentinels have heard from the replica itself that its link is up (its INFO, every 10 s while
   * the primary is well) — what an operator's SENTINEL FAILOVER needs; a failover after a primary died does not.
   */
  waitForReplicas(n?: number, ms?: number, opts?: { linkUp?: boolean }): Promise<void>;
  /**
   * Cuts the replica off the primary and keeps it from reconnecting (SIGSTOP, then the primary drops its replication
   * connection): what a network blip between them looks like. Writes the primary takes meanwhile reach no replica.
   * `resume` lets it run again (it reconnects, if there is still a primary to reconnect to).
   */
  cutReplica(port: number): Promise<void>;
  resume(port: number): void;
  /** How many times the primary changed so far (the +switch-master lines a sentinel logged). */
  switches(): number;
  /** Everything the processes printed, for a failing test. */
  logs(): string;
  stop(): Promise<void>;
}

const NAME = 'hse';

function startServer(s: DataServer, replicaOf: number | null): void {
  s.proc = startProcess(
    `redis-server :${s.port}`,
    'redis-server',
    [
      '--port',
      String(s.port),
      '--bind',
      '127.0.0.1',
      '--dir',
      s.dir,
      '--save',
      '',
      '--appendonly',
      'no',
      // A replica's full sync starts at once (Redis waits 5 s by default, to serve several replicas with one transfer).
      '--repl-diskless-sync-delay',
      '0',
      ...(replicaOf === null ? [] : ['--replicaof', '127.0.0.1', String(replicaOf)]),
    ],
    { keep: HEAD_AND_TAIL },
  );
}

async function waitPing(port: number, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    const r = new Redis({ port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
    r.on('error', () => {});
    try {
      await r.connect();
      if ((await r.ping()) === 'PONG') return;
    } catch {
      // not yet
    } finally {
      r.disconnect();
    }
    await sleep(50);
  }
  throw new Error(`redis-server on 127.0.0.1:${port} did not answer PING within ${ms} ms`);
}

/** A flat [key, value, key, value, ...] reply as an object. */
function pairs(flat: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (let i = 0; i + 1 < flat.length; i += 2) out[flat[i]] = flat[i + 1];
  return out;
}

/** One short-lived connection, one command; null when it cannot be asked. */
async function ask<T>(port: number, fn: (r: Redis) => Promise<T>): Promise<T | null> {
  const r = new Redis({ port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null, connectTimeout: 2000 });
  r.on('error', () => {});
  try {
    await r.connect();
    return await fn(r);
  } catch {
    return null;
  } finally {
    r.disconnect();
  }
}

export async function startSentinelSet(opts: { downAfterMs?: number } = {}): Promise<SentinelSet> {
  const missing = missingSentinel();
  if (missing) throw new Error(missing);
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'hse-sentinel-'));
  const [p0, p1, ...sp] = await freePorts(5);
  const servers: DataServer[] = [p0, p1].map((port) => {
    const dir = path.join(root, `redis-${port}`);
    fs.mkdirSync(dir);
    const s: DataServer = {
      port,
      dir,
      proc: null,
      get up() {
        return s.proc !== null && s.proc.proc.exitCode === null && s.proc.proc.signalCode === null;
      },
    };
    return s;
  });
  startServer(servers[0], null);
  await waitPing(p0);
  startServer(servers[1], p0);
  await waitPing(p1);

  const sentinels: Proc[] = [];
  for (const port of sp) {
    const dir = path.join(root, `sentinel-${port}`);
    fs.mkdirSync(dir);
    const conf = path.join(dir, 'sentinel.conf');
    // Sentinel rewrites its configuration file as it learns the set (replicas, other sentinels, the new primary).
    fs.writeFileSync(
      conf,
      [
        `port ${port}`,
        'bind 127.0.0.1',
        `dir ${dir}`,
        `sentinel monitor ${NAME} 127.0.0.1 ${p0} 2`,
        `sentinel down-after-milliseconds ${NAME} ${opts.downAfterMs ?? 1000}`,
        `sentinel failover-timeout ${NAME} 6000`,
        `sentinel parallel-syncs ${NAME} 1`,
        '',
      ].join('\n'),
    );
    sentinels.push(startProcess(`redis-sentinel :${port}`, 'redis-sentinel', [conf], { keep: HEAD_AND_TAIL }));
  }
  for (const port of sp) await waitPing(port);

  /**
   * Whether every sentinel reaches `n` replicas (no down or disconnected flag). What the replica reports of itself the
   * sentinels learn from its INFO, every 10 s in calm times but every second once the primary is down, which is when
   * they need it.
   */
  async function sentinelsSeeReplicas(n: number, linkUp: boolean): Promise<boolean> {
    for (const port of sp) {
      const rows = await ask(port, (r) => r.call('SENTINEL', 'REPLICAS', NAME) as Promise<string[][]>);
      const fit = (rows ?? []).map(pairs).filter((x) => x.flags === 'slave' && (!linkUp || x['master-link-status'] === 'ok'));
      if (fit.length < n) return false;
    }
    return true;
  }

  const set: SentinelSet = {
    name: NAME,
    sentinelsEnv: sp.map((p) => `127.0.0.1:${p}`).join(','),
    sentinelPorts: sp,
    servers,
    sentinels,
    async primaryPort() {
      // The majority's answer: right after a failover one sentinel may still name the old primary for a moment.
      for (let i = 0; i < 100; i++) {
        const named = await Promise.all(
          sp.map((port) => ask(port, (r) => r.call('SENTINEL', 'get-master-addr-by-name', NAME) as Promise<[string, string] | null>)),
        );
        const ports = named.filter((a) => a !== null).map((a) => Number(a![1]));
        const major = ports.find((p) => ports.filter((q) => q === p).length >= 2);
        if (major !== undefined) return major;
        await sleep(100);
      }
      throw new Error(`no two sentinels agree on the primary\n${set.logs()}`);
    },
    client(port) {
      return new Redis({ port, host: '127.0.0.1', maxRetriesPerRequest: 1 });
    },
    async killPrimary() {
      const port = await set.primaryPort();
      const s = servers.find((x) => x.port === port)!;
      await s.proc?.stop('SIGKILL');
      return port;
    },
    async waitForFailover(oldPort, ms = 60_000) {
      const deadline = Date.now() + ms;
      while (Date.now() < deadline) {
        const named = await Promise.all(
          sp.map((port) => ask(port, (r) => r.call('SENTINEL', 'get-master-addr-by-name', NAME) as Promise<[string, string] | null>)),
        );
        const ports = named.filter((a) => a !== null).map((a) => Number(a![1]));
        const moved = ports.filter((p) => p !== oldPort);
        if (moved.length >= 2) {
          const role = await ask(moved[0], (r) => r.call('ROLE') as Promise<[string]>);
          if (role?.[0] === 'master') return moved[0];
        }
        await sleep(100);
      }
      throw new Error(`the sentinels did not replace the primary on :${oldPort} within ${ms} ms\n${set.logs()}`);
    },
    async restart(port) {
      const s = servers.find((x) => x.port === port)!;
      if (s.up) return;
      // Started as a replica of the current primary at once: left to the sentinels, a server that comes back saying it
      // is a primary is reconfigured only after several of their 10 s INFO rounds — and meanwhile it is an empty
      // primary (no persistence here), the hazard advanced/ha.md warns about.
      const primary = await set.primaryPort();
      if (primary === port) throw new Error(`the sentinels still name :${port} as the primary; wait for the failover before restarting it`);
      startServer(s, primary);
      await waitPing(port);
    },
    async waitForReplicas(n = 1, ms = 60_000, opts = {}) {
      const deadline = Date.now() + ms;
      let last = '';
      while (Date.now() < deadline) {
        const primary = await set.primaryPort().catch(() => 0);
        const info = primary ? await ask(primary, (r) => r.info('replication')) : null;
        last = info ?? '';
        const online = [...last.matchAll(/^slave\d+:.*state=online/gm)];
        // The sentinels must know them too (they learn replicas from the primary's INFO, every 10 s), or a failover
        // right now finds no replica to promote.
        if (/role:master/.test(last) && online.length >= n && (await sentinelsSeeReplicas(n, opts.linkUp ?? false))) return;
        await sleep(100);
      }
      throw new Error(`the primary did not get ${n} replica(s) in step within ${ms} ms; last INFO replication:\n${last}\n${set.logs()}`);
    },
    async cutReplica(port) {
      servers.find((x) => x.port === port)!.proc!.proc.kill('SIGSTOP');
      // Stopped, it still holds the connection and the kernel would buffer what the primary sends, to be read after
      // SIGCONT; dropping the connection on the primary's side is what keeps later writes from it.
      const primary = await set.primaryPort();
      const done = await ask(primary, (r) => r.call('CLIENT', 'KILL', 'TYPE', 'replica') as Promise<number>);
      if (!done) throw new Error(`could not drop the replication connection on the primary :${primary}`);
    },
    resume(port) {
      servers.find((x) => x.port === port)!.proc!.proc.kill('SIGCONT');
    },
    switches() {
      return Math.max(...sentinels.map((p) => (p.output().match(/\+switch-master/g) ?? []).length));
    },
    logs() {
      return [...servers.map((s) => s.proc), ...sentinels]
        .filter((p): p is Proc => p !== null)
        .map((p) => `----- ${p.name} -----\n${p.output().slice(-6000)}`)
        .join('\n');
    },
    async stop() {
      for (const s of servers) if (s.up) s.proc!.proc.kill('SIGCONT');
      await Promise.all([...sentinels.map((p) => p.stop('SIGKILL')), ...servers.map((s) => s.proc?.stop('SIGKILL'))]);
      fs.rmSync(root, { recursive: true, force: true });
    },
  };
  return set;
}
