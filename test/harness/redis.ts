// Starts a real redis-server (Debian's) for a test, on a Unix socket in a temp dir, no TCP port, no persistence.
import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { HEAD_AND_TAIL, startProcess } from './process.ts';

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
  const server = startProcess(
    'redis-server',
    'redis-server',
    ['--port', '0', '--unixsocket', socket, '--unixsocketperm', '700', '--dir', d, '--save', '', '--appendonly', 'no'],
    { keep: HEAD_AND_TAIL },
  );
  const clients: Redis[] = [];
  for (let i = 0; i < 100 && !fs.existsSync(socket); i++) await sleep(50);
  if (!fs.existsSync(socket)) {
    await server.stop('SIGKILL');
    throw new Error(`redis-server did not start (is the redis-server package installed?); output:\n${server.output()}`);
  }
  return {
    socket,
    dir: d,
    url: `unix://${socket}`,
    proc: server.proc,
    client() {
      const c = new Redis({ path: socket });
      clients.push(c);
      return c;
    },
    async stop() {
      for (const c of clients) c.disconnect();
      await server.stop('SIGKILL');
      fs.rmSync(d, { recursive: true, force: true });
    },
  };
}
