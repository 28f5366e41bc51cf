// Sign-in, sessions and CSRF through the real router, with the real console process and a real Redis, in local mode
// (plain http public URL): redirect to the sign-in page, cookie attributes, a new session id at sign-in, CSRF
// refusals, sign-out that ends the session server-side, security headers, the form size cap, and the activity entries
// carrying the client address the router saw.
import test from 'ava';
import { K } from '../../shared/redis-keys.ts';
import type { Image } from '../harness/image.ts';
import { Client, cookieAttributes, PASSWORD, startConsole } from '../harness/console-client.ts';

let image: Image;
test.before(async () => {
  image = await startConsole();
});
test.after.always(async () => {
  await image?.stop();
});

test('GET /console without a session redirects to the sign-in page on the public URL', async (t) => {
  const c = new Client(image.url);
  const r = await c.request('/console');
  t.is(r.status, 302);
  t.is(r.headers.location, `${image.env.HSE_PUBLIC_URL}/console/login`);
  const deep = await c.request('/console/logs?action=console.signin');
  t.is(deep.headers.location, `${image.env.HSE_PUBLIC_URL}/console/login?next=${encodeURIComponent('/console/logs?action=console.signin')}`);
});

test('the sign-in page is a plain form for password managers and carries the security headers', async (t) => {
  const c = new Client(image.url);
  const r = await c.request('/console/login');
  t.is(r.status, 200);
  t.regex(r.body, /<form method="post" action="\/console\/login"/);
  t.regex(r.body, /name="username"[^>]*autocomplete="username"/);
  t.regex(r.body, /name="password"[^>]*type="password"[^>]*autocomplete="current-password"/);
  t.regex(r.body, /type="hidden" name="csrf" value="[A-Za-z0-9_-]{43}"/);
  t.notRegex(r.body, /<script(?![^>]*\bsrc=)[^>]*>/, 'no inline script');
  const csp = String(r.headers['content-security-policy']);
  t.regex(csp, /script-src 'self'/);
  t.regex(csp, /frame-ancestors 'none'/);
  t.notRegex(csp, /unsafe-inline/);
  t.is(r.headers['x-content-type-options'], 'nosniff');
  t.is(r.headers['referrer-policy'], 'no-referrer');
  t.is(r.headers['cache-control'], 'no-store');
  t.is(r.headers['strict-transport-security'], undefined);
  // The form's CSRF cookie: signed, HttpOnly, scoped to /console, not Secure on a plain-http public URL.
  const login = r.cookies.map(cookieAttributes).find((x) => x.name === 'hse_login')!;
  t.truthy(login);
  t.is(login.attrs.path, '/console');
  t.true('httponly' in login.attrs);
  t.false('secure' in login.attrs);
});

test('sign-in sets an HttpOnly SameSite=Lax session cookie on /console, with a new id each time (no fixation)', async (t) => {
  const c = new Client(image.url);
  // A session id planted before sign-in (e.g. by an attacker) must not survive it.
  c.jar.set('hse_session', 'planted-id');
  const r = await c.signIn('admin', PASSWORD, '/console/logs');
  t.is(r.status, 303);
  t.is(r.headers.location, `${image.env.HSE_PUBLIC_URL}/console/logs`);
  const sess = r.cookies.map(cookieAttributes).find((x) => x.name === 'hse_session' && x.value !== '');
  t.truthy(sess, r.cookies.join('\n'));
  t.not(sess!.value, 'planted-id');
  t.regex(sess!.value, /^[A-Za-z0-9_-]{43}$/);
  t.is(sess!.attrs.path, '/console');
  t.true('httponly' in sess!.attrs);
  t.is(sess!.attrs.samesite, 'lax');
  t.false('secure' in sess!.attrs);
  t.truthy(
    r.cookies.find((l) => l.startsWith('hse_session.sig=')),
    'the id cookie is signed',
  );
  const first = sess!.value;

  // Signing in again while signed in (the sign-in page itself redirects a signed-in browser, so take a fresh form
  // from another one) hands out yet another id, and the old one is gone from Redis.
  const other = new Client(image.url);
  const csrf = await other.loginForm();
  for (const [k, v] of other.jar) c.jar.set(k, v);
  const again = await c.request('/console/login', { form: { username: 'admin', password: PASSWORD, csrf } });
  t.is(again.status, 303);
  const second = again.cookies.map(cookieAttributes).find((x) => x.name === 'hse_session' && x.value !== '')!.value;
  t.not(second, first);
  const redis = image.redis!.client();
  t.is(await redis.exists(`${K.consoleSessionPrefix}${first}`), 0);
  t.is(await redis.exists(`${K.consoleSessionPrefix}${second}`), 1);
  const ttl = await redis.pttl(`${K.consoleSessionPrefix}${second}`);
  t.true(ttl > 0 && ttl <= 60 * 60 * 1000, `session TTL ${ttl} ms is bounded by the idle lifetime`);
});

test('a signed-in page shows the account and the sections, and the console opens on Machines', async (t) => {
  const c = new Client(image.url);
  await c.signIn('admin', PASSWORD);
  const r = await c.request('/console/logs');
  t.is(r.status, 200);
  t.regex(r.body, /<nav class="nav"/);
  t.regex(r.body, /href="\/console\/logs" aria-current="page">Logs</);
  for (const section of ['Machines', 'Users', 'Keys', 'Accounts']) t.regex(r.body, new RegExp(`href="/console/${section.toLowerCase()}">${section}<`));
  t.regex(r.body, /<form method="post" action="\/console\/logout"/);
  const home = await c.request('/console');
  t.is(home.headers.location, `${image.env.HSE_PUBLIC_URL}/console/machines`);
});

test('wrong password: 401, the form again, no session', async (t) => {
  const c = new Client(image.url, '127.0.0.9');
  const r = await c.signIn('admin', 'not the password');
  t.is(r.status, 401);
  t.regex(r.body, /do not match an enabled account/);
  t.false([...c.jar.keys()].some((k) => k.startsWith('hse_session')));
  t.is((await c.request('/console/logs')).status, 302);
});

test('a sign-in form without the right CSRF token is refused with 403 and a page that says so', async (t) => {
  const c = new Client(image.url);
  await c.loginForm();
  const r = await c.request('/console/login', { form: { username: 'admin', password: PASSWORD, csrf: 'forged' } });
  t.is(r.status, 403);
  t.regex(r.body, /security token/);
  // Without the form's cookie at all (a post from another site in a fresh browser):
  const bare = new Client(image.url);
  const r2 = await bare.request('/console/login', { form: { username: 'admin', password: PASSWORD, csrf: 'x'.repeat(43) } });
  t.is(r2.status, 403);
});

test('sign-out needs the session CSRF token, then destroys the session server-side', async (t) => {
  const c = new Client(image.url);
  await c.signIn('admin', PASSWORD);
  const sid = c.jar.get('hse_session')!;
  const redis = image.redis!.client();
  t.is(await redis.exists(`${K.consoleSessionPrefix}${sid}`), 1);

  const forged = await c.request('/console/logout', { form: { csrf: 'not-the-token' } });
  t.is(forged.status, 403);
  t.regex(forged.body, /security token/);
  t.is(await redis.exists(`${K.consoleSessionPrefix}${sid}`), 1, 'a refused sign-out changes nothing');

  const csrf = await c.sessionCsrf();
  const saved = c.cookieHeader();
  const out = await c.request('/console/logout', { form: { csrf } });
  t.is(out.status, 303);
  t.is(out.headers.location, `${image.env.HSE_PUBLIC_URL}/console/login?signed_out=1`);
  t.is(await redis.exists(`${K.consoleSessionPrefix}${sid}`), 0);
  // Replaying the old cookie (as a thief would) gets nowhere.
  const replay = await c.request('/console/logs', { headers: { cookie: saved } });
  t.is(replay.status, 302);
  const api = await c.request('/console/api/logs', { headers: { cookie: saved } });
  t.is(api.status, 401);
});

test('state-changing requests of a signed-in session need its CSRF token', async (t) => {
  const c = new Client(image.url);
  await c.signIn('admin', PASSWORD);
  // Any POST behind the session gate: the token is checked before anything else happens.
  const r = await c.request('/console/logs', { form: { csrf: 'wrong' } });
  t.is(r.status, 403);
  t.regex(r.body, /security token/);
});

test('forms are capped in size; a huge body is refused without being buffered', async (t) => {
  const c = new Client(image.url);
  await c.loginForm();
  const r = await c.request('/console/login', { body: `username=${'a'.repeat(64 * 1024)}`, headers: { 'content-type': 'application/x-www-form-urlencoded' } });
  t.is(r.status, 413);
  const notForm = await c.request('/console/login', { body: '{"username":"admin"}', headers: { 'content-type': 'application/json' } });
  t.is(notForm.status, 415);
});

test('sign-in and sign-out are in the activity log with the address the router saw', async (t) => {
  const c = new Client(image.url, '127.0.0.5');
  await c.signIn('admin', PASSWORD);
  const csrf = await c.sessionCsrf();
  const bad = new Client(image.url, '127.0.0.6');
  await bad.signIn('mallory', 'guess');
  await c.request('/console/logout', { form: { csrf } });

  const reader = new Client(image.url);
  await reader.signIn('admin', PASSWORD);
  const api = await reader.request('/console/api/logs?limit=500');
  t.is(api.status, 200);
  t.regex(String(api.headers['content-type']), /application\/json/);
  const entries = (JSON.parse(api.body) as { entries: { action: string; actor: string; ip: string; details: Record<string, unknown> }[] }).entries;
  t.truthy(entries.find((e) => e.action === 'console.signin' && e.ip === '127.0.0.5' && e.actor === 'admin'));
  t.truthy(entries.find((e) => e.action === 'console.signout' && e.ip === '127.0.0.5' && e.actor === 'admin'));
  const failed = entries.find((e) => e.action === 'console.signin_failed' && e.ip === '127.0.0.6');
  t.truthy(failed);
  t.is(failed!.actor, 'mallory');
  t.false(JSON.stringify(entries).includes('guess'), 'the tried password is never stored');
});
