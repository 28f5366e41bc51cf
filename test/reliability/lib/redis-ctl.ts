// A redis-server a test can kill -9 and start again on the same socket and data, configured exactly like the image's
// embedded Redis (services/redis/src/redis-conf.ts: AOF, appendfsync always, Unix socket only) unless the test asks
// for another persistence setting (to show what would be lost without it).
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { redisCommand } from '../../../services/redis/src/probe.ts';
import { redisPaths, renderRedisConf } from '../../../services/redis/src/redis-conf.ts';

export type Persistence = 'image' | 'none';

export class ControlledRedis {
  readonly dir: string;
  readonly socket: string;
  readonly conf: string;
  proc: ChildProcess | null = null;

  constructor(persistence: Persistence = 'image') {
    this.dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hse-rel-redis-'));
    this.socket = path.join(this.dir, 'redis.sock');
    const p = redisPaths(this.dir, this.socket);
    fs.mkdirSync(p.dir, { recursive: true, mode: 0o700 });
    let conf = renderRedisConf(p);
    // The control case: Redis's own defaults without a snapshot, i.e. nothing on disk at all.
    if (persistence === 'none') conf = conf.replace('appendonly yes', 'appendonly no');
    fs.writeFileSync(p.conf, conf, { mode: 0o600 });
    this.conf = p.conf;
  }

  get url(): string {
    return `unix://${this.socket}`;
  }

  get pid(): number {
    return this.proc?.pid ?? 0;
  }

  async start(): Promise<void> {
    const proc = spawn('redis-server', [this.conf], { stdio: 'ignore' });
    this.proc = proc;
    for (let i = 0; i < 200; i++) {
      if (proc.exitCode !== null) throw new Error(`redis-server exited with ${proc.exitCode}`);
      if ((await redisCommand(this.socket, ['PING'], 500)) === '+PONG') return;
      await sleep(25);
    }
    throw new Error('redis-server did not answer PING');
  }

  /** kill -9: no chance to flush or save anything. Resolves once the process is gone. */
  async kill9(): Promise<void> {
    const p = this.proc;
    if (!p || p.exitCode !== null || p.signalCode !== null) return;
    const gone = new Promise((r) => p.once('exit', r));
    p.kill('SIGKILL');
    await gone;
  }

  async config(name: string): Promise<string | null> {
    const { Redis } = await import('ioredis');
    const r = new Redis({ path: this.socket, lazyConnect: true, maxRetriesPerRequest: 1 });
    try {
      await r.connect();
      const v = (await r.config('GET', name)) as string[];
      return v[1] ?? null;
    } finally {
      r.disconnect();
    }
  }

  async destroy(): Promise<void> {
    await this.kill9();
    fs.rmSync(this.dir, { recursive: true, force: true });
  }
}
