// The router process: the only public listener. It forwards to the services' Unix sockets and listens on
//   - HSE_LISTEN_ADDRESS:HSE_HTTP_PORT (plain HTTP) in proxy mode and for a local http:// try-out;
//   - or, with HSE_LISTEN_SOCKET, on that Unix socket instead (a proxy on the same host; no TCP port);
//   - HSE_HTTPS_PORT and HSE_TLS_HTTP_PORT in TLS mode (https:// public URL, HSE_TLS on), where it terminates
//     HTTPS itself with ACME or the operator's certificate files (tls/tls-mode.ts).
// Stopping drains: no new connections, in-flight requests and tunnels get the drain deadline. Start-up, signals, the
// exit policy and the crash policy are the shared service skeleton's (shared/service.ts).
import * as nodeHttp from '../../shared/node-http.ts';
import type { Config } from '../../shared/config.ts';
import { runService } from '../../shared/service.ts';
import { listen, listenOnSocket } from './listen.ts';
import { enableMetrics, type MetricsProcess, serveProcessMetrics } from '../../shared/metrics.ts';
import { startMetricsListener } from './metrics-listener.ts';
import { createRouter } from './router.ts';
import { watchTunnels } from './router-metrics.ts';
import { routerServerOptions } from './server-options.ts';
import type { TlsMode } from './tls/tls-mode.ts';

/** "router", or "router-2", "router-3", … for the further processes of HSE_ROUTER_PROCESSES. */
function processName(c: Config): MetricsProcess {
  return c.routerInstance === 1 ? 'router' : `router-${c.routerInstance}`;
}

function modeName(c: Config): string {
  if (c.proxyMode) return 'proxy';
  if (c.tlsMode) return 'tls';
  return 'plain';
}

runService('router', async ({ cfg, log }) => {
  await enableMetrics(cfg, processName(cfg));
  const router = createRouter(cfg, log);
  watchTunnels(() => router.tunnels.size);
  let tlsMode: TlsMode | null = null;
  const fields = {
    mode: modeName(cfg),
    publicUrl: cfg.publicOrigin,
    trustedProxies: cfg.trustedProxies.empty ? 'none' : cfg.trustedProxies.ranges.map((r) => r.source).join(','),
    runDir: cfg.runDir,
    ...(cfg.routerProcesses > 1 ? { process: `${cfg.routerInstance} of ${cfg.routerProcesses}` } : {}),
  };
  if (cfg.tlsMode) {
    // Loaded only in TLS mode: HTTPS, HTTP/2 and the certificate code are ~2 MiB of heap a router behind a proxy never
    // uses (bench/README.md, memory at rest). deploy/warm-compile-cache.cjs caches it with the static graph.
    const { startTlsMode } = await import('./tls/tls-mode.ts');
    tlsMode = await startTlsMode(cfg, log, router, fields);
  } else if (cfg.listenSocket !== null) {
    // HSE_LISTEN_SOCKET: a proxy on this host reaches us on a socket only it may open, and no TCP port is opened.
    const server = nodeHttp.createServer(routerServerOptions(cfg));
    router.attach(server, { unixSocket: true });
    await listenOnSocket(server, { path: cfg.listenSocket, mode: cfg.listenSocketMode, group: cfg.listenSocketGroup }, log, fields);
  } else {
    const server = nodeHttp.createServer(routerServerOptions(cfg));
    router.attach(server);
    await listen(server, { port: cfg.httpPort, address: cfg.listenAddress, scheme: 'http', reusePort: cfg.routerProcesses > 1 }, log, fields);
  }
  // HSE_METRICS_LISTEN: the scrape endpoint of every process, on its own listener (after the public one is up), in the
  // first router; the others serve their registry on their socket, as the services do, for it to merge.
  if (cfg.routerInstance === 1) await startMetricsListener(cfg, log);
  else await serveProcessMetrics(cfg, log, processName(cfg));
  return {
    inFlight: () => ({ tunnels: router.tunnels.size }),
    async stop(deadline) {
      const ms = Math.max(0, deadline - Date.now());
      const clean = await (tlsMode !== null ? tlsMode.drain(ms) : router.drain(ms));
      log.info('drained', { clean });
    },
  };
});
