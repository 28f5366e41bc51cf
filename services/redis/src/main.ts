// The embedded Redis launcher, run by the supervisor only when HSE_REDIS_URL is unset: writes redis.conf from the
// settings (redis-conf.ts), runs the system's redis-server in the foreground, passes SIGTERM/SIGINT on to it and
// exits with its status, so the supervisor sees Redis itself live and die.
//
// Exit status: 2 = nothing to retry (refused configuration, or redis-server not installed); otherwise redis-server's
// own status, or 128 + signal number if it was killed.
import { spawn } from 'node:child_process';
import os from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { loadConfig } from '../../../shared/config.ts';
import { Logger } from '../../../shared/log.ts';
import { ensureDirs, redisSocket } from '../../../shared/paths.ts';
import { redisCommand } from './probe.ts';
import { redisPaths, writeRedisConf } from './redis-conf.ts';

const cfg = loadConfig('redis');
const log = new Logger('redis', cfg.logLevel);

if (cfg.redisUrl !== null) {
  log.info('HSE_REDIS_URL is set, so the embedded Redis is not needed; exiting', { redisUrl: cfg.redisUrl.replace(/\/\/[^@/]*@/, '//***@') });
  process.exit(0);
}

ensureDirs(cfg);
const paths = redisPaths(cfg.dataDir, redisSocket(cfg));
writeRedisConf(paths);

// A redis-server left running by a launcher that was itself killed with SIGKILL still owns the socket and the AOF.
// Two servers on one AOF would corrupt it, so the stray one is shut down (its AOF is fsynced, nothing is lost).
if ((await redisCommand(paths.socket, ['PING'])) !== null) {
  log.warn('a redis-server from an earlier start is still running on the socket; shutting it down first', { socket: paths.socket });
  await redisCommand(paths.socket, ['SHUTDOWN']);
  for (let i = 0; i < 100 && (await redisCommand(paths.socket, ['PING'])) !== null; i++) await sleep(100);
}

const child = spawn('redis-server', [paths.conf], { stdio: ['ignore', 'inherit', 'inherit'] });

child.on('error', (e: NodeJS.ErrnoException) => {
  if (e.code === 'ENOENT') {
    process.stderr.write('hse redis: redis-server is not installed; install it with: apt-get install redis-server (or set HSE_REDIS_URL to an external Redis)\n');
    process.exit(2);
  }
  log.error('cannot start redis-server', { error: e.message });
  process.exit(1);
});

for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.on(signal, () => {
    log.info(`${signal}: stopping redis-server`);
    child.kill(signal);
  });
}

child.on('exit', (code, signal) => {
  const status = code ?? 128 + (signal ? os.constants.signals[signal] : 0);
  if (status === 0) log.info('redis-server stopped');
  else log.error('redis-server exited', { status, signal: signal ?? undefined });
  process.exit(status);
});

// Ready once it answers on the socket; the supervisor's log and the test harness wait for this line.
child.once('spawn', async () => {
  for (let i = 0; i < 300 && child.exitCode === null; i++) {
    if ((await redisCommand(paths.socket, ['PING'])) !== null) {
      log.info('listening', { socket: paths.socket, dir: paths.dir, appendfsync: 'always', pid: child.pid });
      return;
    }
    await sleep(100);
  }
  if (child.exitCode === null) log.warn('redis-server started but does not answer on its socket yet', { socket: paths.socket });
});

