// Redis connections. The embedded server listens on a Unix socket in the run directory; HSE_REDIS_URL points at an
// external one instead; HSE_REDIS_SENTINELS lets Redis Sentinel say which server is the primary (ioredis asks the
// sentinels, follows a failover and reconnects to the new primary by itself). Connections retry forever with a capped
// backoff so a Redis restart heals on its own.
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
 * A connection for commands. `name` shows up in CLIENT LIST, which helps when several processes share Redis. A
 * connection that blocks (XREAD BLOCK) or only subscribes passes `timed: false`, so its waits are not counted as
 * command latency.
 */
export function connectRedis(cfg: Config, log: Logger, name: string, opts: { timed?: boolean } = {}): Redis {
  const { url, options } = redisOptions(cfg);
  const r = url ? new Redis(url, { ...options, connectionName: name }) : new Redis({ ...options, connectionName: name });
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
