// Prometheus metrics (prom-client). Every process keeps one registry, every series labelled process="<name>". With
// HSE_METRICS_LISTEN set, each process serves its registry as prom-client JSON on its own Unix socket in the private
// run directory (metrics-<name>.sock) and the router merges them all into one text exposition on the metrics listener
// (router/src/metrics-listener.ts): one scrape target shows every process, and nothing but that listener is opened.
// Unset (the default), nothing is collected or served: the counters below still count, which costs an addition.
//
// Hot paths (a relay packet, a map message, a proxied request) never call prom-client: they add to a plain number, and
// the metric reads it when scraped (countedBy / countedByLabels). prom-client's own inc() hashes its labels on every
// call, which is too dear per packet.
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import client from 'prom-client';
import type { Config } from './config.ts';
import type { Logger } from './log.ts';
import { listenOnSocket } from './paths.ts';

export const registry = new client.Registry();

export type MetricsProcess = 'router' | 'coordination' | 'console' | 'relay';

/** The socket a process serves its registry on. */
export function metricsSocket(cfg: Pick<Config, 'runDir'>, name: MetricsProcess): string {
  return path.join(cfg.runDir, `metrics-${name}.sock`);
}

/** Latency buckets for control-plane work measured in seconds (1 ms to 10 s). */
export const SECONDS_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/** A counter whose value is `read()` at scrape time: the hot path only adds to a number it owns. */
export function countedBy(name: string, help: string, read: () => number): client.Counter {
  return new client.Counter({
    name,
    help,
    registers: [registry],
    collect() {
      this.reset();
      this.inc(read());
    },
  });
}

/** Like countedBy, with labels: `read()` gives each label set's running total. Label values must be few and fixed. */
export function countedByLabels<L extends string>(
  name: string,
  help: string,
  labelNames: readonly L[],
  read: () => Iterable<[Record<L, string>, number]>,
): client.Counter<L> {
  return new client.Counter<L>({
    name,
    help,
    labelNames,
    registers: [registry],
    collect() {
      this.reset();
      for (const [labels, n] of read()) this.inc(labels as Partial<Record<L, string | number>>, n);
    },
  });
}

/** A gauge whose value is `read()` at scrape time. */
export function gaugeOf(name: string, help: string, read: () => number): client.Gauge {
  return new client.Gauge({
    name,
    help,
    registers: [registry],
    collect() {
      this.set(read());
    },
  });
}

export function counter<L extends string = string>(name: string, help: string, labelNames: readonly L[] = []): client.Counter<L> {
  return new client.Counter<L>({ name, help, labelNames, registers: [registry] });
}

export function histogram<L extends string = string>(
  name: string,
  help: string,
  labelNames: readonly L[] = [],
  buckets = SECONDS_BUCKETS,
): client.Histogram<L> {
  return new client.Histogram<L>({ name, help, labelNames, buckets, registers: [registry] });
}

/** Seconds since `start` (a performance.now() reading). */
export function secondsSince(start: number): number {
  return (performance.now() - start) / 1000;
}

let enabled = false;

/** True when HSE_METRICS_LISTEN is set and this process collects (enableMetrics was called). */
export function metricsEnabled(): boolean {
  return enabled;
}

/**
 * Turns collection on for this process when HSE_METRICS_LISTEN is set: the process label, and prom-client's default
 * process metrics (CPU seconds, resident memory, heap, event-loop lag, GC). Returns whether metrics are on.
 */
export function enableMetrics(cfg: Pick<Config, 'metricsListen'>, name: MetricsProcess): boolean {
  if (cfg.metricsListen === null || enabled) return enabled;
  enabled = true;
  registry.setDefaultLabels({ process: name });
  client.collectDefaultMetrics({ register: registry });
  // Gauges whose names end in _total break Prometheus's naming rule (promtool check metrics says so): not served.
  for (const name of ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total']) registry.removeSingleMetric(name);
  return true;
}

/**
 * Serves this process's registry as JSON on its socket (metrics on), for the router's listener to merge. Returns the
 * server to close at stop, or null with metrics off.
 */
export async function serveProcessMetrics(cfg: Config, log: Logger, name: MetricsProcess): Promise<http.Server | null> {
  if (!enableMetrics(cfg, name)) return null;
  const server = http.createServer((req, res) => {
    registry
      .getMetricsAsJSON()
      .then((json) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(json)))
      .catch((e: Error) => {
        log.warn('could not collect metrics', { error: e.message });
        res.writeHead(500).end();
      });
    req.resume();
  });
  const file = metricsSocket(cfg, name);
  fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  await listenOnSocket(server, file);
  return server;
}

export { client as promClient };
