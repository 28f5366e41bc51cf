// Security review of the console through the real router: session fixation (a planted cookie, whether forged or
// another account's real session, never becomes the victim's session), sign-out ends the session server-side,
// cookie flags on plain http and behind an https public URL, and the Content-Security-Policy on every kind of
// response — with pages that would actually work under it (no inline script, handlers or style attributes).
import test from 'ava';
import { Client, cookieAttributes, type EventStream } from '../harness/console-client.ts';
import { startImage, type Image } from '../harness/image.ts';
import { CONSOLE_PASSWORD } from './lib/supervised-image.ts';

const MALLORY_PASSWORD = 'mallory has her own long password 4411';
let image: Image;

test.before(async () => {
  image = await startImage({ env: { HSE_CONSOLE_PASSWORD: CONSOLE_PASSWORD } });
  // A second, lesser account: the attacker in the fixation test.
  const admin = new Client(image.url);
  await admin.signIn('admin', CONSOLE_PASSWORD);
  const csrf = await admin.sessionCsrf();
  const r = await admin.request('/console/accounts', { form: { csrf, username: 'mallory', role: 'auditor', password: MALLORY_PASSWORD } });
  if (r.status !== 303) throw new Error(`could not create the second account: ${r.status} ${r.body.slice(0, 500)}`);
});

test.after.always(async () => {
  await image?.stop();
});

/** Who the console thinks this browser is: the signed-in name on a page, or null. */
async function viewer(c: Client): Promise<string | null> {
  const r = await c.request('/console/account');
  if (r.status !== 200) return null;
  return /class="name">([^<]+)</.exec(r.body)?.[1] ?? null;
}

test('session fixation: a planted session cookie, forged or real, never becomes the session of whoever signs in', async (t) => {
  // Forged: an id of the attacker's choosing without a valid signature is ignored, and sign-in issues a fresh one.
  const forged = new Client(image.url);
  forged.jar.set('hse_session', 'attacker-chosen-session-id');
  t.is(await viewer(forged), null);
  t.is((await forged.signIn('admin', CONSOLE_PASSWORD)).status, 303);
  t.not(forged.jar.get('hse_session'), 'attacker-chosen-session-id');
  t.regex(forged.jar.get('hse_session')!, /^[A-Za-z0-9_-]{43}$/);

  // Real: the attacker signs in with her own account and plants her cookies in the victim's browser.
  const mallory = new Client(image.url);
  t.is((await mallory.signIn('mallory', MALLORY_PASSWORD)).status, 303);
  const planted = new Map(mallory.jar);
  const victim = new Client(image.url);
  for (const [k, v] of planted) victim.jar.set(k, v);
  t.is(await viewer(victim), 'mallory', 'the planted cookie is a working session before the victim signs in');
  // The sign-in page would now redirect (someone is signed in), so post the form as a page the victim opened earlier.
  const page = new Client(image.url);
  const token = await page.loginForm();
  for (const [k, v] of page.jar) victim.jar.set(k, v);
  t.is((await victim.request('/console/login', { form: { username: 'admin', password: CONSOLE_PASSWORD, csrf: token } })).status, 303);
  t.is(await viewer(victim), 'admin');
  t.not(victim.jar.get('hse_session'), planted.get('hse_session'), 'a new session id at sign-in');
  // The attacker's cookie does not follow the victim into the administrator's session.
  const after = new Client(image.url);
  for (const [k, v] of planted) after.jar.set(k, v);
  t.not(await viewer(after), 'admin');
});

test('sign-out ends the session on the server: the old cookie replayed is signed out', async (t) => {
  const c = new Client(image.url);
  await c.signIn('admin', CONSOLE_PASSWORD);
  const saved = new Map(c.jar);
  const csrf = await c.sessionCsrf();
  t.is((await c.request('/console/logout', { form: { csrf } })).status, 303);
  const replay = new Client(image.url);
  for (const [k, v] of saved) replay.jar.set(k, v);
  t.is(await viewer(replay), null);
});

function sessionCookieLines(cookies: string[]): ReturnType<typeof cookieAttributes>[] {
  return cookies.map(cookieAttributes).filter((c) => /hse_(session|login)/.test(c.name) && c.value !== '');
}

test('cookie flags on plain http: HttpOnly, SameSite=Lax, Path=/console, no Secure (the browser would drop them)', async (t) => {
  const c = new Client(image.url);
  const form = await c.request('/console/login');
  const r = await c.request('/console/login', { form: { username: 'admin', password: CONSOLE_PASSWORD, csrf: Client.csrfOf(form.body) } });
  const lines = sessionCookieLines([...form.cookies, ...r.cookies]);
  t.true(lines.some((l) => l.name === 'hse_session'));
  t.true(lines.some((l) => l.name === 'hse_login'));
  for (const l of lines) {
    t.true('httponly' in l.attrs, `${l.name} HttpOnly`);
    t.is(l.attrs.samesite?.toLowerCase(), 'lax', `${l.name} SameSite`);
    t.is(l.attrs.path, '/console', `${l.name} Path`);
    t.false('secure' in l.attrs, `${l.name} not Secure on http`);
  }
});

test('cookie flags behind an https public URL: Secure and the __Secure- prefix', async (t) => {
  const https = await startImage({
    services: ['console', 'coordination'],
    publicUrl: 'https://vpn.example.test',
    env: { HSE_TLS: 'off', HSE_CONSOLE_PASSWORD: CONSOLE_PASSWORD },
  });
  try {
    const c = new Client(https.url);
    const form = await c.request('/console/login');
    const r = await c.request('/console/login', { form: { username: 'admin', password: CONSOLE_PASSWORD, csrf: Client.csrfOf(form.body) } });
    t.is(r.status, 303);
    const lines = sessionCookieLines([...form.cookies, ...r.cookies]);
    t.deepEqual([...new Set(lines.map((l) => l.name))].sort(), [
      '__Secure-hse_login',
      '__Secure-hse_login.sig',
      '__Secure-hse_session',
      '__Secure-hse_session.sig',
    ]);
    for (const l of lines) {
      t.true('secure' in l.attrs && 'httponly' in l.attrs, l.name);
      t.is(l.attrs.samesite?.toLowerCase(), 'lax');
    }
  } finally {
    await https.stop();
  }
});

test('CSP on every kind of console response, strict, and pages that need nothing it forbids', async (t) => {
  const anon = new Client(image.url);
  const admin = new Client(image.url);
  await admin.signIn('admin', CONSOLE_PASSWORD);
  const csrf = await admin.sessionCsrf();
  const cases: [string, Client, string, Parameters<Client['request']>[1]][] = [
    ['sign-in page', anon, '/console/login', {}],
    ['redirect', anon, '/console', {}],
    ['page needing sign-in', anon, '/console/machines', {}],
    ['404 page', anon, '/console/no-such-page', {}],
    ['405 page', anon, '/console/login', { method: 'DELETE' }],
    ['CSRF refusal', anon, '/console/login', { form: { username: 'admin', password: 'x', csrf: 'wrong' } }],
    ['not a form (415)', anon, '/console/login', { body: '{}', headers: { 'content-type': 'application/json' } }],
    ['form too large (413)', anon, '/console/login', { form: { username: 'x'.repeat(40_000) } }],
    ['static script', anon, '/console/static/logs.js', {}],
    ['static style', anon, '/console/static/console.css', {}],
    ['machines', admin, '/console/machines', {}],
    ['users', admin, '/console/users', {}],
    ['keys', admin, '/console/keys', {}],
    ['dns', admin, '/console/dns', {}],
    ['logs', admin, '/console/logs', {}],
    ['accounts', admin, '/console/accounts', {}],
    ['own account', admin, '/console/account', {}],
    ['approval page of an unknown device', admin, '/console/register/unknown-id', {}],
    ['JSON API', admin, '/console/api/logs', {}],
    ['form error', admin, '/console/users', { form: { csrf, name: '!!' } }],
  ];
  for (const [what, c, path, req] of cases) {
    const r = await c.request(path, req);
    const csp = String(r.headers['content-security-policy'] ?? '');
    t.regex(csp, /default-src 'none'/, `${what} (${r.status}): CSP`);
    t.regex(csp, /frame-ancestors 'none'/, `${what}: framing refused`);
    t.notRegex(csp, /unsafe-inline|unsafe-eval|\*/, `${what}: nothing unsafe allowed`);
    t.is(r.headers['x-content-type-options'], 'nosniff', what);
    if (String(r.headers['content-type']).startsWith('text/html')) {
      t.notRegex(r.body, /<script(?![^>]*\bsrc=)[^>]*>/i, `${what}: no inline script`);
      t.notRegex(r.body, /\son[a-z]+\s*=/i, `${what}: no inline event handler`);
      t.notRegex(r.body, /\sstyle\s*=/i, `${what}: no style attribute (the CSP would drop it)`);
      t.notRegex(r.body, /javascript:/i, `${what}: no javascript: URL`);
      t.notRegex(r.body, /\bat [^\n]*\.(ts|js):\d+:\d+/, `${what}: no stack trace`);
    }
  }
});

test('a deleted account’s session stays dead when an account of the same name is created again', async (t) => {
  const admin = new Client(image.url);
  await admin.signIn('admin', CONSOLE_PASSWORD);
  t.is((await admin.post('/console/accounts', { username: 'carol', role: 'auditor', password: 'carol the auditor password' })).status, 303);
  const carol = new Client(image.url, '127.0.0.9');
  t.is((await carol.signIn('carol', 'carol the auditor password')).status, 303);
  t.is((await carol.request('/console/api/logs')).status, 200, 'the auditor reads the log while the account exists');
  const oldCsrf = await carol.sessionCsrf();

  t.is((await admin.post('/console/accounts/carol/delete')).status, 303);
  t.is((await admin.post('/console/accounts', { username: 'Carol', role: 'admin', password: 'a different carol entirely' })).status, 303);

  // The old auditor cookie, replayed: no page, no API, and certainly not the new administrator's powers.
  const replay = new Client(image.url, '127.0.0.9');
  for (const [k, v] of carol.jar) replay.jar.set(k, v);
  t.is((await replay.request('/console/api/logs')).status, 401);
  t.is((await replay.request('/console/machines')).status, 302);
  const keys = await replay.request('/console/keys', { form: { csrf: oldCsrf, newUser: 'carolsteam', lifetime: '3600' } });
  t.is(keys.status, 403);
  t.is(await viewer(replay), null);
  // The new Carol signs in with her own password and is an administrator.
  const newCarol = new Client(image.url);
  t.is((await newCarol.signIn('carol', 'a different carol entirely')).status, 303);
  t.is(await viewer(newCarol), 'Carol');
});

test('one account opening live views over and over cannot take the slots another account needs', async (t) => {
  const admin = new Client(image.url);
  await admin.signIn('admin', CONSOLE_PASSWORD);
  await admin.post('/console/accounts', { username: 'greedy', role: 'auditor', password: 'greedy opens many streams' });
  const greedy = new Client(image.url, '127.0.0.10');
  t.is((await greedy.signIn('greedy', 'greedy opens many streams')).status, 303);
  // A second session of the same account, as a second browser would have.
  const greedy2 = new Client(image.url, '127.0.0.10');
  t.is((await greedy2.signIn('greedy', 'greedy opens many streams')).status, 303);

  const open: EventStream[] = [];
  t.teardown(() => {
    for (const s of open) s.close();
  });
  let refusedFirstAt = -1;
  const statuses = new Map<number, number>();
  // More than the console's whole budget (500 per process): a greedy account must be stopped well before it.
  for (let i = 0; i < 520; i++) {
    const who = i % 2 === 0 ? greedy : greedy2;
    const s = i % 3 === 0 ? await who.streamAt('/console/machines/stream') : await who.stream();
    statuses.set(s.res.statusCode!, (statuses.get(s.res.statusCode!) ?? 0) + 1);
    if (s.res.statusCode === 200) open.push(s);
    else {
      s.close();
      if (refusedFirstAt === -1) refusedFirstAt = i;
    }
  }
  t.true(refusedFirstAt > 0 && refusedFirstAt < 100, `the greedy account was first refused after ${refusedFirstAt} streams (${JSON.stringify([...statuses])})`);
  // Another account's live views still open.
  const logs = await admin.stream();
  const machines = await admin.streamAt('/console/machines/stream');
  open.push(logs, machines);
  t.is(logs.res.statusCode, 200);
  t.is(machines.res.statusCode, 200);
  await logs.waitForText(': connected');
});
