// The console process: a Koa app on its Unix socket in the private run directory, reached only through the router.
// Start order: connect to Redis, load the cookie key and make sure the first administrator exists (retrying while
// Redis is not there yet), listen, say "listening". SIGTERM: stop accepting, end live tails (browsers reconnect to
// the next process), let requests in flight finish, exit 0.
import * as nodeHttp from '../../../shared/node-http.ts';
import type { Duplex } from 'node:stream';
import { ActivityLog, activityLimits } from '../../../shared/activity.ts';
import { AdminClient } from '../../../shared/admin-client.ts';
import { loadConfig } from '../../../shared/config.ts';
import { Logger } from '../../../shared/log.ts';
import { serveProcessMetrics } from '../../../shared/metrics.ts';
import { adminSocket, ensureDirs, listenOnSocket, serviceSocket } from '../../../shared/paths.ts';
import { stoppedCleanly, waitAfterQuickExit } from '../../../shared/restart-backoff.ts';
import { connectRedis } from '../../../shared/redis.ts';
import { ActivityTail } from './activity/tail.ts';
import { createConsole } from './app.ts';
import { openStreams } from './request/open-streams.ts';
import { configuredPassword, ensureFirstAdmin, SettingError } from './auth/first-admin.ts';
import { loadCookieKeys } from './auth/session-keys.ts';
import { ChangeFeed } from './network/change-feed.ts';

const cfg = loadConfig('console');
const log = new Logger('console', cfg.logLevel);
ensureDirs(cfg);
await waitAfterQuickExit(cfg.runDir, 'console');
refuseBadPasswordSetting();

// HSE_METRICS_LISTEN: this process's registry on its socket, before the Redis connections so they are measured.
const metrics = await serveProcessMetrics(cfg, log, 'console');
const redis = connectRedis(cfg, log, 'console');
const tail = new ActivityTail(() => connectRedis(cfg, log.child('tail'), 'console-tail', { timed: false }), log.child('tail'));
const feed = new ChangeFeed(() => connectRedis(cfg, log.child('changes'), 'console-changes', { timed: false }), log.child('changes'));
const admin = new AdminClient(adminSocket(cfg));
// Loaded only when configured: the relying-party library is of no use to a console without a provider.
const provider = cfg.oidc ? new (await import('./oidc/provider.ts')).IdentityProvider(cfg.oidc, log.child('oidc')) : null;
const consoleApp = createConsole({ cfg, log, redis, activity: new ActivityLog(redis, activityLimits(cfg)), tail, admin, feed, provider });
const socketPath = serviceSocket(cfg, 'console');

// The router admits heads up to 32 KiB; accept the same so a head it passed is not refused here.
const server = nodeHttp.createServer({ maxHeaderSize: 32 * 1024 }, consoleApp.app.callback());
// Live tails stay open for as long as the page is; the router guards against slow request heads.
server.requestTimeout = 0;
server.timeout = 0;
server.keepAliveTimeout = 65_000;
server.on('clientError', (e: Error, socket: Duplex) => {
  log.debug('bad request from router', { error: e.message });
  if (!socket.destroyed) socket.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n');
});

/** Password settings are checked before anything else, so a mistake there is reported even while Redis is down. */
function refuseBadPasswordSetting(): void {
  try {
    configuredPassword(cfg);
  } catch (e) {
    if (!(e instanceof SettingError)) throw e;
    process.stderr.write(`hse console: refused configuration: ${e.variable}: ${e.message}\n`);
    process.exit(2);
  }
}

/** Loads the cookie key and creates the first administrator; true when done. */
async function bootstrap(): Promise<boolean> {
  try {
    const keys = await loadCookieKeys(redis);
    await ensureFirstAdmin(cfg, consoleApp.accounts, log);
    consoleApp.setReady(keys);
    return true;
  } catch (e) {
    if (e instanceof SettingError) {
      process.stderr.write(`hse console: refused configuration: ${e.variable}: ${e.message}\n`);
      process.exit(2);
    }
    log.warn('waiting for the store (Redis) before the console can serve sign-ins', { error: (e as Error).message });
    return false;
  }
}

async function main(): Promise<void> {
  // Give Redis a few seconds to appear (the supervisor starts it alongside us); after that, serve a clear 503
  // page while bootstrap keeps retrying, rather than leaving the router with nothing to talk to.
  let ready = false;
  for (let i = 0; i < 10 && !ready; i++) {
    ready = await bootstrap();
    if (!ready) await new Promise((r) => setTimeout(r, 1_000));
  }
  if (!ready) {
    const retry = setInterval(() => {
      void bootstrap().then((ok) => ok && clearInterval(retry));
    }, 2_000);
  }
  // After Redis comes back it may be a fresh one (an external Redis that lost its data): make sure the cookie key and
  // the first administrator are there again, so the console is usable without a restart.
  redis.on('ready', () => void bootstrap());
  // Discovery retries on its own while the provider is away; nothing else waits for it.
  provider?.start();
  await listenOnSocket(server, socketPath);
  log.info('listening', { socket: socketPath, publicUrl: `${cfg.publicOrigin}/console`, secureCookies: cfg.secure, store: ready ? 'ready' : 'waiting' });
}

let stopping = false;
function shutdown(signal: string): void {
  if (stopping) return;
  stopping = true;
  log.info('shutting down', { signal, liveStreams: openStreams.size });
  provider?.stop();
  metrics?.close();
  server.close(() => {
    tail.stop();
    feed.stop();
    redis.disconnect();
    stoppedCleanly(cfg.runDir, 'console');
    process.exit(0);
  });
  for (const s of openStreams) s.end();
  tail.stop();
  feed.stop();
  server.closeIdleConnections();
  // Requests still running after this long are cut off; nothing the console does takes that long.
  setTimeout(() => {
    log.warn('requests still running at shutdown deadline; closing them');
    server.closeAllConnections();
    stoppedCleanly(cfg.runDir, 'console');
    process.exit(0);
  }, 10_000).unref();
}
process.on('SIGTERM', () => shutdown('SIGTERM'));
process.on('SIGINT', () => shutdown('SIGINT'));

main().catch((e: Error) => {
  log.error('could not start', { error: e.message, socket: socketPath });
  process.exit(1);
});
