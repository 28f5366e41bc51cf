// The whole image the way an operator runs it: the real pm2 (own PM2_HOME, test/supervisor/pm2.ts) with
// ecosystem.config.js, the embedded Redis (AOF, appendfsync always), router, coordination, console and relay,
// everything on loopback under a temp HSE_DATA_DIR. Crash tests kill -9 its processes and watch pm2 bring them back.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { AdminClient } from '../../../shared/admin-client.ts';
import { redisCommand } from '../../../services/redis/src/probe.ts';
import { freePort, freeUdpPort } from '../../harness/process.ts';
import { Pm2, type Pm2App } from '../../supervisor/pm2.ts';

export type AppName = 'redis' | 'router' | 'coordination' | 'console' | 'relay';
export const APPS: AppName[] = ['redis', 'router', 'coordination', 'console', 'relay'];
export const CONSOLE_PASSWORD = 'reliability console password 7f3a';
/** Each main logs this once it serves (the router: "listening on http://…"; redis-server its own ready line). */
const LISTENING = /INFO +[a-z]+: listening|ready to accept connections/g;

export interface SupervisedImage {
  url: string;
  port: number;
  stunPort: number;
  dataDir: string;
  runDir: string;
  env: Record<string, string>;
  pm2: Pm2;
  admin: AdminClient;
  /** A client of the embedded Redis on its socket (retries across restarts). */
  redis(): Redis;
  app(name: AppName): Promise<Pm2App>;
  /** Everything pm2 collected from this app (all its runs). */
  log(name: AppName): Promise<string>;
  /** The redis-server the supervisor runs (what "kill -9 Redis" hits). */
  redisServerPid(): Promise<number>;
  /**
   * kill -9 the app's process (for redis: the redis-server itself), then waits until pm2 has restarted it and the
   * new process logged "listening". Returns the kill time and the time the new process served.
   */
  crash(name: AppName, timeoutMs?: number): Promise<{ killedAt: number; servingAt: number }>;
  /** Waits until `name` has logged "listening" at least `times` times in all. */
  waitListening(name: AppName, times: number, timeoutMs?: number): Promise<number>;
  destroy(): Promise<void>;
}

/** pm2 keeps one log file pair per app across restarts; read them directly (a `pm2 jlist` costs a Node start). */
function readLog(files: string[]): string {
  return files.map((f) => (fs.existsSync(f) ? fs.readFileSync(f, 'utf8') : '')).join('');
}

export async function startSupervisedImage(extraEnv: Record<string, string> = {}): Promise<SupervisedImage> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'hse-rel-'));
  const port = await freePort();
  const stunPort = await freeUdpPort();
  const env: Record<string, string> = {
    HSE_DATA_DIR: dataDir,
    HSE_HTTP_PORT: String(port),
    HSE_LISTEN_ADDRESS: '127.0.0.1',
    HSE_PUBLIC_URL: `http://127.0.0.1:${port}`,
    HSE_STUN_PORT: String(stunPort),
    HSE_STUN_LISTEN: '127.0.0.1',
    HSE_CONSOLE_PASSWORD: CONSOLE_PASSWORD,
    ...extraEnv,
  };
  const pm2 = new Pm2(env);
  const runDir = path.join(dataDir, 'run');
  const redisClients: Redis[] = [];
  const logFiles = new Map<AppName, string[]>();
  const logOf = async (name: AppName): Promise<string> => {
    let files = logFiles.get(name);
    if (!files) {
      const a = await pm2.app(name);
      files = [a.pm2_env.pm_out_log_path, a.pm2_env.pm_err_log_path];
      logFiles.set(name, files);
    }
    return readLog(files);
  };
  const countListening = async (name: AppName) => ((await logOf(name)).match(LISTENING) ?? []).length;

  const waitListening = async (name: AppName, times: number, timeoutMs = 60_000): Promise<number> => {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if ((await countListening(name)) >= times) return Date.now();
      if (Date.now() > deadline) {
        const a = await pm2.app(name);
        throw new Error(
          `${name} did not log "listening" ${times} time(s) within ${timeoutMs} ms; status ${a.pm2_env.status}; log tail:\n${pm2.log(a).slice(-3000)}`,
        );
      }
      await sleep(50);
    }
  };

  // run.sh execs redis-server, so the app's own process is the store.
  const redisServerPid = async (): Promise<number> => (await pm2.app('redis')).pid;

  const image: SupervisedImage = {
    url: `http://127.0.0.1:${port}`,
    port,
    stunPort,
    dataDir,
    runDir,
    env,
    pm2,
    admin: new AdminClient(path.join(runDir, 'coordination-admin.sock')),
    redis() {
      const r = new Redis({ path: path.join(runDir, 'redis.sock'), maxRetriesPerRequest: 100, retryStrategy: () => 100 });
      r.on('error', () => {});
      redisClients.push(r);
      return r;
    },
    app: (name) => pm2.app(name),
    log: logOf,
    redisServerPid,
    waitListening,
    async crash(name, timeoutMs = 60_000) {
      const before = await countListening(name);
      const pid = name === 'redis' ? await redisServerPid() : (await pm2.app(name)).pid;
      const killedAt = Date.now();
      process.kill(pid, 'SIGKILL');
      const servingAt = await waitListening(name, before + 1, timeoutMs);
      return { killedAt, servingAt };
    },
    async destroy() {
      for (const r of redisClients) r.disconnect();
      await pm2.kill();
      // A redis-server orphaned by a killed supervisor would keep our data dir busy: stop it through its socket.
      const sock = path.join(runDir, 'redis.sock');
      if ((await redisCommand(sock, ['PING'], 500)) !== null) await redisCommand(sock, ['SHUTDOWN', 'NOSAVE'], 2_000);
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };

  try {
    await pm2.cli('start', 'ecosystem.config.js');
    for (const name of APPS) await waitListening(name, 1, 90_000);
  } catch (e) {
    await image.destroy();
    throw e;
  }
  return image;
}
