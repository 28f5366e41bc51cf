// The router in front of the real services (and the real nginx in front of the router), for requests the services
// answer early or that arrive without what HTTP/1.1 takes for granted:
//   - an upgrade request that carries a body, to a service that answers it without switching protocols (the console);
//   - HTTP/1.0 without Host, to every service;
//   - bodies the sign-in form refuses before reading them (too large, not a form), through nginx;
//   - /health, public, answering up or down and nothing more.
// Every wait has a deadline: "never answered" shows up as a failed test, not as a hung one.
import https from 'node:https';
import tls from 'node:tls';
import test from 'ava';
import { createTestCA, TEST_DOMAIN, type TestCA } from '../harness/ca.ts';
import { startImage, type Image } from '../harness/image.ts';
import { freePort } from '../harness/process.ts';
import { missingProxy, startProxy, type RunningProxy } from '../harness/proxies.ts';
import { connect, Received } from './client.ts';

const PASSWORD = 'early answers test password';
let image: Image;
let ca: TestCA;
let nginx: RunningProxy | null = null;

test.before(async () => {
  ca = await createTestCA();
  const ports = { https: await freePort(), http: await freePort() };
  image = await startImage({
    publicUrl: `https://${TEST_DOMAIN}:${ports.https}`,
    env: { HSE_TLS: 'off', HSE_TRUSTED_PROXIES: '127.0.0.1/32', HSE_CONSOLE_PASSWORD: PASSWORD },
  });
  if (missingProxy('nginx') === null) nginx = await startProxy('nginx', { domain: TEST_DOMAIN, upstream: { host: '127.0.0.1', port: image.port }, ca, ports });
});

test.after.always(async () => {
  await nginx?.stop();
  await image?.stop();
  ca?.remove();
});

/** Sends raw bytes to the router and returns what came back by the time the connection closed or `ms` passed. */
async function raw(bytes: string, until: (text: string) => boolean, ms = 15_000): Promise<string> {
  const s = await connect(image.port);
  const got = new Received(s);
  s.write(bytes);
  const deadline = new Promise<void>((r) => setTimeout(r, ms).unref());
  await Promise.race([got.closed, got.until((b) => until(b.toString('latin1'))).catch(() => {}), deadline]);
  s.destroy();
  return got.text;
}

/** The same through nginx's TLS port. */
async function rawViaNginx(bytes: string, until: (text: string) => boolean, ms = 15_000): Promise<string> {
  const s = tls.connect({ host: '127.0.0.1', port: nginx!.port, ca: ca.caPem });
  s.on('error', () => {});
  let text = '';
  const done = new Promise<void>((resolve) => {
    s.on('data', (d: Buffer) => {
      text += d.toString('latin1');
      if (until(text)) resolve();
    });
    s.on('close', () => resolve());
    setTimeout(resolve, ms).unref();
  });
  s.write(bytes);
  await done;
  s.destroy();
  return text;
}

const statusOf = (text: string) => /^HTTP\/1\.[01] (\d{3})/.exec(text)?.[1] ?? `no answer (${JSON.stringify(text.slice(0, 80))})`;
const hasHead = (text: string) => text.includes('\r\n\r\n');

const upgradeWithBody = (host: string) =>
  `POST /console/login HTTP/1.1\r\nHost: ${host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
  'Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 25\r\n\r\nusername=a&password=b&c=d';

test('an upgrade request with a body that the console answers without switching gets that answer', async (t) => {
  // The whole page, not just the head: on a loaded machine the body can come in a later chunk.
  const direct = await raw(upgradeWithBody(`127.0.0.1:${image.port}`), (text) => hasHead(text) && text.includes('</html>'));
  t.is(statusOf(direct), '403', `direct: ${direct.slice(0, 300)}`);
  t.regex(direct, /security token/);
});

test('the same through nginx: the console answer, not a wait for nginx to time out', async (t) => {
  if (!nginx) return t.fail(missingProxy('nginx')!);
  const via = await rawViaNginx(upgradeWithBody(`${TEST_DOMAIN}:${nginx.port}`), hasHead);
  t.is(statusOf(via), '403', `via nginx: ${via.slice(0, 300)}`);
});

test('HTTP/1.0 without Host is answered by every service as if it had named the public host', async (t) => {
  for (const [target, want] of [
    ['/key?v=142', /"publicKey":"mkey:/],
    ['/console/login', /name="csrf"/],
    ['/derp/probe', /^/],
    ['/generate_204', /^/],
  ] as const) {
    const text = await raw(`GET ${target} HTTP/1.0\r\n\r\n`, () => false);
    const status = statusOf(text);
    t.true(status === '200' || status === '204', `${target}: ${text.slice(0, 300)}`);
    t.regex(text.slice(text.indexOf('\r\n\r\n') + 4), want, target);
  }
});

test('through nginx, a sign-in body that is too large gets the console 413 and one that is not a form its 415', async (t) => {
  if (!nginx) return t.fail(missingProxy('nginx')!);
  const url = `${nginx.url}/console/login`;
  const form = 'application/x-www-form-urlencoded';
  // Larger than the console's drain allowance (1 MiB), so it answers before the body is read and does not read it all;
  // sent both with Content-Length and chunked (as an HTTP/2 browser's upload reaches nginx's upstream).
  for (const chunked of [false, true]) {
    const how = chunked ? 'chunked' : 'with Content-Length';
    const big = await postRaw(url, form, `username=${'a'.repeat(3 * 1024 * 1024)}`, chunked);
    t.is(big.status, 413, `${how}: ${big.body.slice(0, 300)}`);
    t.regex(big.body, /larger than/, how);
    for (const type of ['application/json', 'text/plain', 'multipart/form-data; boundary=x']) {
      const r = await postRaw(url, type, 'x'.repeat(3 * 1024 * 1024), chunked);
      t.is(r.status, 415, `${type} ${how}: ${r.body.slice(0, 300)}`);
      t.regex(r.body, /takes an HTML form/, `${type} ${how}`);
    }
  }
});

/** POSTs a body of any type through nginx (HttpsClient only sends forms), in one piece or chunked in 64 KiB pieces. */
function postRaw(url: string, type: string, body: string, chunked: boolean): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = { 'content-type': type };
    if (!chunked) headers['content-length'] = String(Buffer.byteLength(body));
    const q = https.request(url, { method: 'POST', ca: ca.caPem, agent: false, headers }, (res) => {
      let b = '';
      res.on('data', (d: Buffer) => (b += d.toString()));
      res.on('end', () => resolve({ status: res.statusCode!, body: b }));
      res.on('error', reject);
    });
    q.on('error', reject);
    for (let i = 0; i < body.length; i += 64 * 1024) q.write(body.slice(i, i + 64 * 1024));
    q.end();
  });
}

test('/health says up or down and nothing about what is connected', async (t) => {
  const r = await fetch(`${image.url}/health`);
  t.is(r.status, 200);
  t.deepEqual(await r.json(), { ok: true });
});
