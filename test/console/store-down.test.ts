// Redis going away and coming back, with the real console behind the real router: while the store is down, pages
// answer 503 "store unavailable" (no stack trace) and the API says so in JSON; when a Redis comes back, even an empty
// one, the console recreates what it needs and sign-in works again without a restart. This file runs its own
// redis-server so it can kill and replace it.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import test from 'ava';
import type { Image } from '../harness/image.ts';
import { startRedis, type TestRedis } from '../harness/redis.ts';
import { Client, PASSWORD, startConsole } from '../harness/console-client.ts';

let image: Image;
let redis: TestRedis;
let dir: string;
const replacements: ReturnType<typeof spawn>[] = [];

test.before(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hse-console-redis-'));
  redis = await startRedis(dir);
  image = await startConsole({ redis: false, env: { HSE_REDIS_URL: redis.url } });
});
test.after.always(async () => {
  await image?.stop();
  for (const p of replacements) p.kill('SIGKILL');
  redis?.proc.kill('SIGKILL');
  fs.rmSync(dir, { recursive: true, force: true });
});

async function until<T>(what: string, f: () => Promise<T | undefined>, ms = 30_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`gave up waiting for ${what}`);
    await sleep(200);
  }
}

test.serial('store down: 503 pages that say so; store back (even empty): sign-in works again', async (t) => {
  const c = new Client(image.url);
  t.is((await c.signIn('admin', PASSWORD)).status, 303);
  t.is((await c.request('/console/logs')).status, 200);

  redis.proc.kill('SIGKILL');
  await new Promise((r) => redis.proc.once('exit', r));
  fs.rmSync(redis.socket, { force: true });

  const page = await until('a 503 page', async () => {
    const r = await c.request('/console/logs');
    return r.status === 503 ? r : undefined;
  });
  t.regex(page.body, /Store unavailable/);
  t.regex(page.body, /cannot reach its store \(Redis\)/);
  t.notRegex(page.body, /at .*\.ts:\d+/, 'no stack trace');
  t.regex(String(page.headers['content-type']), /text\/html/);
  const json = await c.request('/console/api/logs');
  t.is(json.status, 503);
  t.regex(JSON.parse(json.body).error, /cannot reach its store/);
  const login = await c.request('/console/login', { form: { username: 'admin', password: PASSWORD, csrf: c.jar.get('hse_login') ?? 'x' } });
  t.true([403, 503].includes(login.status), `sign-in with the store down answered ${login.status}`);

  // A new, empty Redis on the same socket: the console finds its way back.
  const fresh = spawn(
    'redis-server',
    ['--port', '0', '--unixsocket', redis.socket, '--unixsocketperm', '700', '--dir', dir, '--save', '', '--appendonly', 'no'],
    { stdio: 'ignore' },
  );
  replacements.push(fresh);
  const again = new Client(image.url);
  const ok = await until('sign-in against the new Redis', async () => {
    try {
      const r = await again.signIn('admin', PASSWORD);
      return r.status === 303 ? r : undefined;
    } catch {
      return undefined;
    }
  });
  t.is(ok.status, 303);
  t.is((await again.request('/console/logs')).status, 200);
});
