// Nginx Proxy Manager believes X-Real-IP from 10/8, 172.16/12 and 192.168/16 (its nginx.conf) and builds the
// X-Forwarded-For it sends from the address that yields — so a client on the LAN, or arriving through Docker's
// port-publishing gateway, could name any address and hse would log it. The Advanced block's
// `real_ip_header proxy_protocol;` turns that off. Here the client at 127.0.0.2 stands for such a network (added to
// the reproduction's trusted ranges), and the same forged sign-in is made through NPM with the Advanced block as
// published and with that one line taken out.
import test from 'ava';
import { createTestCA, TEST_DOMAIN, type TestCA } from '../harness/ca.ts';
import { startImage, type Image } from '../harness/image.ts';
import { freePort } from '../harness/process.ts';
import { missingProxy, startProxy, substitute, type RunningProxy } from '../harness/proxies.ts';
import { HttpsClient, waitProxied } from './https-client.ts';

const PASSWORD = 'npm real ip test password';
const FORGED = '198.51.100.9';

const missing = missingProxy('npm');
if (missing) {
  test('nginx is installed (for the NPM reproduction)', (t) => t.fail(missing));
} else {
  let ca: TestCA;
  let image: Image;
  const proxies: RunningProxy[] = [];
  let port: number;

  test.before(async () => {
    ca = await createTestCA();
    port = await freePort();
    image = await startImage({
      services: ['coordination', 'console'],
      publicUrl: `https://${TEST_DOMAIN}:${port}`,
      env: { HSE_TLS: 'off', HSE_TRUSTED_PROXIES: '127.0.0.1/32', HSE_CONSOLE_PASSWORD: PASSWORD },
    });
  });

  test.after.always(async () => {
    for (const p of proxies) await p.stop();
    await image?.stop();
    ca?.remove();
  });

  /** Signs in from 127.0.0.2 with a forged X-Real-IP through NPM, and returns the address hse logged. */
  async function loggedAddress(advanced: (text: string) => string): Promise<string> {
    const p = await startProxy('npm', {
      domain: TEST_DOMAIN,
      upstream: { host: '127.0.0.1', port: image.port },
      ca,
      // One proxy at a time on the public URL's port, so redirects and cookies match.
      ports: { https: port, http: await freePort() },
      npmExtraRealIpFrom: ['127.0.0.2/32'],
      npmAdvanced: advanced,
    });
    try {
      await waitProxied(p.url, ca.caPem);
      const c = new HttpsClient(p.url, ca.caPem, '127.0.0.2');
      const r = await c.signIn('admin', PASSWORD, { 'x-real-ip': FORGED });
      if (r.status !== 303) throw new Error(`sign-in answered ${r.status}: ${r.body.slice(0, 300)}`);
      const list = await c.request('/console/api/logs?action=console.signin&limit=1');
      return (JSON.parse(list.body) as { entries: { ip: string }[] }).entries[0].ip;
    } finally {
      await p.stop();
    }
  }

  test.serial('with the Advanced block as published, a forged X-Real-IP from a network NPM trusts is ignored', async (t) => {
    t.is(await loggedAddress((x) => x), '127.0.0.2');
  });

  test.serial('without its real_ip_header line, the same request is logged with the forged address', async (t) => {
    const without = (x: string) => substitute(x, /^real_ip_header proxy_protocol;\n/gm, '', 'npm/advanced.conf');
    t.is(await loggedAddress(without), FORGED);
  });
}
