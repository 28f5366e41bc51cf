// Prometheus metrics (prom-client). Every process keeps one registry, every series labelled process="<name>". With
// HSE_METRICS_LISTEN set, each process serves its registry as prom-client JSON on its own Unix socket in the private
// run directory (metrics-<name>.sock) and the router merges them all into one text exposition on the metrics listener
// (router/src/metrics-listener.ts): one scrape target shows every process, and nothing but that listener is opened.
//
// Off (the default), prom-client is never loaded: importing it costs each process ~19 MiB of resident memory, which
// an image that runs five Node processes at rest does not spend for nothing. So modules define their metrics through
// the small handles below, which do nothing until enableMetrics() loads prom-client and makes the real metrics.
//
// Hot paths (a relay packet, a map message, a proxied request) never call prom-client: they add to a plain number, and
// the metric reads it when scraped (countedBy / countedByLabels). prom-client's own inc() hashes its labels on every
// call, which is too dear per packet.
import fs from 'node:fs';
import type http from 'node:http';
import * as nodeHttp from './node-http.ts';
import path from 'node:path';
import type { Registry } from 'prom-client';
import type { Config } from './config.ts';
import type { Logger } from './log.ts';
import { listenOnSocket } from './paths.ts';

export type PromClient = typeof import('prom-client');
type Labels<L extends string> = Partial<Record<L, string | number>>;

/** A process's name in its series' process label: "router-2" and on are the further router processes. */
export type MetricsProcess = 'router' | 'coordination' | 'console' | 'relay' | `router-${number}`;

let prom: PromClient | null = null;
let registry: Registry | null = null;
/** Metrics defined before prom-client was loaded: made when it is (and never, with metrics off). */
const definitions: ((p: PromClient, r: Registry) => void)[] = [];

function define(make: (p: PromClient, r: Registry) => void): void {
  if (prom && registry) make(prom, registry);
  else definitions.push(make);
}

/** The socket a process serves its registry on. */
export function metricsSocket(cfg: Pick<Config, 'runDir'>, name: MetricsProcess): string {
  return path.join(cfg.runDir, `metrics-${name}.sock`);
}

/** Latency buckets for control-plane work measured in seconds (1 ms to 10 s). */
export const SECONDS_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/** A counter whose value is `read()` at scrape time: the hot path only adds to a number it owns. */
export function countedBy(name: string, help: string, read: () => number): void {
  define((p, r) =>
    new p.Counter({
      name,
      help,
      registers: [r],
      collect() {
        this.reset();
        this.inc(read());
      },
    }));
}

/** Like countedBy, with labels: `read()` gives each label set's running total. Label values must be few and fixed. */
export function countedByLabels<L extends string>(
  name: string,
  help: string,
  labelNames: readonly L[],
  read: () => Iterable<[Record<L, string>, number]>,
): void {
  define((p, r) =>
    new p.Counter<L>({
      name,
      help,
      labelNames,
      registers: [r],
      collect() {
        this.reset();
        for (const [labels, n] of read()) this.inc(labels as Labels<L>, n);
      },
    }));
}

/** A gauge whose value is `read()` at scrape time. */
export function gaugeOf(name: string, help: string, read: () => number): void {
  define((p, r) =>
    new p.Gauge({
      name,
      help,
      registers: [r],
      collect() {
        this.set(read());
      },
    }));
}

export interface CounterHandle<L extends string> {
  inc(labels?: Labels<L>, n?: number): void;
}

export interface HistogramHandle<L extends string> {
  observe(labels: Labels<L>, seconds: number): void;
}

export interface GaugeHandle<L extends string> {
  set(labels: Labels<L>, value: number): void;
}

/** A counter for events that are not per packet or per request (sign-ins, registrations). */
export function counter<L extends string = string>(name: string, help: string, labelNames: readonly L[] = []): CounterHandle<L> {
  let real: import('prom-client').Counter<L> | null = null;
  define((p, r) => {
    real = new p.Counter<L>({ name, help, labelNames, registers: [r] });
  });
  return { inc: (labels = {}, n = 1) => real?.inc(labels, n) };
}

export function histogram<L extends string = string>(name: string, help: string, labelNames: readonly L[] = [], buckets = SECONDS_BUCKETS): HistogramHandle<L> {
  let real: import('prom-client').Histogram<L> | null = null;
  define((p, r) => {
    real = new p.Histogram<L>({ name, help, labelNames, buckets, registers: [r] });
  });
  return { observe: (labels, seconds) => real?.observe(labels, seconds) };
}

export function gauge<L extends string = string>(name: string, help: string, labelNames: readonly L[] = []): GaugeHandle<L> {
  let real: import('prom-client').Gauge<L> | null = null;
  define((p, r) => {
    real = new p.Gauge<L>({ name, help, labelNames, registers: [r] });
  });
  return { set: (labels, value) => real?.set(labels, value) };
}

/** Seconds since `start` (a performance.now() reading). */
export function secondsSince(start: number): number {
  return (performance.now() - start) / 1000;
}

/** True once enableMetrics has loaded prom-client (HSE_METRICS_LISTEN is set). */
export function metricsEnabled(): boolean {
  return prom !== null;
}

/** prom-client and this process's registry, once metrics are on (the router's listener merges with them). */
export function promClient(): { prom: PromClient; registry: Registry } {
  if (!prom || !registry) throw new Error('metrics are off (HSE_METRICS_LISTEN is unset)');
  return { prom, registry };
}

/**
 * Turns collection on for this process when HSE_METRICS_LISTEN is set: loads prom-client, makes every metric defined
 * so far (and later ones at once), the process label, and prom-client's default process metrics (CPU seconds,
 * resident memory, heap, event-loop lag, GC). Returns whether metrics are on.
 */
export async function enableMetrics(cfg: Pick<Config, 'metricsListen'>, name: MetricsProcess): Promise<boolean> {
  if (cfg.metricsListen === null) return false;
  if (prom) return true;
  const p = (await import('prom-client')).default;
  const r = new p.Registry();
  r.setDefaultLabels({ process: name });
  p.collectDefaultMetrics({ register: r });
  // Gauges whose names end in _total break Prometheus's naming rule (promtool check metrics says so): not served.
  for (const m of ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total']) r.removeSingleMetric(m);
  prom = p;
  registry = r;
  for (const make of definitions.splice(0)) make(p, r);
  return true;
}

/**
 * Serves this process's registry as JSON on its socket (metrics on), for the router's listener to merge. Returns the
 * server to close at stop, or null with metrics off.
 */
export async function serveProcessMetrics(cfg: Config, log: Logger, name: MetricsProcess): Promise<http.Server | null> {
  if (!(await enableMetrics(cfg, name))) return null;
  const reg = registry!;
  const server = nodeHttp.createServer((req, res) => {
    reg
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
