// The sign-in rate limit through the real router: 10 failed sign-ins from one address in 600 s, then 429 with
// Retry-After and a page that says when to retry; another address is not affected; a successful sign-in does not
// count; the block is logged once. Clients differ by their loopback source address, which the router (with no
// trusted proxies) takes as the client address.
import test from 'ava';
import { K } from '../../shared/redis-keys.ts';
import type { Image } from '../harness/image.ts';
import { Client, PASSWORD, startConsole } from '../harness/console-client.ts';

let image: Image;
test.before(async () => {
  image = await startConsole();
});
test.after.always(async () => {
  await image?.stop();
});

async function fail(c: Client, n: number, username = 'admin'): Promise<number[]> {
  const csrf = await c.loginForm();
  const statuses: number[] = [];
  for (let i = 0; i < n; i++) {
    const r = await c.request('/console/login', { form: { username, password: `wrong-${i}`, csrf } });
    statuses.push(r.status);
  }
  return statuses;
}

test.serial('10 failures from one address, then 429 with Retry-After; another address still signs in', async (t) => {
  const attacker = new Client(image.url, '127.0.0.2');
  t.deepEqual(await fail(attacker, 10), Array(10).fill(401));

  const csrf = await attacker.loginForm();
  // Even the right password is refused now: the limit stops guessing, whatever the guess.
  const blocked = await attacker.request('/console/login', { form: { username: 'admin', password: PASSWORD, csrf } });
  t.is(blocked.status, 429);
  const retryAfter = Number(blocked.headers['retry-after']);
  t.true(Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 600, `Retry-After: ${blocked.headers['retry-after']}`);
  t.regex(blocked.body, /Too many failed sign-ins from your address \(127\.0\.0\.2\)/);
  t.regex(blocked.body, /You can try again at <time datetime="[^"]+">\d\d:\d\d:\d\d UTC<\/time>/);
  t.false([...attacker.jar.keys()].some((k) => k.startsWith('hse_session')));
  t.is((await attacker.request('/console/login', { form: { username: 'admin', password: 'x', csrf } })).status, 429);

  const neighbour = new Client(image.url, '127.0.0.3');
  const ok = await neighbour.signIn('admin', PASSWORD);
  t.is(ok.status, 303, 'one address never blocks another');
  t.is((await neighbour.request('/console/logs')).status, 200);

  // One "rate limited" entry per blocked period, however often the address knocks.
  const api = JSON.parse((await neighbour.request('/console/api/logs?action=console.signin_ratelimited')).body) as { entries: { ip: string; actor: string }[] };
  t.is(api.entries.length, 1);
  t.is(api.entries[0].ip, '127.0.0.2');
  const failed = JSON.parse((await neighbour.request('/console/api/logs?action=console.signin_failed&address=127.0.0.2')).body) as { entries: unknown[] };
  t.is(failed.entries.length, 10, 'refused attempts are not sign-in failures');
});

test.serial('only failures count: a successful sign-in gives its attempt back', async (t) => {
  const c = new Client(image.url, '127.0.0.4');
  t.deepEqual(await fail(c, 9), Array(9).fill(401));
  t.is((await c.signIn('admin', PASSWORD)).status, 303);
  // Nine failures and a success: one more failure is the tenth, still answered normally.
  const fresh = new Client(image.url, '127.0.0.4');
  t.deepEqual(await fail(fresh, 1), [401]);
  t.deepEqual(await fail(fresh, 1), [429]);
});

test.serial('the limit lives in Redis per address, and expires with its window', async (t) => {
  const redis = image.redis!.client();
  const key = `${K.consoleRateLimitPrefix}signin:127.0.0.2`;
  t.is(await redis.zcard(key), 10);
  const ttl = await redis.pttl(key);
  t.true(ttl > 0 && ttl <= 600_000, `TTL ${ttl}`);
});

/** An administrator's client, to create accounts and read the activity log. */
async function administrator(): Promise<Client> {
  const c = new Client(image.url, '127.0.3.1');
  const r = await c.signIn('admin', PASSWORD);
  if (r.status !== 303) throw new Error(`admin sign-in answered ${r.status}`);
  return c;
}

async function entries(admin: Client, action: string): Promise<{ ip: string; actor: string; target: string; details: Record<string, unknown> }[]> {
  const r = await admin.request(`/console/api/logs?action=${encodeURIComponent(action)}&limit=100`);
  return (JSON.parse(r.body) as { entries: { ip: string; actor: string; target: string; details: Record<string, unknown> }[] }).entries;
}

test.serial('wrong current passwords on one’s own password change count like failed sign-ins', async (t) => {
  const admin = await administrator();
  await admin.post('/console/accounts', { username: 'ivan', role: 'auditor', password: 'ivan the auditor password' });
  // Someone holding ivan's session (a stolen cookie) guesses at the current password to take the account over.
  const thief = new Client(image.url, '127.0.4.1');
  t.is((await thief.signIn('ivan', 'ivan the auditor password')).status, 303);
  const statuses: number[] = [];
  for (let i = 0; i < 10; i++) {
    const r = await thief.post('/console/account/password', { current: `guess-${i}`, password: 'taken over for good', confirm: 'taken over for good' });
    statuses.push(r.status);
  }
  t.deepEqual(statuses, Array(10).fill(401));
  const right = await thief.post('/console/account/password', {
    current: 'ivan the auditor password',
    password: 'taken over for good',
    confirm: 'taken over for good',
  });
  t.is(right.status, 429, 'the right guess after ten wrong ones is refused like a sign-in');
  t.regex(right.body, /Too many failed/);
  t.truthy(right.headers['retry-after']);
  t.is((await new Client(image.url, '127.0.5.1').signIn('ivan', 'ivan the auditor password')).status, 303, 'the password did not change');
});

test.serial('failures against one account from many addresses lock it against their networks, not against its owner', async (t) => {
  const admin = await administrator();
  await admin.post('/console/accounts', { username: 'judy', role: 'admin', password: 'judy has a long password' });
  // An attacker with a whole network guesses from several of its addresses, each below the per-address limit.
  for (const [addr, n] of [
    ['127.0.6.1', 7],
    ['127.0.6.2', 7],
    ['127.0.6.3', 6],
  ] as const) {
    t.deepEqual(await fail(new Client(image.url, addr), n, 'judy'), Array(n).fill(401), addr);
  }
  // A fresh address of the same network: locked out of this account, even with the right password...
  const fresh = new Client(image.url, '127.0.6.200');
  const locked = await fresh.signIn('judy', 'judy has a long password');
  t.is(locked.status, 429);
  t.regex(locked.body, /judy/);
  t.truthy(locked.headers['retry-after']);
  t.is((await new Client(image.url, '127.0.6.201').signIn('admin', PASSWORD)).status, 303, '...but not out of other accounts');
  // ...while the owner, from a network that has not failed, signs in.
  t.is((await new Client(image.url, '127.0.7.1').signIn('judy', 'judy has a long password')).status, 303);
  // (The earlier tests' twenty failures for "admin" locked that account too: only judy's lock is this test's.)
  const lock = (await entries(admin, 'console.signin_account_locked')).filter((e) => e.target === 'judy');
  t.is(lock.length, 1, JSON.stringify(lock));
  t.like(lock[0], { target: 'judy' });
  t.true(Number(lock[0].details.failures) >= 20, JSON.stringify(lock[0]));
});
