// The embedded Redis's configuration file, rewritten at every start from the hse settings so it never drifts from
// them. What each line is for:
//   port 0                   no TCP listener at all: only processes that can reach the private run directory can
//                            talk to the store;
//   unixsocket/…perm 700     the socket every process uses (shared/paths.ts redisSocket), owner-only;
//   appendonly yes           every write is logged to the append-only file under <HSE_DATA_DIR>/redis, and
//   appendfsync always       fsynced before Redis answers, so a registration or key that a client was told about
//                            survives kill -9 of Redis and a power cut. The cost is one fsync per write, which the
//                            control plane's write rate (registrations, key use, activity lines) easily affords;
//   save ""                  no periodic RDB snapshots beside the AOF (Redis still compacts the AOF by rewriting it);
//   daemonize no, logfile "" stays in the foreground and logs to stdout, where the supervisor collects it.
import fs from 'node:fs';
import path from 'node:path';

export interface RedisPaths {
  /** Directory of the append-only file. */
  dir: string;
  socket: string;
  conf: string;
}

export function redisPaths(dataDir: string, socket: string): RedisPaths {
  const dir = path.join(dataDir, 'redis');
  return { dir, socket, conf: path.join(dir, 'redis.conf') };
}

/** Redis config strings: double-quoted, with backslash and quote escaped (paths may hold spaces). */
function quote(value: string): string {
  return `"${value.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`;
}

export function renderRedisConf(p: RedisPaths): string {
  return [
    '# Written by hse (services/redis) at every start from the HSE_* settings; edits here are overwritten.',
    'port 0',
    `unixsocket ${quote(p.socket)}`,
    'unixsocketperm 700',
    `dir ${quote(p.dir)}`,
    'daemonize no',
    'logfile ""',
    'appendonly yes',
    'appendfsync always',
    'save ""',
    '',
  ].join('\n');
}

/** Creates the data directory (owner-only) and writes the config file. */
export function writeRedisConf(p: RedisPaths): void {
  fs.mkdirSync(p.dir, { recursive: true, mode: 0o700 });
  fs.writeFileSync(p.conf, renderRedisConf(p), { mode: 0o600 });
}
