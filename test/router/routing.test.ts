// Through the real router process: which service each path reaches, and what the service learns about the client.
import test from 'ava';
import { CLIENT_IP_HEADER } from '../../shared/paths.ts';
import { connect, Received, request, startRouterRig, type RouterRig } from './client.ts';

let plain: RouterRig;
let behindProxy: RouterRig;

test.before(async () => {
  [plain, behindProxy] = await Promise.all([
    startRouterRig(),
    // Proxy mode, with the proxy on 127.0.0.1: requests from 127.0.0.2 stand for clients reaching the port directly.
    startRouterRig({ publicUrl: 'https://vpn.example.com', env: { HSE_TLS: 'off', HSE_TRUSTED_PROXIES: '127.0.0.1' } }),
  ]);
});

test.after.always(async () => {
  await plain?.stop();
  await behindProxy?.stop();
});

const ROUTES: [string, string][] = [
  ['/', 'coordination'],
  ['/key?v=130', 'coordination'],
  ['/ts2021', 'coordination'],
  ['/machine/map', 'coordination'],
  ['/console', 'console'],
  ['/console/', 'console'],
  ['/console/login?next=%2F', 'console'],
  ['/console/api/nodes/7', 'console'],
  ['/consolex', 'coordination'],
  ['/consoles/x', 'coordination'],
  ['/derp', 'relay'],
  ['/derp/probe', 'relay'],
  ['/derp/latency-check', 'relay'],
  ['/derpx', 'coordination'],
  ['/generate_204', 'relay'],
  ['/generate_2045', 'coordination'],
  ['/health', 'coordination'],
];

for (const [path, service] of ROUTES) {
  test(`${path} goes to ${service}`, async (t) => {
    const r = await request(plain.image.url + path);
    t.is(r.status, 200);
    const echo = JSON.parse(r.body);
    t.is(echo.service, service);
    t.is(echo.url, path, 'the target reaches the service unchanged');
  });
}

test('method, body and an unusual target reach the service unchanged', async (t) => {
  const s = await connect(plain.image.port);
  const got = new Received(s);
  s.write('PUT /a//b/../c?x=1&x=2 HTTP/1.1\r\nHost: h\r\nContent-Type: text/plain\r\nContent-Length: 7\r\nConnection: close\r\n\r\npayload');
  await got.closed;
  const echo = JSON.parse(got.text.slice(got.text.indexOf('{'), got.text.lastIndexOf('}') + 1));
  t.is(echo.method, 'PUT');
  t.is(echo.url, '/a//b/../c?x=1&x=2');
  t.is(echo.headers['content-length'], '7');
});

test('an absolute-form target routes by its path', async (t) => {
  const s = await connect(plain.image.port);
  const got = new Received(s);
  s.write(`GET http://127.0.0.1:${plain.image.port}/console/x?y=1 HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`);
  await got.closed;
  const body = JSON.parse(got.text.slice(got.text.indexOf('{'), got.text.lastIndexOf('}') + 1));
  t.is(body.service, 'console');
  t.is(body.url, '/console/x?y=1');
});

test('forged client-address headers never reach a service; the router sets its own', async (t) => {
  const r = await request(`${plain.image.url}/console/x`, {
    headers: {
      'X-Forwarded-For': '6.6.6.6',
      'X-Real-IP': '6.6.6.7',
      Forwarded: 'for=6.6.6.8;proto=https',
      'True-Client-IP': '6.6.6.9',
      'X-Forwarded-Proto': 'https',
      'X-Forwarded-Host': 'evil.example',
      'X-HSE-Client-IP': '6.6.6.10',
      'X-Hse-Anything': 'x',
      'CF-Connecting-IP': '6.6.6.11',
    },
  });
  const h = JSON.parse(r.body).headers;
  t.is(h[CLIENT_IP_HEADER], '127.0.0.1');
  t.is(h['x-forwarded-for'], '127.0.0.1');
  t.is(h['x-forwarded-proto'], 'http');
  t.is(h['x-forwarded-host'], `127.0.0.1:${plain.image.port}`);
  for (const gone of ['x-real-ip', 'forwarded', 'true-client-ip', 'x-hse-anything', 'cf-connecting-ip']) t.is(h[gone], undefined, gone);
});

test('a header the client lists in Connection is not passed on, but the router’s own still are', async (t) => {
  const s = await connect(plain.image.port);
  const got = new Received(s);
  s.write('GET /x HTTP/1.1\r\nHost: h\r\nConnection: close, x-hse-client-ip, x-secret\r\nX-Secret: 1\r\n\r\n');
  await got.closed;
  const body = got.text.slice(got.text.indexOf('{'), got.text.lastIndexOf('}') + 1);
  const h = JSON.parse(body).headers;
  t.is(h['x-secret'], undefined);
  t.is(h[CLIENT_IP_HEADER], '127.0.0.1');
});

test('behind a trusted proxy the service sees the address the proxy appended', async (t) => {
  const r = await request(`${behindProxy.image.url}/console/x`, { headers: { 'X-Forwarded-For': '6.6.6.6, 203.0.113.9', 'X-Real-IP': '6.6.6.6' } });
  const h = JSON.parse(r.body).headers;
  t.is(h[CLIENT_IP_HEADER], '203.0.113.9');
  t.is(h['x-forwarded-for'], '203.0.113.9');
  t.is(h['x-real-ip'], undefined);
});

test('a client reaching the port directly (not the trusted proxy) cannot forge its address', async (t) => {
  const r = await request(`${behindProxy.image.url}/x`, { localAddress: '127.0.0.2', headers: { 'X-Forwarded-For': '203.0.113.9' } });
  const h = JSON.parse(r.body).headers;
  t.is(h[CLIENT_IP_HEADER], '127.0.0.2');
  t.is(h['x-forwarded-for'], '127.0.0.2');
});

test('proxy mode: X-Forwarded-Proto is https on everything, and no HSTS leaves the router', async (t) => {
  for (const path of ['/key', '/console/x', '/derp/probe']) {
    const r = await request(behindProxy.image.url + path, { headers: { 'X-Forwarded-Proto': 'http' } });
    t.is(JSON.parse(r.body).headers['x-forwarded-proto'], 'https', path);
    t.is(r.headers['strict-transport-security'], undefined, path);
  }
});

test('an h2c upgrade is declined: the request is answered over HTTP/1.1 by the service', async (t) => {
  const r = await request(`${plain.image.url}/key`, {
    headers: { Connection: 'Upgrade, HTTP2-Settings', Upgrade: 'h2c', 'HTTP2-Settings': 'AAMAAABkAAQAoAAAAAIAAAAA' },
  });
  t.is(r.status, 200);
  const echo = JSON.parse(r.body);
  t.is(echo.service, 'coordination');
  t.is(echo.headers.upgrade, undefined);
  t.is(echo.headers['http2-settings'], undefined);
});

test('connections are kept alive across requests (the service’s Connection: close is not passed on)', async (t) => {
  const s = await connect(plain.image.port);
  const got = new Received(s);
  s.write('GET /one HTTP/1.1\r\nHost: h\r\n\r\n');
  await got.until((b) => b.toString().includes('"/one"'));
  s.write('GET /console/two HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n');
  await got.closed;
  t.regex(got.text, /"service":"coordination","method":"GET","url":"\/one"/);
  t.regex(got.text, /"service":"console","method":"GET","url":"\/console\/two"/);
  t.notRegex(got.text.slice(0, got.text.indexOf('"/one"')), /connection: close/i);
});
