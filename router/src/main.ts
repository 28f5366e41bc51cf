// The router process: the only public listener. Reads the configuration (exit 2 on a refused one) and forwards to
// the services' Unix sockets; drains on SIGTERM/SIGINT and exits 0. It listens on
//   - HSE_LISTEN_ADDRESS:HSE_HTTP_PORT (plain HTTP) in proxy mode and for a local http:// try-out;
//   - or, with HSE_LISTEN_SOCKET, on that Unix socket instead (a proxy on the same host; no TCP port);
//   - HSE_HTTPS_PORT and HSE_TLS_HTTP_PORT in TLS mode (https:// public URL, HSE_TLS on), where it terminates
//     HTTPS itself with ACME or the operator's certificate files (tls/tls-mode.ts).
import http from 'node:http';
import { loadConfig, type Config } from '../../shared/config.ts';
import { Logger } from '../../shared/log.ts';
import { enableMetrics } from '../../shared/metrics.ts';
import { ensureDirs } from '../../shared/paths.ts';
import { stoppedCleanly, waitAfterQuickExit } from '../../shared/restart-backoff.ts';
import { listenOnSocketOrExit, listenOrExit } from './listen.ts';
import { startMetricsListener } from './metrics-listener.ts';
import { createRouter } from './router.ts';
import { watchTunnels } from './router-metrics.ts';
import { routerServerOptions } from './server-options.ts';
import { startTlsMode, type TlsMode } from './tls/tls-mode.ts';

/** In-flight requests get this long after SIGTERM; pm2's kill_timeout (ecosystem.config.js) is longer. */
const DRAIN_DEADLINE_MS = 10_000;

const cfg = loadConfig('router');
const log = new Logger('router', cfg.logLevel);
ensureDirs(cfg);
await waitAfterQuickExit(cfg.runDir, 'router');

function modeName(c: Config): string {
  if (c.proxyMode) return 'proxy';
  if (c.tlsMode) return 'tls';
  return 'plain';
}

// A bug in one connection's handling must not take every other connection (hours-long tunnels) down with it.
process.on('uncaughtException', (e: Error) => log.error('unexpected error, connection dropped', { error: e.stack ?? e.message }));

await enableMetrics(cfg, 'router');
const router = createRouter(cfg, log);
watchTunnels(() => router.tunnels.size);
let tlsMode: TlsMode | null = null;

let stopping = false;
async function stop(signal: string): Promise<void> {
  if (stopping) {
    log.warn(`second ${signal}: exiting without waiting`);
    stoppedCleanly(cfg.runDir, 'router');
    process.exit(0);
  }
  stopping = true;
  log.info('draining', { signal, inFlightDeadlineMs: DRAIN_DEADLINE_MS, tunnels: router.tunnels.size });
  const clean = await (tlsMode !== null ? tlsMode.drain(DRAIN_DEADLINE_MS) : router.drain(DRAIN_DEADLINE_MS));
  log.info('stopped', { clean });
  stoppedCleanly(cfg.runDir, 'router');
  process.exit(0);
}
process.on('SIGTERM', () => void stop('SIGTERM'));
process.on('SIGINT', () => void stop('SIGINT'));

const fields = {
  mode: modeName(cfg),
  publicUrl: cfg.publicOrigin,
  trustedProxies: cfg.trustedProxies.empty ? 'none' : cfg.trustedProxies.ranges.map((r) => r.source).join(','),
  runDir: cfg.runDir,
};
if (cfg.tlsMode) {
  tlsMode = await startTlsMode(cfg, log, router, fields);
} else if (cfg.listenSocket !== null) {
  // HSE_LISTEN_SOCKET: a proxy on this host reaches us on a socket only it may open, and no TCP port is opened.
  const server = http.createServer(routerServerOptions(cfg));
  router.attach(server, { unixSocket: true });
  await listenOnSocketOrExit(server, { path: cfg.listenSocket, mode: cfg.listenSocketMode, group: cfg.listenSocketGroup }, log, fields);
} else {
  const server = http.createServer(routerServerOptions(cfg));
  router.attach(server);
  await listenOrExit(server, { port: cfg.httpPort, address: cfg.listenAddress, scheme: 'http' }, log, fields);
}
// HSE_METRICS_LISTEN: the scrape endpoint of every process, on its own listener (after the public one is up).
await startMetricsListener(cfg, log);
