// The first administrator and account lifecycle, with real processes: a generated password printed exactly once and
// stored only as an argon2id hash; HSE_CONSOLE_PASSWORD_FILE; both password settings at once refused (exit 2);
// sessions ending at their idle and absolute lifetimes and when the account is disabled; and the reset-password tool
// ending the account's sessions.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import test from 'ava';
import { K } from '../../shared/redis-keys.ts';
import { runProcess } from '../harness/process.ts';
import { Client, PASSWORD, runTool, startConsole } from '../harness/console-client.ts';

const CREATED = /first console administrator created: .* password in (\S+) /g;

test('without a configured password one is generated into an owner-only file (never the log), and stored only hashed', async (t) => {
  const image = await startConsole({ env: { HSE_CONSOLE_PASSWORD: '' } });
  t.teardown(() => image.stop());
  const out = image.procs.console!.output();
  const lines = [...out.matchAll(CREATED)];
  t.is(lines.length, 1, out);
  const file = lines[0][1];
  t.is(file, path.join(image.dataDir, 'first-admin-password'));
  t.is(fs.statSync(file).mode & 0o777, 0o600, 'readable by the image user only');
  const password = fs.readFileSync(file, 'utf8').trim();
  t.true(password.length >= 20);
  t.false(out.includes(password), 'the password is not in the log');
  t.regex(out, new RegExp(`open ${image.env.HSE_PUBLIC_URL}/console and sign in as "admin"`));

  const stored = JSON.parse((await image.redis!.client().hget(K.consoleAccounts, 'admin'))!) as { passwordHash: string; role: string };
  t.regex(stored.passwordHash, /^\$argon2id\$/);
  t.false(JSON.stringify(stored).includes(password));
  t.is(stored.role, 'admin');

  t.is((await new Client(image.url).signIn('admin', password)).status, 303);
  t.is((await new Client(image.url).signIn('Admin', password)).status, 303, 'user names ignore case');

  await image.restart();
  t.is([...image.logs().matchAll(CREATED)].length, 1, 'not created again after a restart');
  t.is(fs.readFileSync(file, 'utf8').trim(), password, 'the file is left alone');
  t.is((await new Client(image.url).signIn('admin', password)).status, 303, 'the same password still works');
});

test('HSE_CONSOLE_PASSWORD_FILE is read (trailing newline ignored); both settings at once are refused', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hse-console-pw-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'pw');
  fs.writeFileSync(file, 'from a secret file\n', { mode: 0o600 });
  const image = await startConsole({ env: { HSE_CONSOLE_PASSWORD: '', HSE_CONSOLE_PASSWORD_FILE: file, HSE_CONSOLE_USER: 'root@example' } });
  t.teardown(() => image.stop());
  t.is((await new Client(image.url).signIn('root@example', 'from a secret file')).status, 303);

  const both = runProcess('services/console/src/main.ts', {
    ...image.env,
    HSE_CONSOLE_PASSWORD: 'x',
    HSE_CONSOLE_PASSWORD_FILE: file,
    HSE_RUN_DIR: path.join(dir, 'run'),
  });
  t.is(await both.exited(), 2);
  t.regex(both.output(), /refused configuration: HSE_CONSOLE_PASSWORD_FILE: set either HSE_CONSOLE_PASSWORD or HSE_CONSOLE_PASSWORD_FILE, not both/);
  const missing = runProcess('services/console/src/main.ts', {
    ...image.env,
    HSE_CONSOLE_PASSWORD: '',
    HSE_CONSOLE_PASSWORD_FILE: path.join(dir, 'nope'),
    HSE_CONSOLE_USER: 'other',
    HSE_RUN_DIR: path.join(dir, 'run'),
  });
  t.is(await missing.exited(), 2);
  t.regex(missing.output(), /HSE_CONSOLE_PASSWORD_FILE: cannot read ".*nope" \(ENOENT\)/);
});

test('sessions end at the idle and absolute lifetimes, and when the account is disabled', async (t) => {
  const image = await startConsole();
  t.teardown(() => image.stop());
  const redis = image.redis!.client();
  const hour = 3_600_000;

  async function signedIn(): Promise<{ c: Client; key: string }> {
    const c = new Client(image.url);
    await c.signIn('admin', PASSWORD);
    return { c, key: `${K.consoleSessionPrefix}${c.jar.get('hse_session')}` };
  }
  async function age(key: string, field: 'authAt' | 'seen', ms: number): Promise<void> {
    const s = JSON.parse((await redis.get(key))!) as Record<string, number>;
    s[field] = Date.now() - ms;
    await redis.set(key, JSON.stringify(s), 'KEEPTTL');
  }

  const idle = await signedIn();
  t.is((await idle.c.request('/console/logs')).status, 200);
  await age(idle.key, 'seen', hour + 1000);
  t.is((await idle.c.request('/console/logs')).status, 302, 'idle for over an hour');
  t.is(await redis.exists(idle.key), 0, 'and its record is deleted, not left to its TTL');

  const old = await signedIn();
  await age(old.key, 'authAt', 8 * hour + 1000);
  t.is((await old.c.request('/console/logs')).status, 302, 'signed in over 8 hours ago, though active');

  const d = await signedIn();
  const account = JSON.parse((await redis.hget(K.consoleAccounts, 'admin'))!) as Record<string, unknown>;
  await redis.hset(K.consoleAccounts, 'admin', JSON.stringify({ ...account, disabled: true }));
  t.is((await d.c.request('/console/logs')).status, 302, 'account disabled');
  t.is(await redis.exists(d.key), 0, 'and the session record is gone');
  t.is((await new Client(image.url).signIn('admin', PASSWORD)).status, 401, 'a disabled account cannot sign in');
  await redis.hset(K.consoleAccounts, 'admin', JSON.stringify(account));
});

test("reset-password sets a new password, ends the account's sessions and logs it", async (t) => {
  const image = await startConsole();
  t.teardown(() => image.stop());
  const c = new Client(image.url);
  await c.signIn('admin', PASSWORD);
  t.is((await c.request('/console/logs')).status, 200);

  const reset = await runTool('services/console/src/reset-password.ts', ['admin'], image.env);
  t.is(reset.code, 0, reset.output);
  const m = /new password of "admin" \(shown only now\): (\S+)/.exec(reset.output);
  t.truthy(m, reset.output);

  t.is((await c.request('/console/logs')).status, 302, 'the old session has ended');
  t.is((await new Client(image.url).signIn('admin', PASSWORD)).status, 401);
  const fresh = new Client(image.url);
  t.is((await fresh.signIn('admin', m![1])).status, 303);
  const entries = JSON.parse((await fresh.request('/console/api/logs?action=console.password_reset')).body).entries as { actor: string; target: string }[];
  t.deepEqual(
    entries.map((e) => [e.actor, e.target]),
    [['cli', 'admin']],
  );

  const piped = await runTool('services/console/src/reset-password.ts', ['ADMIN'], image.env, 'chosen by the operator\n');
  t.is(piped.code, 0, piped.output);
  t.is((await new Client(image.url).signIn('admin', 'chosen by the operator')).status, 303);
  t.is((await runTool('services/console/src/reset-password.ts', ['nobody'], image.env)).code, 1);
  t.is((await runTool('services/console/src/reset-password.ts', [], image.env)).code, 2);
});
