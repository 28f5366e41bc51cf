// Operator-provided certificate files (HSE_TLS_CERT_FILE, HSE_TLS_KEY_FILE): the router starts even when they are
// missing (port 80 answers, HTTPS refuses with a log line naming the file), serves them as soon as they appear,
// serves a replacement without a restart, and keeps serving the good pair when a bad one is written.
// Replacements are written the way certbot and cert-manager do: a new file renamed over the old one.
import { X509Certificate } from 'node:crypto';
import fs from 'node:fs';
import http2 from 'node:http2';
import os from 'node:os';
import path from 'node:path';
import test from 'ava';
import { createTestCA, TEST_DOMAIN, type TestCA } from '../harness/ca.ts';
import { eventually, handshake, httpsRequest, plainRequest, startTlsImage, type TlsImage } from './tls-image.ts';

let first: TestCA | undefined;
let second: TestCA | undefined;
let tls: TlsImage | undefined;
let dir = '';
let certFile = '';
let keyFile = '';

/** Writes `content` to `file` through a temporary name and a rename, as certificate tools do. */
function replace(file: string, content: string | Buffer): void {
  const tmp = `${file}.new`;
  fs.writeFileSync(tmp, content, { mode: 0o600 });
  fs.renameSync(tmp, file);
}

test.before(async () => {
  first = await createTestCA();
  second = await createTestCA();
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hse-certfiles-'));
  certFile = path.join(dir, 'fullchain.pem');
  keyFile = path.join(dir, 'privkey.pem');
  // Neither file exists yet.
  tls = await startTlsImage({ host: TEST_DOMAIN, env: { HSE_TLS_CERT_FILE: certFile, HSE_TLS_KEY_FILE: keyFile } });
});

test.after.always(async () => {
  await tls?.image.stop();
  first?.remove();
  second?.remove();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

const routerOut = () => tls!.image.procs.router!.output();
/** The served leaf's fingerprint as a TLS client reports it (the chain file starts with the leaf). */
const fingerprintOf = (ca: TestCA) => new X509Certificate(fs.readFileSync(ca.certFile)).fingerprint256;

test.serial('missing files: the router still starts, logs which file is missing, port 80 answers and HTTPS refuses', async (t) => {
  await tls!.image.procs.router!.waitFor(/certificate files not usable/);
  t.regex(
    routerOut(),
    new RegExp(
      `ERROR router: certificate files not usable; HTTPS refuses connections until they are fixed reason="HSE_TLS_CERT_FILE ${certFile} does not exist"`,
    ),
  );
  const r = await plainRequest(tls!.httpPort, '/');
  t.is(r.status, 503);
  const h = await handshake(tls!.httpsPort, TEST_DOMAIN, first!.caPem);
  t.false(h.ok);
  const line = await eventually('the refusal line', async () => /HTTPS handshake refused: no certificate to serve yet .*/.exec(routerOut())?.[0]);
  t.regex(line, /does not exist/);
});

test.serial('files that appear are served without a restart', async (t) => {
  replace(keyFile, fs.readFileSync(first!.keyFile));
  replace(certFile, fs.readFileSync(first!.certFile));
  const h = await eventually('the first certificate', async () => {
    const x = await handshake(tls!.httpsPort, TEST_DOMAIN, first!.caPem);
    return x.ok ? x : undefined;
  });
  t.true(h.authorized);
  t.is(h.fingerprint, fingerprintOf(first!));
  // Port 80 now redirects to HTTPS.
  const r = await plainRequest(tls!.httpPort, '/console?x=1');
  t.is(r.status, 301);
  t.is(r.headers.location, `${tls!.publicUrl}/console?x=1`);
});

test.serial('a replaced certificate is served on new connections without a restart', async (t) => {
  const pid = tls!.image.procs.router!.proc.pid;
  replace(keyFile, fs.readFileSync(second!.keyFile));
  replace(certFile, fs.readFileSync(second!.certFile));
  const h = await eventually('the replacement certificate', async () => {
    const x = await handshake(tls!.httpsPort, TEST_DOMAIN, second!.caPem);
    return x.ok && x.fingerprint === fingerprintOf(second!) ? x : undefined;
  });
  t.true(h.authorized);
  t.is(tls!.image.procs.router!.proc.pid, pid, 'the router was restarted');
  const r = await httpsRequest(tls!.httpsPort, TEST_DOMAIN, second!.caPem, '/health');
  t.is(r.status, 503, r.body);
  t.regex(routerOut(), /certificate replaced; new connections get the new one source=files/);
});

test.serial('a pair that does not match is refused with a log line and the previous certificate stays', async (t) => {
  // The first CA's certificate with the second CA's key.
  replace(certFile, fs.readFileSync(first!.certFile));
  const line = await eventually(
    'the refusal line',
    async () => /ERROR router: certificate files not usable; still serving the previous certificate .*/.exec(routerOut())?.[0],
  );
  t.regex(line, /the private key does not belong to the certificate/);
  const h = await handshake(tls!.httpsPort, TEST_DOMAIN, second!.caPem);
  t.true(h.ok && h.authorized, h.error);
  t.is(h.fingerprint, fingerprintOf(second!));
  // Garbage instead of PEM: same.
  replace(certFile, 'not a certificate\n');
  await eventually('the PEM refusal', async () => /no PEM certificate found/.test(routerOut()));
  const again = await handshake(tls!.httpsPort, TEST_DOMAIN, second!.caPem);
  t.is(again.fingerprint, fingerprintOf(second!));
});

test.serial('SIGTERM drains both ports, closing an open HTTP/2 session, and exits 0', async (t) => {
  const session = http2.connect(`https://127.0.0.1:${tls!.httpsPort}`, { ca: second!.caPem });
  const closed = new Promise<void>((r) => session.once('close', () => r()));
  session.on('error', () => {});
  await new Promise<void>((resolve, reject) => {
    session.once('connect', () => resolve());
    session.once('error', reject);
  });
  const code = await tls!.image.procs.router!.stop('SIGTERM');
  t.is(code, 0);
  await closed;
  t.regex(routerOut(), /INFO {2}router: drained clean=true/);
});
