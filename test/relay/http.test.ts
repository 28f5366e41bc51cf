// The relay's plain HTTP endpoints on its socket, as the router forwards them: probes, the captive-portal check,
// /derp without an upgrade, and everything else.
import http from 'node:http';
import test from 'ava';
import { startRelay, type TestRelay } from './harness.ts';

let relay: TestRelay;
test.before(async () => {
  relay = await startRelay(null);
});
test.after.always(async () => {
  await relay?.stop();
});

function request(
  method: string,
  path: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ socketPath: relay.socket, method, path, headers, agent: false }, (res) => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

for (const path of ['/derp/probe', '/derp/latency-check']) {
  test(`${path}: 200 and empty for GET and HEAD, 405 otherwise`, async (t) => {
    for (const method of ['GET', 'HEAD']) {
      const r = await request(method, path);
      t.is(r.status, 200, method);
      t.is(r.body, '');
      t.is(r.headers['access-control-allow-origin'], '*');
    }
    t.is((await request('POST', path)).status, 405);
  });
}

test('/generate_204 echoes a valid challenge and ignores an invalid one', async (t) => {
  const ok = await request('GET', '/generate_204', { 'X-Tailscale-Challenge': 'ts_challenge-1.2:3' });
  t.is(ok.status, 204);
  t.is(ok.headers['x-tailscale-response'], 'response ts_challenge-1.2:3');
  const bad = await request('GET', '/generate_204', { 'X-Tailscale-Challenge': 'no spaces/or slashes' });
  t.is(bad.status, 204);
  t.is(bad.headers['x-tailscale-response'], undefined);
  const long = await request('GET', '/generate_204', { 'X-Tailscale-Challenge': 'a'.repeat(65) });
  t.is(long.headers['x-tailscale-response'], undefined);
  const none = await request('GET', '/generate_204');
  t.is(none.status, 204);
  t.is(none.headers['x-tailscale-response'], undefined);
});

test('/derp without an upgrade is 426; unknown paths are 404', async (t) => {
  t.is((await request('GET', '/derp')).status, 426);
  t.is((await request('GET', '/derp/other')).status, 404);
  t.is((await request('GET', '/')).status, 404);
  t.is((await request('GET', '/derpx')).status, 404);
});

test('an upgrade to another protocol on /derp is refused with 426', async (t) => {
  const err = await t.throwsAsync(relay.connect({ upgrade: 'h2c' }));
  t.regex(err!.message, /426/);
});
