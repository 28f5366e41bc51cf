// The live tail behind each real reverse proxy of advanced/proxy/ (nginx, Caddy, Traefik, Nginx Proxy Manager as
// nginx), in proxy mode over HTTPS with the test CA: the event stream's headers arrive at once and a new entry reaches
// the browser while the stream stays open, which fails if a proxy buffers the response. (The nginx examples switch
// buffering off themselves; the stream's X-Accel-Buffering: no covers an nginx set up without that.) One image, the
// four proxies side by side in front of it. An idle stream's heartbeat comments get through each proxy too.
import test from 'ava';
import { createTestCA, TEST_DOMAIN, type TestCA } from '../harness/ca.ts';
import type { Image } from '../harness/image.ts';
import { HEARTBEAT_MS } from '../../services/console/src/request/event-stream.ts';
import { missingProxy, PROXY_KINDS, startProxy, type RunningProxy } from '../harness/proxies.ts';
import { Client, entryOf, PASSWORD, startConsole } from '../harness/console-client.ts';

let ca: TestCA;
let image: Image;
const proxies = new Map<string, RunningProxy>();

test.before(async () => {
  ca = await createTestCA();
  image = await startConsole({ publicUrl: `https://${TEST_DOMAIN}`, env: { HSE_TLS: 'off', HSE_TRUSTED_PROXIES: '127.0.0.1/32' } });
  for (const kind of PROXY_KINDS) {
    if (missingProxy(kind)) continue;
    proxies.set(kind, await startProxy(kind, { domain: TEST_DOMAIN, upstream: { host: '127.0.0.1', port: image.port }, ca }));
  }
});
test.after.always(async () => {
  for (const p of proxies.values()) await p.stop();
  await image?.stop();
  ca?.remove();
});

for (const kind of PROXY_KINDS) {
  test.serial(`${kind}: a new entry, then the idle heartbeat, arrive through the proxy while the stream stays open`, async (t) => {
    const missing = missingProxy(kind);
    if (missing) return t.fail(missing);
    const proxy = proxies.get(kind)!;
    const viewer = new Client(proxy.url, undefined, ca.caPem);
    const signedIn = await viewer.signIn('admin', PASSWORD);
    t.is(signedIn.status, 303, `${signedIn.body.slice(0, 300)}\n${proxy.output()}`);
    const s = await viewer.stream();
    t.teardown(() => s.close());
    t.is(s.res.statusCode, 200);
    t.regex(String(s.res.headers['content-type']), /^text\/event-stream/);
    await s.waitForText(': connected');

    const probe = `probe-${kind}`;
    await new Client(proxy.url, '127.0.0.2', ca.caPem).signIn(probe, 'wrong');
    const ev = await s.waitFor((e) => e.event === 'entry' && entryOf(e).actor === probe, `entry for ${probe} through ${kind}`);
    t.is(entryOf(ev).ip, '127.0.0.2', 'the client address survives the proxy and the router');
    t.false(s.ended, 'the stream is still open');
    // With nothing to send, a heartbeat comment still gets through the proxy (it keeps idle proxies and browsers
    // from cutting the stream), within one heartbeat period of the stream opening.
    await s.waitForText(': ping', HEARTBEAT_MS + 10_000);
    t.false(s.ended, 'the stream is still open after the heartbeat');
  });
}
