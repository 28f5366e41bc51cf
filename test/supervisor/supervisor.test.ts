// ecosystem.config.js under the real pm2: a refused configuration is left stopped (not restarted in a loop), the
// embedded Redis comes up as the store on its Unix socket and survives kill -9 with its data, and the process list
// follows HSE_REDIS_URL and HSE_DERP_MODE.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import test from 'ava';
import { Redis } from 'ioredis';
import { freePort, NODE, ROOT } from '../harness/process.ts';
import { request } from '../router/client.ts';
import { Pm2 } from './pm2.ts';
import { FIRST_MS, MAX_MS, RESET_AFTER_MS, restartDelay, stoppedCleanly } from '../../shared/restart-backoff.ts';

const run = promisify(execFile);

function tempDataDir(): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'hse-sup-'));
}

test('restart backoff: 0.5 s growing ×1.5 to 15 s for quick exits, none after 30 s running or a clean stop', (t) => {
  const runDir = tempDataDir();
  t.teardown(() => fs.rmSync(runDir, { recursive: true, force: true }));
  let now = 1_000_000;
  const waits: number[] = [];
  t.is(restartDelay(runDir, 'router', now), 0, 'the first start waits for nothing');
  for (let i = 0; i < 12; i++) {
    now += waits.at(-1) ?? 0;
    now += 1_000; // ran a second, then exited
    waits.push(restartDelay(runDir, 'router', now));
  }
  t.deepEqual(waits.slice(0, 4), [FIRST_MS, 750, 1125, 1687]);
  t.is(Math.max(...waits), MAX_MS);
  t.is(waits.at(-1), MAX_MS);
  now += MAX_MS + RESET_AFTER_MS;
  t.is(restartDelay(runDir, 'router', now), 0, 'a process that ran 30 s counts as healthy again');
  t.is(restartDelay(runDir, 'router', now + 1_000), FIRST_MS);
  stoppedCleanly(runDir, 'router');
  t.is(restartDelay(runDir, 'router', now + 2_000), 0, 'a clean stop is not a failure');
  t.is(restartDelay(runDir, 'console', now + 2_000), 0, 'each process has its own');
});

test('a refused configuration exits 2 once and is not restarted', async (t) => {
  const dataDir = tempDataDir();
  const pm2 = new Pm2({ HSE_DATA_DIR: dataDir, HSE_HTTP_PORT: '99999' });
  try {
    await pm2.cli('start', 'ecosystem.config.js', '--only', 'redis,router');
    for (const name of ['router', 'redis']) {
      const a = await pm2.waitApp(name, (x) => x.pm2_env.exit_code === 2, 'exit with status 2');
      // pm2's first backoff delay is 0.5 s; after several times that a restart would long have happened.
      await sleep(3_000);
      const later = await pm2.app(name);
      t.is(later.pm2_env.restart_time, 0, `${name} was not restarted`);
      t.is(later.pid, 0, `${name} is not running`);
      // And pm2 says so: `pm2 ls` shows it stopped (not "waiting restart"), and its log does not promise a restart.
      t.is(later.pm2_env.status, 'stopped', `${name} as pm2 ls shows it`);
      const daemonLog = fs.readFileSync(path.join(pm2.home, 'pm2.log'), 'utf8');
      t.notRegex(daemonLog, new RegExp(`\\[${name}:\\d+\\] will restart`), daemonLog);
      const refusals = pm2
        .log(a)
        .split('\n')
        .filter((l) => l.includes('refused configuration'));
      t.is(refusals.length, 1, pm2.log(a));
      t.regex(refusals[0], new RegExp(`hse ${name}: refused configuration: HSE_HTTP_PORT: "99999" is not a TCP/UDP port`));
    }
  } finally {
    await pm2.kill();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
});

test("pm2's home, its log directory and the apps' log files are private to the user running it", async (t) => {
  const dataDir = tempDataDir();
  const port = await freePort();
  const pm2 = new Pm2({ HSE_DATA_DIR: dataDir, HSE_HTTP_PORT: String(port) });
  try {
    // As pm2 leaves a fresh home (mkdir with the usual umask): readable by everyone.
    fs.chmodSync(pm2.home, 0o755);
    await pm2.cli('start', 'ecosystem.config.js', '--only', 'router');
    const router = await pm2.waitApp('router', (a) => /listening on/.test(pm2.log(a)), 'the router listening');
    const files = [router.pm2_env.pm_out_log_path, router.pm2_env.pm_err_log_path];
    for (const dir of [pm2.home, ...new Set(files.map((f) => path.dirname(f)))]) {
      t.is(fs.statSync(dir).mode & 0o077, 0, `${dir} is closed to group and others`);
    }
    for (const f of files) {
      t.is(fs.statSync(f).mode & 0o077, 0, `${f} is readable by its owner only`);
      t.is(await readAsNobody(f), 'EACCES', f);
    }
  } finally {
    await pm2.kill();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
});

/** Tries to read a file as the unprivileged user `nobody`: "read" or the error code. */
async function readAsNobody(file: string): Promise<string> {
  const code = `try{require('fs').readFileSync(${JSON.stringify(file)});console.log('read')}catch(e){console.log(e.code)}`;
  const { stdout } = await run(NODE, ['-e', code], { uid: 65534, gid: 65534, env: { PATH: process.env.PATH } });
  return stdout.trim();
}

test('pm2 runs the embedded Redis (AOF, fsync always, Unix socket only) and the router; Redis keeps its data across kill -9', async (t) => {
  const dataDir = tempDataDir();
  const port = await freePort();
  const pm2 = new Pm2({ HSE_DATA_DIR: dataDir, HSE_HTTP_PORT: String(port) });
  const socket = path.join(dataDir, 'run', 'redis.sock');
  let redis: Redis | null = null;
  try {
    await pm2.cli('start', 'ecosystem.config.js', '--only', 'redis,router');
    const redisApp = await pm2.waitApp('redis', (a) => /ready to accept connections/.test(pm2.log(a)), 'the embedded Redis ready');
    await pm2.waitApp('router', (a) => /listening on/.test(pm2.log(a)), 'the router listening');

    redis = new Redis({ path: socket, maxRetriesPerRequest: 50, retryStrategy: () => 100 });
    // Refused connects while Redis restarts below are expected; the commands retry.
    redis.on('error', () => {});
    t.deepEqual(await redis.config('GET', 'appendonly'), ['appendonly', 'yes']);
    t.deepEqual(await redis.config('GET', 'appendfsync'), ['appendfsync', 'always']);
    t.deepEqual(await redis.config('GET', 'port'), ['port', '0']);
    t.is(fs.statSync(socket).mode & 0o777, 0o700);
    t.true(fs.existsSync(path.join(dataDir, 'redis', 'appendonlydir')));
    await redis.set('hse:test:registration', 'acknowledged');

    // The router is up; the coordination service was not started, so it answers 503 naming it.
    const r = await request(`http://127.0.0.1:${port}/key`);
    t.is(r.status, 503);
    t.regex(r.body, /coordination service is unavailable/);

    // The app's process is redis-server itself (run.sh execs it): no Node process stays resident for Redis.
    t.is(fs.readFileSync(`/proc/${redisApp.pid}/comm`, 'utf8').trim(), 'redis-server');
    // kill -9 it: pm2 starts it again, and the data is still there.
    process.kill(redisApp.pid, 'SIGKILL');
    await pm2.waitApp('redis', (a) => a.pm2_env.restart_time >= 1 && a.pm2_env.status === 'online', 'a restart of the embedded Redis');
    t.is(await redis.get('hse:test:registration'), 'acknowledged');
  } finally {
    redis?.disconnect();
    await pm2.kill();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
});

async function appNames(env: Record<string, string>): Promise<string[]> {
  const { stdout } = await run(NODE, ['-e', "console.log(require('./ecosystem.config.js').apps.map((a) => a.name).join(' '))"], {
    cwd: ROOT,
    env: { PATH: process.env.PATH, ...env },
  });
  return stdout.trim().split(' ');
}

test('the process list follows HSE_REDIS_URL and HSE_DERP_MODE', async (t) => {
  t.deepEqual(await appNames({}), ['redis', 'router', 'coordination', 'console', 'relay']);
  t.deepEqual(await appNames({ HSE_REDIS_URL: 'redis://10.0.0.5:6379/0' }), ['router', 'coordination', 'console', 'relay']);
  t.deepEqual(await appNames({ HSE_DERP_MODE: ' Public ' }), ['redis', 'router', 'coordination', 'console']);
});

test('every app runs on the pinned Node and treats exit status 2 as final', async (t) => {
  const { stdout } = await run(NODE, ['-e', "console.log(JSON.stringify(require('./ecosystem.config.js').apps))"], {
    cwd: ROOT,
    env: { PATH: process.env.PATH },
  });
  const apps = JSON.parse(stdout) as { name: string; interpreter: string; script: string; node_args?: string[]; stop_exit_codes: number[]; pmx: boolean }[];
  const mains: Record<string, string> = {
    redis: 'services/redis/run.sh',
    router: 'router/src/main.ts',
    coordination: 'services/coordination/src/main.ts',
    console: 'services/console/src/main.ts',
    relay: 'services/relay/src/main.ts',
  };
  for (const a of apps) {
    // Every app is started by /bin/sh: the Redis app is a shell script that execs redis-server after a Node step on
    // the same pinned Node; a Node app is deploy/run-node.sh, which execs the pinned Node with the app's V8 flags and
    // its main, so that pm2 loads no wrapper of its own into it.
    t.is(a.interpreter, '/bin/sh', a.name);
    if (a.name !== 'redis') {
      t.deepEqual(a.node_args?.slice(0, 2), [path.join(ROOT, 'deploy/run-node.sh'), path.join(ROOT, 'node_modules/.bin/node')], a.name);
    }
    t.deepEqual(a.stop_exit_codes, [2], a.name);
    t.is(a.script, path.join(ROOT, mains[a.name]), a.name);
    t.false(a.pmx, `${a.name}: no pm2 metrics agent in the app`);
  }
});
