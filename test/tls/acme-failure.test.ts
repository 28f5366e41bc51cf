// ACME failures an operator meets, against Pebble: a public name the CA cannot resolve. The router logs the CA's
// own reason with a hint, keeps port 80 answering (challenges, the /generate_204 probe, and a 503 that says HTTPS is
// not there yet instead of redirecting to it), refuses HTTPS handshakes with a log line saying why, and retries later.
import test from 'ava';
import { missingPebble, startPebble, type Pebble } from '../harness/pebble.ts';
import { eventually, handshake, plainRequest, startTlsImage, type TlsImage } from './tls-image.ts';

const DOMAIN = 'nowhere.test';
const missing = missingPebble();

let pebble: Pebble | undefined;
let tls: TlsImage | undefined;

if (missing) {
  test('pebble is installed', (t) => t.fail(missing));
} else {
  test.before(async () => {
    // Nothing is added to Pebble's DNS: nowhere.test resolves neither here nor for the CA.
    pebble = await startPebble({ httpPort: 1 });
    tls = await startTlsImage({
      host: DOMAIN,
      services: ['relay'],
      env: { HSE_ACME_DIRECTORY_URL: pebble.directoryUrl, NODE_EXTRA_CA_CERTS: pebble.apiCaFile },
    });
  });

  test.after.always(async () => {
    await tls?.image.stop();
    await pebble?.stop();
  });

  const routerOut = () => tls!.image.procs.router!.output();
  const logs = () => `${tls!.image.logs()}\n----- pebble -----\n${pebble!.output().slice(-5000)}`;

  test.serial("the CA's reason is logged with a hint and a retry time", async (t) => {
    const line = await eventually(
      'the ACME failure line',
      async () => /ERROR router: ACME: no certificate for nowhere\.test: .*/.exec(routerOut())?.[0],
      60_000,
      logs,
    );
    // Pebble's validator could not resolve the name: its words, then ours.
    t.regex(line, /could not resolve URL "http:\/\/nowhere\.test:1\/\.well-known\/acme-challenge\//);
    t.regex(line, /hint="the CA could not resolve the name: check its DNS records"/);
    t.regex(line, /serving="nothing \(HTTPS refuses connections\)"/);
    t.regex(line, /retryInSeconds=60 failures=1/);
    // Before the order, the router's own view of the name.
    t.regex(routerOut(), /ERROR router: ACME: nowhere\.test does not resolve from this machine/);
  });

  test.serial('HTTPS refuses handshakes and the log says why', async (t) => {
    const h = await handshake(tls!.httpsPort, DOMAIN, 'no CA needed: the handshake fails first');
    t.false(h.ok);
    t.regex(h.error ?? '', /handshake failure/i);
    const line = await eventually(
      'the refusal line',
      async () => /WARN {2}router: HTTPS handshake refused: no certificate to serve yet .*/.exec(routerOut())?.[0],
    );
    t.regex(line, /reason="ACME failed: .*could not resolve URL/);
  });

  test.serial('port 80 keeps answering: a 503 explaining HTTPS is not there yet, 404 for unknown challenges, and the /generate_204 probe', async (t) => {
    const r = await plainRequest(tls!.httpPort, '/console');
    t.is(r.status, 503);
    t.regex(r.body, /HTTPS is not available yet/);
    t.is(r.headers['retry-after'], '60');
    // The reason itself (paths, names, CA details) stays in the log, not on a public page.
    t.notRegex(r.body, /resolve|nowhere/);
    const c = await plainRequest(tls!.httpPort, '/.well-known/acme-challenge/unknown-token');
    t.is(c.status, 404);
    // Tailscale's captive-portal probe does not wait for a certificate: it is served on port 80 as always.
    const g = await plainRequest(tls!.httpPort, '/generate_204', { headers: { 'x-tailscale-challenge': 'before-cert' } });
    t.is(g.status, 204);
    t.is(g.headers['x-tailscale-response'], 'response before-cert');
  });
}
