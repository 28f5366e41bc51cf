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
