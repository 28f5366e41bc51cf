// Proxy mode (HSE_PUBLIC_URL=https://…, HSE_TLS=off) through the real router: redirects land on the public https URL,
// cookies are Secure (and __Secure- prefixed), no HSTS. And the documented pitfall, both sides: behind a reverse proxy
// that is not listed in HSE_TRUSTED_PROXIES every visitor is the proxy, so ten failures from anyone block everyone;
// with the proxy trusted, each visitor has their own budget and the activity log shows their real address.
// The test client plays the reverse proxy: it connects from 127.0.0.1 and sends X-Forwarded-For. Serial, because the
// pitfall test blocks 127.0.0.1 on the untrusted image for the rest of the file.
import test from 'ava';
import type { Image } from '../harness/image.ts';
import { Client, cookieAttributes, PASSWORD, startConsole } from '../harness/console-client.ts';

const PUBLIC = 'https://vpn.example.test';

const untrusted: { image?: Image } = {};
const trusted: { image?: Image } = {};
test.before(async () => {
  [untrusted.image, trusted.image] = await Promise.all([
    startConsole({ publicUrl: PUBLIC, env: { HSE_TLS: 'off' } }),
    startConsole({ publicUrl: PUBLIC, env: { HSE_TLS: 'off', HSE_TRUSTED_PROXIES: '127.0.0.1' } }),
  ]);
});
test.after.always(async () => {
  await Promise.all([untrusted.image?.stop(), trusted.image?.stop()]);
});

/** A browser behind the reverse proxy at 127.0.0.1, whose real address is `ip`. */
function visitor(image: Image, ip: string): Client {
  const c = new Client(image.url);
  const request = c.request.bind(c);
  c.request = (path, r = {}) => request(path, { ...r, headers: { 'x-forwarded-for': ip, 'x-forwarded-proto': 'https', ...r.headers } });
  return c;
}

test.serial('redirects go to the public https URL, whatever Host the request carried', async (t) => {
  const c = new Client(untrusted.image!.url);
  const r = await c.request('/console', { headers: { host: 'evil.example', 'x-forwarded-host': 'evil.example' } });
  t.is(r.status, 302);
  t.is(r.headers.location, `${PUBLIC}/console/login`);
  const signedIn = await c.signIn('admin', PASSWORD, '/console/logs');
  t.is(signedIn.headers.location, `${PUBLIC}/console/logs`);
  t.is(signedIn.headers['strict-transport-security'], undefined, 'no HSTS from the image in proxy mode');
});

test.serial('cookies are Secure, HttpOnly, SameSite=Lax and scoped to /console in proxy mode', async (t) => {
  const c = new Client(untrusted.image!.url);
  const form = await c.request('/console/login');
  const login = form.cookies.map(cookieAttributes).find((x) => x.name === '__Secure-hse_login')!;
  t.truthy(login, form.cookies.join('\n'));
  t.true('secure' in login.attrs);
  const r = await c.signIn('admin', PASSWORD);
  t.is(r.status, 303);
  const sess = r.cookies.map(cookieAttributes).find((x) => x.name === '__Secure-hse_session' && x.value !== '')!;
  t.truthy(sess, r.cookies.join('\n'));
  t.true('secure' in sess.attrs);
  t.true('httponly' in sess.attrs);
  t.is(sess.attrs.samesite, 'lax');
  t.is(sess.attrs.path, '/console');
  t.is(r.headers['strict-transport-security'], undefined);
});

async function failTen(c: Client): Promise<void> {
  const csrf = Client.csrfOf((await c.request('/console/login')).body);
  for (let i = 0; i < 10; i++) await c.request('/console/login', { form: { username: 'admin', password: `nope-${i}`, csrf } });
}

async function attempt(c: Client): Promise<number> {
  const csrf = Client.csrfOf((await c.request('/console/login')).body);
  return (await c.request('/console/login', { form: { username: 'admin', password: PASSWORD, csrf } })).status;
}

test.serial("pitfall: proxy not trusted -> every visitor is the proxy, and one visitor's failures block all", async (t) => {
  const image = untrusted.image!;
  await failTen(visitor(image, '203.0.113.10'));
  t.is(await attempt(visitor(image, '198.51.100.20')), 429, 'an innocent visitor is blocked too');
  const admin = new Client(image.url, '127.0.0.2'); // a different peer: not the proxy
  await admin.signIn('admin', PASSWORD);
  const entries = (JSON.parse((await admin.request('/console/api/logs?action=console.signin_failed')).body) as { entries: { ip: string }[] }).entries;
  t.true(entries.length >= 10);
  t.true(
    entries.every((e) => e.ip === '127.0.0.1'),
    'the log can only name the proxy',
  );
});

test.serial('fixed: proxy trusted -> each visitor has their own budget and their own address in the log', async (t) => {
  const image = trusted.image!;
  await failTen(visitor(image, '203.0.113.10'));
  t.is(await attempt(visitor(image, '203.0.113.10')), 429);
  t.is(await attempt(visitor(image, '198.51.100.20')), 303, 'another visitor is unaffected');
  const admin = visitor(image, '198.51.100.20');
  t.is((await admin.signIn('admin', PASSWORD)).status, 303);
  const entries = (JSON.parse((await admin.request('/console/api/logs?action=console.signin*')).body) as { entries: { action: string; ip: string }[] }).entries;
  t.is(entries.filter((e) => e.action === 'console.signin_failed' && e.ip === '203.0.113.10').length, 10);
  t.truthy(entries.find((e) => e.action === 'console.signin' && e.ip === '198.51.100.20'));
  t.truthy(entries.find((e) => e.action === 'console.signin_ratelimited' && e.ip === '203.0.113.10'));
});
