// ACME end to end against Pebble (Let's Encrypt's test CA) on loopback: the router orders a certificate for
// hse.test over HTTP-01 on its HSE_TLS_HTTP_PORT, serves it, keeps it under HSE_DATA_DIR/tls with owner-only modes,
// renews it before it expires without dropping open connections, and serves the stored one again after a restart.
// The account it registered carries the operator's contact e-mail, as the CA reports it.
// Pebble issues 20-second certificates here, so a renewal (at two thirds of the lifetime) comes ~13 s after issuance.
import fs from 'node:fs';
import https from 'node:https';
import path from 'node:path';
import test from 'ava';
import { freePort } from '../harness/process.ts';
import { missingPebble, startPebble, type Pebble } from '../harness/pebble.ts';
import { count, eventually, handshake, httpsRequest, startTlsImage, type TlsImage } from './tls-image.ts';

const DOMAIN = 'hse.test';
const missing = missingPebble();

let pebble: Pebble | undefined;
let tls: TlsImage | undefined;
let root = '';

if (missing) {
  test('pebble is installed', (t) => t.fail(missing));
} else {
  test.before(async () => {
    const httpPort = await freePort();
    pebble = await startPebble({ httpPort, validitySeconds: 20 });
    await pebble.addA(DOMAIN, ['127.0.0.1']);
    root = await pebble.rootPem();
    tls = await startTlsImage({
      host: DOMAIN,
      httpPort,
      env: { HSE_ACME_DIRECTORY_URL: pebble.directoryUrl, HSE_ACME_EMAIL: 'ops@hse.test', NODE_EXTRA_CA_CERTS: pebble.apiCaFile },
    });
  });

  test.after.always(async () => {
    await tls?.image.stop();
    await pebble?.stop();
  });

  const logs = () => `${tls!.image.logs()}\n----- pebble -----\n${pebble!.output().slice(-5000)}`;
  const routerOut = () => tls!.image.procs.router!.output();

  test.serial('a certificate is ordered over HTTP-01 and served for the public name, trusted through the CA root', async (t) => {
    await eventually('the ACME certificate', async () => /ACME: certificate issued/.test(routerOut()), 60_000, logs);
    const h = await handshake(tls!.httpsPort, DOMAIN, root);
    t.true(h.ok, h.error);
    t.true(h.authorized, "the served certificate does not chain to Pebble's root");
    t.regex(h.names ?? '', /DNS:hse\.test/);
    // An actual HTTPS request over it (the router alone: the coordination service's 503 is still a routed answer).
    const r = await httpsRequest(tls!.httpsPort, DOMAIN, root, '/health');
    t.is(r.status, 503, r.body);
    t.regex(r.body, /coordination/);
    // hse.test resolves only in Pebble's DNS: the router says so, and orders anyway.
    t.regex(routerOut(), /hse\.test does not resolve from this machine/);
  });

  test.serial('the account key and the certificate are kept under HSE_DATA_DIR/tls, owner-only', (t) => {
    const dir = path.join(tls!.image.dataDir, 'tls');
    t.is(fs.statSync(dir).mode & 0o777, 0o700);
    for (const f of ['account.key', 'certificate.pem', 'certificate.key', 'certificate.json']) {
      const st = fs.statSync(path.join(dir, f));
      t.is(st.mode & 0o777, 0o600, f);
    }
    const meta = JSON.parse(fs.readFileSync(path.join(dir, 'certificate.json'), 'utf8')) as { directoryUrl: string; domain: string };
    t.is(meta.directoryUrl, pebble!.directoryUrl);
    t.is(meta.domain, DOMAIN);
  });

  test.serial('the ACME account was registered with HSE_ACME_EMAIL as its contact (read back from the CA)', async (t) => {
    const acme = (await import('acme-client')).default;
    acme.axios.defaults.httpsAgent = new https.Agent({ ca: fs.readFileSync(pebble!.apiCaFile) });
    const accountKey = fs.readFileSync(path.join(tls!.image.dataDir, 'tls', 'account.key'));
    const client = new acme.Client({ directoryUrl: pebble!.directoryUrl, accountKey });
    // onlyReturnExisting: look the stored key's account up, never create one.
    const account = await client.createAccount({ onlyReturnExisting: true });
    t.is(account.status, 'valid');
    t.deepEqual(account.contact, ['mailto:ops@hse.test']);
  });

  test.serial('the certificate is renewed before it expires; open connections keep working, new ones get the new certificate', async (t) => {
    const agent = new https.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const before = await httpsRequest(tls!.httpsPort, DOMAIN, root, '/health', { agent });
      const renewals = count(routerOut(), /ACME: certificate renewed/);
      await eventually('a renewal', async () => count(routerOut(), /ACME: certificate renewed/) > renewals, 60_000, logs);
      const fresh = await eventually('the renewed certificate on a new connection', async () => {
        const h = await handshake(tls!.httpsPort, DOMAIN, root);
        return h.ok && h.authorized && h.fingerprint !== before.fingerprint ? h : undefined;
      });
      t.not(fresh.fingerprint, before.fingerprint);
      // The connection opened before the renewal is still up, on the certificate it was made with.
      const again = await httpsRequest(tls!.httpsPort, DOMAIN, root, '/health', { agent });
      t.true(again.socketReused, 'the keep-alive connection was dropped by the renewal');
      t.is(again.fingerprint, before.fingerprint);
      t.is(again.status, 503);
    } finally {
      agent.destroy();
    }
    t.regex(routerOut(), /certificate replaced; new connections get the new one/);
  });

  test.serial('after a restart the stored certificate is served without a new order first', async (t) => {
    await tls!.image.restart();
    await tls!.image.procs.router!.waitFor(/certificate in use/);
    const out = routerOut();
    t.regex(out, /certificate in use source=acme-stored/);
    // Renewing may follow (the stored one can be due already), but a first order may not.
    t.notRegex(out, /ACME: ordering a certificate/);
    const h = await handshake(tls!.httpsPort, DOMAIN, root);
    t.true(h.ok && h.authorized, h.error);
  });
}
