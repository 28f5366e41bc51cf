// services/redis/run.sh as a real process: the embedded Redis's settings, its durability across kill -9, a stray
// redis-server still on the socket, signals, and the one-line refusals. run.sh runs a short Node step and then execs
// redis-server, so the process the supervisor holds is Redis itself.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import test from 'ava';
import { Redis } from 'ioredis';
import { redisCommand } from '../../services/redis/src/probe.ts';
import { runProcess, type Proc } from '../harness/process.ts';

const LAUNCHER = 'services/redis/run.sh';
const READY = /ready to accept connections/;

function setup() {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'hse-rl-'));
  const socket = path.join(dataDir, 'run', 'redis.sock');
  const clients: Redis[] = [];
  const procs: Proc[] = [];
  return {
    dataDir,
    socket,
    start(env: Record<string, string> = {}) {
      const p = runProcess(LAUNCHER, { HSE_DATA_DIR: dataDir, ...env });
      procs.push(p);
      return p;
    },
    client() {
      const c = new Redis({ path: socket, maxRetriesPerRequest: 1, retryStrategy: () => null });
      c.on('error', () => {});
      clients.push(c);
      return c;
    },
    async cleanup() {
      for (const c of clients) c.disconnect();
      // Whatever a failed assertion left running.
      await Promise.all(procs.map((p) => p.stop('SIGTERM', 5_000)));
      // …and anything else still answering on the socket.
      await redisCommand(socket, ['SHUTDOWN', 'NOSAVE']);
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** Running, as opposed to gone or a zombie waiting for whoever adopted it to reap it. */
function running(pid: number): boolean {
  try {
    return !/^State:\s+Z/m.test(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  } catch {
    return false;
  }
}

test('a write acknowledged by the embedded Redis survives kill -9 of redis-server', async (t) => {
  const s = setup();
  try {
    const first = s.start();
    await first.waitFor(READY);
    t.is(fs.readFileSync(`/proc/${first.proc.pid}/comm`, 'utf8').trim(), 'redis-server', 'run.sh became redis-server');
    t.regex(first.output(), /INFO {2}redis: starting redis-server conf=\S+redis\.conf/);
    const c = s.client();
    t.deepEqual(await c.config('GET', 'appendfsync'), ['appendfsync', 'always']);
    t.deepEqual(await c.config('GET', 'port'), ['port', '0']);
    t.deepEqual(await c.config('GET', 'dir'), ['dir', path.join(s.dataDir, 'redis')]);
    t.is(fs.statSync(s.socket).mode & 0o777, 0o700);
    t.is(fs.statSync(path.join(s.dataDir, 'run')).mode & 0o777, 0o700);
    for (let i = 0; i < 100; i++) await c.set(`node:${i}`, `registered-${i}`);
    first.proc.kill('SIGKILL');
    t.is(await first.exited(), null);
    t.is(first.proc.signalCode, 'SIGKILL');

    const second = s.start();
    await second.waitFor(READY);
    const c2 = s.client();
    t.is(await c2.get('node:99'), 'registered-99');
    t.is(await c2.dbsize(), 100);
    t.is(await second.stop(), 0);
    t.regex(second.output(), /ready to exit, bye bye/);
    t.false(fs.existsSync(s.socket), 'redis-server removed its socket on SIGTERM');
  } finally {
    await s.cleanup();
  }
});

test('a redis-server still running on the socket (its supervisor gone) is shut down before a new one starts', async (t) => {
  const s = setup();
  try {
    const stray = s.start();
    await stray.waitFor(READY);
    await s.client().set('k', 'v');

    const second = s.start();
    t.is(await stray.exited(), 0, 'the stray one was shut down cleanly');
    await second.waitFor(READY);
    t.regex(second.output(), /a redis-server from an earlier start is still running/);
    t.true(running(second.proc.pid!));
    t.is(await s.client().get('k'), 'v');
    await second.stop();
  } finally {
    await s.cleanup();
  }
});

test('SIGINT (pm2’s default stop signal) stops Redis cleanly too', async (t) => {
  const s = setup();
  try {
    const p = s.start();
    await p.waitFor(READY);
    t.is(await p.stop('SIGINT'), 0);
  } finally {
    await s.cleanup();
  }
});

test('redis-server not installed: one line saying what to install, exit 2', async (t) => {
  const s = setup();
  try {
    const p = s.start({ PATH: '/nonexistent' });
    t.is(await p.exited(), 2);
    const lines = p.output().trimEnd().split('\n');
    t.is(lines.length, 1, p.output());
    t.is(lines[0], 'hse redis: redis-server is not installed; install it with: apt-get install redis-server (or set HSE_REDIS_URL to an external Redis)');
  } finally {
    await s.cleanup();
  }
});

test('a refused configuration: one line, exit 2, nothing started', async (t) => {
  const s = setup();
  try {
    const p = s.start({ HSE_TRUSTED_PROXIES: '::/0' });
    t.is(await p.exited(), 2);
    t.regex(p.output(), /^hse redis: refused configuration: HSE_TRUSTED_PROXIES: "::\/0" trusts every IPv6 address/);
    t.false(fs.existsSync(path.join(s.dataDir, 'redis')));
  } finally {
    await s.cleanup();
  }
});
