// The whole image for end-to-end tests: a temp HSE_DATA_DIR, a real redis-server (test/harness/redis.ts), and the
// router plus the services as real child processes sharing one environment, each started from its main and awaited
// until it logs its "listening" line. Several images can run side by side (own data dir, run dir, ports).
//
//   const image = await startImage({});                          // router + coordination + relay + console
//   const image = await startImage({ services: [] });            // router only (stand-ins on the service sockets)
//   const image = await startImage({ env: { HSE_TRUSTED_PROXIES: '127.0.0.1' } });
//   const b = await startImage({ redis: false, env: { HSE_REDIS_URL: a.redis!.url } });  // a second instance
//   const image = await startImage({ env: { HSE_ROUTER_PROCESSES: '2' } });  // router and router-2 on one port

//   ... fetch(`${image.url}/key?v=130`) ...
//   await image.stop();
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseConfig } from '../../shared/config.ts';
import { serviceSocket, type ServiceName } from '../../shared/paths.ts';
import { freePort, freeUdpPort, runProcess, type Proc } from './process.ts';
import { startRedis, type TestRedis } from './redis.ts';

export type ImageProcess = 'router' | ServiceName;

/** Every service main logs a line containing "listening" once it accepts connections. */
export const LISTENING = /listening/;

const MAINS: Record<ImageProcess, string> = {
  router: 'router/src/main.ts',
  coordination: 'services/coordination/src/main.ts',
  relay: 'services/relay/src/main.ts',
  console: 'services/console/src/main.ts',
};

export interface ImageOptions {
  /** Services to start besides the router. Default: all three. */
  services?: ServiceName[];
  /** Start the router. Default true. */
  router?: boolean;
  /** HSE_PUBLIC_URL. Default http://127.0.0.1:<port>. */
  publicUrl?: string;
  /** Start a test Redis and pass HSE_REDIS_URL. Default: when any service is started. */
  redis?: boolean;
  /** Extra environment, merged last (wins over the defaults above). */
  env?: Record<string, string>;
  /** How long each process may take to log "listening". Default 30 s. */
  startTimeoutMs?: number;
  /** The router's port and the STUN port, when a test must know them before the start (other instances' settings). */
  port?: number;
  stunPort?: number;
  /** Files written into the data dir (mode 600) before the processes start: another instance's key files. */
  dataFiles?: Record<string, string | Buffer>;
}

export interface Image {
  /** http://127.0.0.1:<port>: where the router listens (not necessarily the public URL). */
  url: string;
  port: number;
  stunPort: number;
  /** The environment every process got: pass it to `hse` CLI calls and to further processes. */
  env: Record<string, string>;
  dataDir: string;
  runDir: string;
  redis: TestRedis | null;
  procs: Partial<Record<ImageProcess, Proc>>;
  /** With HSE_ROUTER_PROCESSES > 1, the further router processes (router-2, …), as the supervisor would start them. */
  moreRouters: Proc[];
  /** Unix socket of a service, e.g. to put a stand-in there. */
  socket(service: ServiceName): string;
  /** Stops and starts the image's processes again (same ports, data dir and Redis). */
  restart(): Promise<void>;
  /** Everything the processes printed, by name: attach it to a failing test. */
  logs(): string;
  /** Stops everything and removes the data dir. */
  stop(): Promise<void>;
}

export async function startImage(opts: ImageOptions = {}): Promise<Image> {
  const services = opts.services ?? ['coordination', 'relay', 'console'];
  const names: ImageProcess[] = [...services, ...(opts.router === false ? [] : (['router'] as const))];
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'hse-img-'));
  const runDir = path.join(dataDir, 'run');
  fs.mkdirSync(runDir, { mode: 0o700 });
  for (const [name, content] of Object.entries(opts.dataFiles ?? {})) fs.writeFileSync(path.join(dataDir, name), content, { mode: 0o600 });
  const port = opts.port ?? (await freePort());
  const stunPort = opts.stunPort ?? (await freeUdpPort());
  const useRedis = opts.redis ?? services.length > 0;
  let redis: TestRedis | null = null;
  const procs: Partial<Record<ImageProcess, Proc>> = {};
  const moreRouters: Proc[] = [];
  const earlierLogs: string[] = [];

  if (useRedis) redis = await startRedis(fs.mkdtempSync(path.join(os.tmpdir(), 'hse-img-redis-')));
  const env: Record<string, string> = {
    HSE_DATA_DIR: dataDir,
    HSE_HTTP_PORT: String(port),
    HSE_STUN_PORT: String(stunPort),
    HSE_PUBLIC_URL: opts.publicUrl ?? `http://127.0.0.1:${port}`,
    HSE_LISTEN_ADDRESS: '127.0.0.1',
    ...(redis ? { HSE_REDIS_URL: redis.url } : {}),
    ...opts.env,
  };
  const cfg = parseConfig(env);

  const currentLogs = () =>
    [
      ...names.filter((n) => procs[n]).map((n) => `----- ${n} -----\n${procs[n]!.output()}`),
      ...moreRouters.map((r, i) => `----- router-${i + 2} -----\n${r.output()}`),
    ].join('\n');
  const logs = () => [...earlierLogs, currentLogs()].join('\n');

  async function startAll(): Promise<void> {
    for (const n of names) procs[n] = runProcess(MAINS[n], env);
    moreRouters.length = 0;
    if (names.includes('router')) {
      for (let i = 2; i <= cfg.routerProcesses; i++) moreRouters.push(runProcess(MAINS.router, { ...env, HSE_ROUTER_INSTANCE: String(i) }));
    }
    try {
      await Promise.all([...names.map((n) => procs[n]!), ...moreRouters].map((p) => p.waitFor(LISTENING, opts.startTimeoutMs ?? 30_000)));
    } catch (e) {
      const out = logs();
      await stopAll();
      throw new Error(`image did not start: ${(e as Error).message.split('\n')[0]}\n${out}`);
    }
  }

  async function stopAll(): Promise<void> {
    // Router first, so no new work reaches a service that is going away.
    await Promise.all([procs.router?.stop(), ...moreRouters.map((r) => r.stop())]);
    await Promise.all(services.map((n) => procs[n]?.stop()));
  }

  try {
    await startAll();
  } catch (e) {
    await redis?.stop();
    fs.rmSync(dataDir, { recursive: true, force: true });
    throw e;
  }

  return {
    url: `http://127.0.0.1:${port}`,
    port,
    stunPort,
    env,
    dataDir,
    runDir,
    redis,
    procs,
    moreRouters,
    socket: (service) => serviceSocket(cfg, service),
    async restart() {
      await stopAll();
      earlierLogs.push(currentLogs());
      await startAll();
    },
    logs,
    async stop() {
      await stopAll();
      await redis?.stop();
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
