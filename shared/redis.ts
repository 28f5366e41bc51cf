// Redis connections. The embedded server listens on a Unix socket in the run directory; HSE_REDIS_URL points at an
// external one instead; HSE_REDIS_SENTINELS lets Redis Sentinel say which server is the primary. Connections retry
// forever with a capped backoff so a Redis restart heals on its own.
//
// Under Sentinel, ioredis asks the sentinels for the primary at every (re)connect and checks the server it reaches
// really is one (a primary that came back as a replica is skipped). A primary that dies closes every connection, so
// they all reconnect and ask again; while the sentinels still name the dead one, connecting fails and commands fail
// with a store-down error (shared/errors.ts isStoreDown: 503, retry) — until the sentinels have promoted a replica,
// typically a few seconds. A primary that is demoted without dying (a failover an operator starts, or one the sentinels
// decided while this instance could still reach the old primary) closes nothing: its connections would stay on what
// is now a replica, reading stale data and failing every write with READONLY. ioredis's failover detector watches the
// sentinels' +switch-master announcements and reconnects at once; READONLY also triggers a reconnect. Every process
// then resynchronises what it keeps in memory on the connection's 'ready' (coordination: state/tailnet.ts; relay:
// revocations.ts; console: change-feed.ts).
import os from 'node:os';
import { Redis, type RedisOptions } from 'ioredis';
import type { Config } from './config.ts';
import type { Logger } from './log.ts';
import { redisSocket } from './paths.ts';

export type { Redis } from 'ioredis';

export function redisOptions(cfg: Config): { url: string | null; options: RedisOptions } {
  const options: RedisOptions = {
    retryStrategy: (times) => Math.min(times * 100, 2000),
    maxRetriesPerRequest: 2,
    enableOfflineQueue: true,
    connectionName: undefined,
  };
  if (cfg.redisSentinels.length > 0) {
    return {
      url: null,
      options: {
        ...options,
        sentinels: cfg.redisSentinels,
        name: cfg.redisSentinelName,
        role: 'master',
        password: cfg.redisPassword ?? undefined,
        sentinelPassword: cfg.redisSentinelPassword ?? undefined,
        failoverDetector: true,
        // A primary that was demoted answers READONLY; reconnecting makes ioredis ask the sentinels again.
        reconnectOnError: (e) => /READONLY/.test(e.message),
        sentinelRetryStrategy: (times) => Math.min(times * 200, 2000),
      },
    };
  }
  if (cfg.redisUrl === null) return { url: null, options: { ...options, path: redisSocket(cfg) } };
  const u = new URL(cfg.redisUrl);
  if (u.protocol === 'unix:') return { url: null, options: { ...options, path: u.pathname } };
  return { url: cfg.redisUrl, options };
}

/**
 * A connection for commands. It shows up in CLIENT LIST as `<name>@<host>:<pid>` (coordination@hse-a:41), so where
 * several instances share one Redis each connection names its process and machine.
 */
export function connectRedis(cfg: Config, log: Logger, name: string): Redis {
  const { url, options } = redisOptions(cfg);
  const connectionName = connectionNameOf(name);
  const r = url ? new Redis(url, { ...options, connectionName }) : new Redis({ ...options, connectionName });
  let down = false;
  r.on('error', (e: Error) => {
    if (!down) log.warn('store unavailable, retrying', { error: e.message });
    down = true;
  });
  r.on('ready', () => {
    if (down) log.info('store reachable again');
    down = false;
  });
  return r;
}

/** CLIENT SETNAME takes no spaces or newlines; a host name has none, but keep only safe characters whatever it is. */
export function connectionNameOf(name: string, host = os.hostname(), pid = process.pid): string {
  return `${name}@${host.replace(/[^A-Za-z0-9._-]/g, '_')}:${pid}`;
}
