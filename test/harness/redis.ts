// Starts a real redis-server (Debian's) for a test, on a Unix socket in a temp dir, no TCP port.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';

export interface TestRedis {
  socket: string;
  dir: string;
  url: string;
  client(): Redis;
  stop(): Promise<void>;
  proc: ChildProcess;
}

export async function startRedis(dir?: string): Promise<TestRedis> {
  const d = dir ?? fs.mkdtempSync(path.join(os.tmpdir(), 'hse-redis-'));
  const socket = path.join(d, 'redis.sock');
  const proc = spawn('redis-server', ['--port', '0', '--unixsocket', socket, '--unixsocketperm', '700', '--dir', d, '--save', '', '--appendonly', 'no'], {
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const clients: Redis[] = [];
  for (let i = 0; i < 100 && !fs.existsSync(socket); i++) await sleep(50);
  if (!fs.existsSync(socket)) throw new Error('redis-server did not start (is the redis-server package installed?)');
  return {
    socket,
    dir: d,
    url: `unix://${socket}`,
    proc,
    client() {
      const c = new Redis({ path: socket });
      clients.push(c);
      return c;
    },
    async stop() {
      for (const c of clients) c.disconnect();
      proc.kill('SIGKILL');
      await new Promise((r) => proc.once('exit', r));
      fs.rmSync(d, { recursive: true, force: true });
    },
  };
}
