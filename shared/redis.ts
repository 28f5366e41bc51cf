// Redis connections. The embedded server listens on a Unix socket in the run directory; HSE_REDIS_URL points at an
// external one instead; HSE_REDIS_SENTINELS lets Redis Sentinel say which server is the primary. Connections retry
// forever with a capped backoff so a Redis restart heals on its own.
//
// Under Sentinel, ioredis asks the sentinels for the primary at every (re)connect and checks the server it reaches
// really is one (a primary that came back as a replica is skipped). What happens at a failover (test/e2e/
// ha-sentinel.test.ts):
//   - the primary dies: every connection closes and reconnects, asking again; while the sentinels still name the dead
//     one, connecting fails (ECONNREFUSED, "All sentinels are unreachable. Retrying from scratch") and commands fail
//     with MaxRetriesPerRequestError — all store-down errors (shared/errors.ts isStoreDown: 503, retrying is safe) —
//     until the sentinels have promoted a replica, a few seconds;
//   - the primary is demoted without dying (an operator's SENTINEL FAILOVER): writes answer READONLY, which makes the
//     connection reconnect at once (reconnectOnError); subscriber connections, which write nothing, still get every
//     message (a replica passes PUBLISH on) until the sentinels reconfigure the old primary and close its clients, as
//     Sentinel does (within about 10 s, its INFO period).
// ioredis's `failoverDetector` (reconnecting on the sentinels' +switch-master) would shorten the second case, but in
// ioredis 5.9 its disconnect can land while the connection is reconnecting, which ends the connection for good
// ("Connection is closed." on every command until the process restarts); the failover tests hit that within a few
// failovers under load. So it stays off. Every process resynchronises what it keeps in memory on the connection's
// 'ready' (coordination: state/tailnet.ts; relay: revocations.ts; console: change-feed.ts).
import os from 'node:os';
import { Redis, type RedisOptions } from 'ioredis';
import type { Config } from './config.ts';
import type { Logger } from './log.ts';
import { gauge, histogram, metricsEnabled } from './metrics.ts';
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

// With metrics on: how long each command takes to be answered (a blocking read would only measure how long nothing
// happened, so a connection used for those is opened with `timed: false`) and whether each connection is up.
const commandSeconds = histogram('hse_redis_command_duration_seconds', 'Time from sending a Redis command to its answer, in seconds.');
const up = gauge('hse_redis_up', 'Whether the connection to Redis is ready (1) or not (0), per connection of this process.', ['connection']);

function instrument(r: Redis, name: string, timed: boolean): void {
  up.set({ connection: name }, 0);
  r.on('ready', () => up.set({ connection: name }, 1));
  r.on('close', () => up.set({ connection: name }, 0));
  if (!timed) return;
  const send = r.sendCommand.bind(r);
  r.sendCommand = ((command: { promise: Promise<unknown> }, stream?: unknown) => {
    const start = performance.now();
    const observe = () => commandSeconds.observe({}, (performance.now() - start) / 1000);
    command.promise.then(observe, observe);
    return send(command as never, stream as never);
  }) as typeof r.sendCommand;
}

/**
 * A connection for commands. It shows up in CLIENT LIST as `<name>@<host>:<pid>` (coordination@hse-a:41), so where
 * several instances share one Redis each connection names its process and machine. A connection that blocks (XREAD
 * BLOCK) or only subscribes passes `timed: false`, so its waits are not counted as command latency.
 */
export function connectRedis(cfg: Config, log: Logger, name: string, opts: { timed?: boolean } = {}): Redis {
  const { url, options } = redisOptions(cfg);
  const connectionName = connectionNameOf(name);
  const r = url ? new Redis(url, { ...options, connectionName }) : new Redis({ ...options, connectionName });
  if (metricsEnabled()) instrument(r, name, opts.timed !== false);
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
