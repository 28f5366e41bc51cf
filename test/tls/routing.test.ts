// TLS mode with the real services behind the router: what browsers and clients see on both ports.
//   port 80:  redirects to the public https URL (301 for GET/HEAD, 308 otherwise; a forged Host changes nothing),
//             /generate_204 answered by the relay, no HSTS;
//   HTTPS:    HSTS on every response, HTTP/2 negotiated for clients offering h2 (a console sign-in with a form body
//             over it), HTTP/1.1 for the others with the DERP upgrade tunnelled as in proxy mode;
//   proxy mode (same image, HSE_TLS=off): no HSTS anywhere.
import net from 'node:net';
import tls from 'node:tls';
import test from 'ava';
import { createTestCA, TEST_DOMAIN, type TestCA } from '../harness/ca.ts';
import { startImage, type Image } from '../harness/image.ts';
import { probe } from '../../deploy/healthcheck.ts';
import { parseConfig } from '../../shared/config.ts';
import { h2Request, httpsRequest, plainRequest, startTlsImage, type TlsImage } from './tls-image.ts';

const PASSWORD = 'tls mode test password';
let ca: TestCA | undefined;
let img: TlsImage | undefined;

test.before(async () => {
  ca = await createTestCA();
  img = await startTlsImage({
    host: TEST_DOMAIN,
    services: ['coordination', 'relay', 'console'],
    env: { HSE_TLS_CERT_FILE: ca.certFile, HSE_TLS_KEY_FILE: ca.keyFile, HSE_CONSOLE_PASSWORD: PASSWORD },
  });
  await img.image.procs.router!.waitFor(/certificate in use/);
});

test.after.always(async () => {
  await img?.image.stop();
  ca?.remove();
});

const logs = () => img!.image.logs();

test('port 80 redirects GET and HEAD with 301 and other methods with 308, to the public URL whatever the Host says', async (t) => {
  const get = await plainRequest(img!.httpPort, '/console/login?next=%2Fconsole', { headers: { host: 'evil.example' } });
  t.is(get.status, 301);
  t.is(get.headers.location, `${img!.publicUrl}/console/login?next=%2Fconsole`);
  const head = await plainRequest(img!.httpPort, '/key?v=142', { method: 'HEAD' });
  t.is(head.status, 301);
  t.is(head.headers.location, `${img!.publicUrl}/key?v=142`);
  const post = await plainRequest(img!.httpPort, '/machine/register', { method: 'POST', body: '{}', headers: { 'content-type': 'application/json' } });
  t.is(post.status, 308);
  t.is(post.headers.location, `${img!.publicUrl}/machine/register`);
  // An upgrade asked for on port 80 is redirected too, not tunnelled.
  const up = await plainRequest(img!.httpPort, '/ts2021', { method: 'POST', headers: { upgrade: 'tailscale-control-protocol', connection: 'upgrade' } });
  t.is(up.status, 308);
  for (const r of [get, head, post, up]) t.is(r.headers['strict-transport-security'], undefined);
});

test("port 80 passes Tailscale's captive-portal probe /generate_204 to the relay", async (t) => {
  const r = await plainRequest(img!.httpPort, '/generate_204', { headers: { 'x-tailscale-challenge': 'abc123' } });
  t.is(r.status, 204, logs());
  t.is(r.headers['x-tailscale-response'], 'response abc123');
  t.is(r.headers['strict-transport-security'], undefined);
});

test('HTTPS over HTTP/1.1 carries HSTS, on service answers and on router errors alike', async (t) => {
  const key = await httpsRequest(img!.httpsPort, TEST_DOMAIN, ca!.caPem, '/key?v=142');
  t.is(key.status, 200, key.body);
  t.regex(key.body, /"publicKey":"mkey:[0-9a-f]{64}"/);
  t.is(key.headers['strict-transport-security'], 'max-age=31536000');
  const login = await httpsRequest(img!.httpsPort, TEST_DOMAIN, ca!.caPem, '/console/login');
  t.is(login.status, 200);
  t.is(login.headers['strict-transport-security'], 'max-age=31536000');
});

test('HTTP/2 is negotiated for clients offering h2: HSTS, routing and a form POST (console sign-in) work over it', async (t) => {
  const key = await h2Request(img!.httpsPort, TEST_DOMAIN, ca!.caPem, '/key?v=142');
  t.is(key.alpn, 'h2');
  t.is(key.status, 200, key.body);
  t.is(key.headers['strict-transport-security'], 'max-age=31536000');
  const page = await h2Request(img!.httpsPort, TEST_DOMAIN, ca!.caPem, '/console/login');
  t.is(page.status, 200, page.body.slice(0, 300));
  const csrf = /name="csrf" value="([^"]+)"/.exec(page.body)?.[1];
  t.truthy(csrf, 'no CSRF field on the sign-in page');
  const cookie = ([] as string[])
    .concat(page.headers['set-cookie'] ?? [])
    .map((c) => c.split(';')[0])
    .join('; ');
  const signIn = await h2Request(img!.httpsPort, TEST_DOMAIN, ca!.caPem, '/console/login', {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', cookie },
    body: new URLSearchParams({ username: 'admin', password: PASSWORD, csrf: csrf! }).toString(),
  });
  t.is(signIn.status, 303, signIn.body.slice(0, 300));
  t.is(signIn.headers['strict-transport-security'], 'max-age=31536000');
  for (const c of ([] as string[]).concat(signIn.headers['set-cookie'] ?? [])) t.regex(c, /;\s*secure/i);
});

test('clients without ALPN get HTTP/1.1, and a DERP upgrade is tunnelled to the relay over TLS', async (t) => {
  const s = tls.connect({ host: '127.0.0.1', port: img!.httpsPort, ca: ca!.caPem });
  await new Promise<void>((resolve, reject) => {
    s.once('secureConnect', () => resolve());
    s.once('error', reject);
  });
  t.is(s.alpnProtocol, false);
  s.write(`GET /derp HTTP/1.1\r\nHost: ${TEST_DOMAIN}\r\nUpgrade: DERP\r\nConnection: Upgrade\r\n\r\n`);
  let got = Buffer.alloc(0);
  await new Promise<void>((resolve, reject) => {
    const onData = (d: Buffer) => {
      got = Buffer.concat([got, d]);
      const end = got.indexOf('\r\n\r\n');
      // The head, then the relay's first frame: type 0x01 (server key), 4-byte length, "DERP🔑" magic.
      if (end !== -1 && got.length >= end + 4 + 5 + 8) {
        s.off('data', onData);
        resolve();
      }
    };
    s.on('data', onData);
    s.once('error', reject);
    s.once('close', () => reject(new Error(`closed after ${JSON.stringify(got.toString('latin1'))}`)));
  });
  s.destroy();
  const head = got.subarray(0, got.indexOf('\r\n\r\n')).toString();
  t.regex(head, /^HTTP\/1\.1 101 /);
  t.regex(head, /\r\nUpgrade: DERP/i);
  const frame = got.subarray(got.indexOf('\r\n\r\n') + 4);
  t.is(frame[0], 0x01);
  t.is(frame.subarray(5, 9).toString('latin1'), 'DERP');
});

test("proxy mode (HSE_TLS=off) sends no HSTS: that is the proxy operator's decision", async (t) => {
  let proxy: Image | undefined;
  try {
    proxy = await startImage({
      services: ['coordination'],
      publicUrl: 'https://vpn.example.test',
      env: { HSE_TLS: 'off', HSE_TRUSTED_PROXIES: '127.0.0.1/32' },
    });
    const r = await plainRequest(proxy.port, '/key?v=142');
    t.is(r.status, 200, r.body);
    t.is(r.headers['strict-transport-security'], undefined);
    const missing = await plainRequest(proxy.port, '/console');
    t.is(missing.headers['strict-transport-security'], undefined);
  } finally {
    await proxy?.stop();
  }
});

test("the container's health check passes over the router's HTTPS port in TLS mode", async (t) => {
  const r = await probe(parseConfig(img!.image.env));
  t.true(r.ok, r.line);
  t.regex(r.line, new RegExp(`https://127\\.0\\.0\\.1:${img!.httpsPort}/health answered 200`));
});

test('garbage on the HTTPS port (plain HTTP, a broken HTTP/2 preface, a truncated handshake) closes only that connection', async (t) => {
  const closedAfter = (s: net.Socket | tls.TLSSocket, write: () => void) =>
    new Promise<void>((resolve) => {
      s.on('error', () => {});
      s.once('close', () => resolve());
      // Read whatever the router answers (an alert, a GOAWAY), so its close is seen.
      s.resume();
      write();
    });
  const plain = net.connect(img!.httpsPort, '127.0.0.1');
  await closedAfter(plain, () => plain.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n'));
  const truncated = net.connect(img!.httpsPort, '127.0.0.1');
  await closedAfter(truncated, () => truncated.end(Buffer.from([0x16, 0x03, 0x01, 0x02, 0x00, 0x01])));
  const h2 = tls.connect({ host: '127.0.0.1', port: img!.httpsPort, ca: ca!.caPem, ALPNProtocols: ['h2'] });
  await new Promise<void>((resolve) => h2.once('secureConnect', () => resolve()));
  t.is(h2.alpnProtocol, 'h2');
  await closedAfter(h2, () => h2.write('this is not the HTTP/2 connection preface\r\n\r\n'));
  const r = await h2Request(img!.httpsPort, TEST_DOMAIN, ca!.caPem, '/key?v=142');
  t.is(r.status, 200);
  t.is(img!.image.procs.router!.proc.exitCode, null);
});
