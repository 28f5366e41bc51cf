// The embedded Redis's start-up step, run by services/redis/run.sh before it execs redis-server: validates the
// settings, writes redis.conf from them (redis-conf.ts), shuts down a stray redis-server still holding the socket, and
// hands the config file's path back to run.sh on file descriptor 3. Then this Node process exits, so nothing of Node
// stays resident beside Redis (a launcher kept alive only to forward signals cost ~40 MiB PSS at rest).
//
// Exit status: 0 with the path written to fd 3 = go ahead; 0 with nothing written = HSE_REDIS_URL is set, nothing to
// run; 2 = refused configuration (the one-line reason is already printed), which the supervisor does not retry.
import fs from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { loadConfig } from '../../../shared/config.ts';
import { Logger } from '../../../shared/log.ts';
import { ensureDirs, redisSocket } from '../../../shared/paths.ts';
import { stoppedCleanly, waitAfterQuickExit } from '../../../shared/restart-backoff.ts';
import { redisCommand } from './probe.ts';
import { redisPaths, writeRedisConf } from './redis-conf.ts';

const cfg = loadConfig('redis');
const log = new Logger('redis', cfg.logLevel);

if (cfg.redisUrl !== null) {
  log.info('HSE_REDIS_URL is set, so the embedded Redis is not needed; exiting', { redisUrl: cfg.redisUrl.replace(/\/\/[^@/]*@/, '//***@') });
  process.exit(0);
}

ensureDirs(cfg);
// redis-server removes its socket when it shuts down cleanly; a socket left behind means it did not (killed, crashed).
if (!fs.existsSync(redisSocket(cfg))) stoppedCleanly(cfg.runDir, 'redis');
await waitAfterQuickExit(cfg.runDir, 'redis');
const paths = redisPaths(cfg.dataDir, redisSocket(cfg));
writeRedisConf(paths);

// A redis-server from an earlier start that was never stopped (its supervisor killed with SIGKILL, say) still owns
// the socket and the AOF. Two servers on one AOF would corrupt it, so the stray one is shut down first (its AOF is
// fsynced, nothing is lost).
if ((await redisCommand(paths.socket, ['PING'])) !== null) {
  log.warn('a redis-server from an earlier start is still running on the socket; shutting it down first', { socket: paths.socket });
  await redisCommand(paths.socket, ['SHUTDOWN']);
  for (let i = 0; i < 100 && (await redisCommand(paths.socket, ['PING'])) !== null; i++) await sleep(100);
}

log.info('starting redis-server', { conf: paths.conf, socket: paths.socket, dir: paths.dir, appendfsync: 'always' });
fs.writeSync(3, paths.conf);
