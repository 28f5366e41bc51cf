// Our image for a benchmark, started the way the container runs it (ecosystem.config.js) minus the supervisor:
// the embedded Redis (services/redis/run.sh) with its own redis.conf (AOF, appendfsync always — what operators get,
// not the test harness's throwaway Redis), then the services and the router together, each a real process of the
// pinned Node 24 on a temp HSE_DATA_DIR, on loopback, with the image's V8 flags and allocator settings
// (deploy/process-settings.js) and its compile cache, warmed once as the image build warms it. bench/memory.ts runs the
// real pm2-runtime instead, since there the supervisor itself is part of what is measured.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { AdminClient } from '../../shared/admin-client.ts';
import { parseConfig } from '../../shared/config.ts';
import { adminSocket, serviceSocket, type ServiceName } from '../../shared/paths.ts';
import { NODE_PROCESSES } from '../../deploy/process-settings.js';
import { freePort, freeUdpPort, HEAD_AND_TAIL, NODE, ROOT, startProcess, type Proc } from '../../test/harness/process.ts';

export type HseProcess = 'redis' | 'router' | ServiceName;

const MAINS: Record<HseProcess, string> = {
  redis: 'services/redis/run.sh',
  router: 'router/src/main.ts',
  coordination: 'services/coordination/src/main.ts',
  relay: 'services/relay/src/main.ts',
  console: 'services/console/src/main.ts',
};

export interface HseOptions {
  /** Default: the whole image. */
  processes?: HseProcess[];
  env?: Record<string, string>;
  /** The router's port, when other settings must name it before the start (another instance's mesh peer). */
  port?: number;
  /** Files written into the data dir (mode 600) before the start: another instance's Noise key (bench/ha.ts). */
  dataFiles?: Record<string, Buffer>;
  /** Router processes sharing the port (HSE_ROUTER_PROCESSES); default 1. */
  routers?: number;
}

export interface Hse {
  url: string;
  port: number;
  stunPort: number;
  env: Record<string, string>;
  dataDir: string;
  servers: Partial<Record<HseProcess, Proc>>;
  /** The second and later router processes (HSE_ROUTER_PROCESSES), as router-2, router-3, … */
  moreRouters: Proc[];
  /** PIDs by process name ("redis-server" for the embedded Redis). */
  pids(): Record<string, number>;
  socket(service: ServiceName): string;
  admin: AdminClient;
  /** Creates a user and a reusable pre-auth key for it; returns the key. */
  preAuthKey(user: string, opts?: { ephemeral?: boolean }): Promise<string>;
  logs(): string;
  stop(): Promise<void>;
}

/** The compile cache the image's processes use (ecosystem.config.js), warmed once per benchmark run. */
const COMPILE_CACHE = path.join(ROOT, 'node_modules', '.cache', 'hse-compile');
let warmed = false;
function warmCompileCache(): void {
  if (warmed) return;
  execFileSync(NODE, [path.join(ROOT, 'deploy/warm-compile-cache.cjs'), '--strict'], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? '/root', NODE_COMPILE_CACHE: COMPILE_CACHE },
    stdio: 'ignore',
  });
  warmed = true;
}

export async function startHse(opts: HseOptions = {}): Promise<Hse> {
  warmCompileCache();
  const processes = opts.processes ?? ['redis', 'coordination', 'relay', 'console', 'router'];
  // Short path: Unix socket names are limited to 107 bytes.
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'hse-bench-'));
  for (const [name, content] of Object.entries(opts.dataFiles ?? {})) fs.writeFileSync(path.join(dataDir, name), content, { mode: 0o600 });
  const port = opts.port ?? (await freePort());
  const stunPort = await freeUdpPort();
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: process.env.HOME ?? '/root',
    HSE_DATA_DIR: dataDir,
    HSE_TLS: 'off',
    HSE_HTTP_PORT: String(port),
    HSE_LISTEN_ADDRESS: '127.0.0.1',
    HSE_PUBLIC_URL: `http://127.0.0.1:${port}`,
    HSE_STUN_PORT: String(stunPort),
    HSE_STUN_LISTEN: '127.0.0.1',
    HSE_CONSOLE_PASSWORD: 'bench-password-not-secret',
    ...(opts.routers !== undefined && opts.routers > 1 ? { HSE_ROUTER_PROCESSES: String(opts.routers) } : {}),
    ...opts.env,
  };
  const cfg = parseConfig(env);
  const servers: Partial<Record<HseProcess, Proc>> = {};
  const moreRouters: Proc[] = [];
  const launch = (name: string, kind: HseProcess, extra: Record<string, string> = {}) => {
    const main = path.join(ROOT, MAINS[kind]);
    const own = kind === 'redis' ? null : NODE_PROCESSES[kind];
    return startProcess(name, own ? NODE : '/bin/sh', own ? [...own.v8, main] : [main], {
      env: { ...env, ...own?.env, ...extra, NODE_COMPILE_CACHE: COMPILE_CACHE },
      cwd: ROOT,
      keep: HEAD_AND_TAIL,
    });
  };
  const start = (name: HseProcess) => {
    servers[name] = launch(name, name);
    return servers[name];
  };
  const logs = () =>
    [...Object.entries(servers), ...moreRouters.map((r, i) => [`router-${i + 2}`, r] as const)]
      .map(([n, s]) => `----- ${n} -----\n${s!.output().slice(-6000)}`)
      .join('\n');
  const stop = async () => {
    await Promise.all([servers.router?.stop(), ...moreRouters.map((r) => r.stop())]);
    await Promise.all(processes.filter((p) => p !== 'router' && p !== 'redis').map((p) => servers[p]?.stop()));
    await servers.redis?.stop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  };
  try {
    if (processes.includes('redis')) {
      await start('redis').waitFor(/ready to accept connections/, 30_000);
    }
    const rest = processes.filter((p) => p !== 'redis');
    for (const p of rest) start(p);
    if (rest.includes('router')) {
      for (let i = 2; i <= (opts.routers ?? 1); i++) moreRouters.push(launch(`router-${i}`, 'router', { HSE_ROUTER_INSTANCE: String(i) }));
    }
    await Promise.all([...rest.map((p) => servers[p]!.waitFor(/listening/, 60_000)), ...moreRouters.map((r) => r.waitFor(/listening/, 60_000))]);
  } catch (e) {
    const out = logs();
    await stop();
    throw new Error(`${(e as Error).message.split('\n')[0]}\n${out}`);
  }
  const admin = new AdminClient(adminSocket(cfg));
  const who = { actor: 'bench', ip: '' };
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    stunPort,
    env,
    dataDir,
    servers,
    moreRouters,
    pids() {
      const out: Record<string, number> = {};
      // run.sh execs redis-server, so the redis process is the store itself.
      for (const [n, s] of Object.entries(servers)) out[n === 'redis' ? 'redis-server' : n] = s!.pid;
      for (const [i, r] of moreRouters.entries()) out[`router-${i + 2}`] = r.pid;
      return out;
    },
    socket: (service) => serviceSocket(cfg, service),
    admin,
    async preAuthKey(user, o = {}) {
      const users = await admin.listUsers(who);
      if (!users.some((u) => u.name === user)) await admin.createUser(who, user);
      const k = await admin.createPreAuthKey(who, { user, reusable: true, ephemeral: o.ephemeral ?? false, expiresInSeconds: 86_400 });
      return k.key;
    },
    logs,
    stop,
  };
}
