// The Prometheus scrape endpoint (HSE_METRICS_LISTEN): its own TCP listener in the (first) router process, never the
// public one. GET /metrics asks every process for its registry (prom-client JSON on its socket in the run directory,
// shared/metrics.ts; the further router processes of HSE_ROUTER_PROCESSES too, as router-2, …), merges them with the
// router's own into one text exposition, and adds hse_up{process} — 1 for each process that answered, 0 for one that
// did not (down, restarting, or HSE_DERP_MODE=public for the relay is simply not asked). Each process's series carry
// process="<name>", so nothing is summed across processes.
import type http from 'node:http';
import * as nodeHttp from '../../shared/node-http.ts';
import type { Config } from '../../shared/config.ts';
import type { Logger } from '../../shared/log.ts';
import type { Registry } from 'prom-client';
import { type MetricsProcess, metricsSocket, promClient } from '../../shared/metrics.ts';

type MetricJson = Awaited<ReturnType<Registry['getMetricsAsJSON']>>;

/** How long a process gets to answer a scrape before it counts as down for that scrape. */
const ASK_TIMEOUT_MS = 2_000;

function ask(socketPath: string): Promise<MetricJson | null> {
  return new Promise((resolve) => {
    const req = nodeHttp.get({ socketPath, path: '/', timeout: ASK_TIMEOUT_MS }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        try {
          resolve(res.statusCode === 200 ? (JSON.parse(Buffer.concat(chunks).toString('utf8')) as MetricJson) : null);
        } catch {
          resolve(null);
        }
      });
      res.on('error', () => resolve(null));
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(null));
  });
}

/** The whole exposition: every process's registry and hse_up. */
export async function scrape(cfg: Config): Promise<string> {
  const { prom, registry } = promClient();
  const routers = Array.from({ length: cfg.routerProcesses - 1 }, (_, i): MetricsProcess => `router-${i + 2}`);
  const others: MetricsProcess[] = [...routers, 'coordination', 'console', ...(cfg.derpMode === 'own' ? (['relay'] as const) : [])];
  const [own, ...answers] = await Promise.all([registry.getMetricsAsJSON(), ...others.map((p) => ask(metricsSocket(cfg, p)))]);
  const upRegistry = new prom.Registry();
  const up = new prom.Gauge({
    name: 'hse_up',
    help: 'Whether the process answered this scrape (1) or not (0).',
    labelNames: ['process'],
    registers: [upRegistry],
  });
  up.set({ process: 'router' }, 1);
  for (const [i, p] of others.entries()) up.set({ process: p }, answers[i] ? 1 : 0);
  // Every series is labelled with its process, so no two processes share a label set: "first" keeps each as it is.
  // (Some of prom-client's default metrics would otherwise be summed, averaged or dropped, as for cluster workers.)
  const all = [own, ...answers.filter((a): a is MetricJson => a !== null), await upRegistry.getMetricsAsJSON()].map((list) =>
    list.map((m) => ({ ...m, aggregator: 'first' as const })),
  );
  return prom.AggregatorRegistry.aggregate(all).metrics();
}

/** Starts the metrics listener when HSE_METRICS_LISTEN is set; resolves with it (null when metrics are off). */
export function startMetricsListener(cfg: Config, log: Logger): Promise<http.Server | null> {
  const at = cfg.metricsListen;
  if (at === null) return Promise.resolve(null);
  const server = nodeHttp.createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET, HEAD', 'content-type': 'text/plain' }).end('only GET /metrics here\n');
      return;
    }
    if (path !== '/metrics') {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('the metrics are at /metrics\n');
      return;
    }
    scrape(cfg)
      .then((text) => res.writeHead(200, { 'content-type': promClient().prom.Registry.PROMETHEUS_CONTENT_TYPE }).end(req.method === 'HEAD' ? undefined : text))
      .catch((e: Error) => {
        log.error('metrics scrape failed', { error: e.stack ?? e.message });
        res.writeHead(500, { 'content-type': 'text/plain' }).end('could not collect the metrics; see the router log\n');
      });
  });
  server.requestTimeout = 10_000;
  return new Promise((resolve) => {
    server.once('error', (e: NodeJS.ErrnoException) => {
      // Not fatal to the router: the tailnet keeps working without its metrics, and the log says why.
      log.error('metrics listener could not start; HSE_METRICS_LISTEN', { address: `${at.host}:${at.port}`, error: e.code ?? e.message });
      resolve(null);
    });
    server.listen(at.port, at.host, () => {
      log.info('metrics listening', { url: `http://${at.host.includes(':') ? `[${at.host}]` : at.host}:${at.port}/metrics` });
      resolve(server);
    });
  });
}
