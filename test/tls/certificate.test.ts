// Certificate pairs are checked before they are served (router/src/tls/certificate.ts): the reasons an operator
// reads for the usual mistakes, name and expiry warnings, and the challenge and redirect helpers of port 80.
import fs from 'node:fs';
import test from 'ava';
import fc from 'fast-check';
import { createTestCA, type TestCA } from '../harness/ca.ts';
import { CertificateError, covers, loadPair, warningsFor } from '../../router/src/tls/certificate.ts';
import { ChallengeStore } from '../../router/src/tls/challenges.ts';
import { redirectTarget } from '../../router/src/tls/http-redirect.ts';

let a: TestCA | undefined;
let b: TestCA | undefined;

test.before(async () => {
  a = await createTestCA();
  b = await createTestCA();
});

test.after.always(() => {
  a?.remove();
  b?.remove();
});

const read = (f: string) => fs.readFileSync(f, 'utf8');

test('a good pair loads with its names, dates and fingerprint', (t) => {
  const c = loadPair(read(a!.certFile), read(a!.keyFile), 'test');
  t.deepEqual(c.names, ['127.0.0.1', 'localhost']);
  t.true(c.notAfter > new Date());
  t.regex(c.fingerprint, /^([0-9A-F]{2}:){31}[0-9A-F]{2}$/);
  t.true(covers(c, '127.0.0.1'));
  t.true(covers(c, 'localhost'));
  t.false(covers(c, 'vpn.example.com'));
  t.deepEqual(warningsFor(c, '127.0.0.1'), []);
  t.regex(warningsFor(c, 'vpn.example.com')[0], /not valid for vpn\.example\.com \(it names 127\.0\.0\.1, localhost\)/);
  t.regex(warningsFor(c, '127.0.0.1', new Date(c.notAfter.getTime() + 1000))[0], /expired/);
});

test('the usual mistakes are refused with a reason an operator can act on', (t) => {
  const err = (cert: string, key: string) => t.throws(() => loadPair(cert, key, 'src'), { instanceOf: CertificateError })!.message;
  t.regex(err(read(a!.certFile), read(b!.keyFile)), /^src: the private key does not belong to the certificate/);
  t.regex(err('hello', read(a!.keyFile)), /^src: no PEM certificate found/);
  t.regex(err(read(a!.certFile), 'not a key'), /^src: .*key/);
  // Key and certificate swapped: the certificate file has no certificate in it.
  t.regex(err(read(a!.keyFile), read(a!.certFile)), /no PEM certificate found/);
});

test('ACME challenge answers are given only for tokens the client published', (t) => {
  const s = new ChallengeStore();
  s.set('tok_en-1', 'tok_en-1.thumb');
  t.is(s.answerFor('/.well-known/acme-challenge/tok_en-1'), 'tok_en-1.thumb');
  t.is(s.answerFor('/.well-known/acme-challenge/other'), null);
  t.is(s.answerFor('/.well-known/acme-challenge/../tok_en-1'), null);
  t.is(s.answerFor('/elsewhere/tok_en-1'), null);
  s.delete('tok_en-1');
  t.is(s.answerFor('/.well-known/acme-challenge/tok_en-1'), null);
  t.throws(() => s.set('bad token/', 'x'));
});

test('redirects always stay on the public origin, whatever the request target', (t) => {
  const origin = 'https://vpn.example.com:8443';
  t.is(redirectTarget(origin, '/a/b?c=d'), `${origin}/a/b?c=d`);
  t.is(redirectTarget(origin, 'http://evil.example/x?y'), `${origin}/x?y`);
  t.is(redirectTarget(origin, '*'), `${origin}/`);
  fc.assert(
    fc.property(fc.string(), (target) => {
      const loc = redirectTarget(origin, target);
      return loc.startsWith(`${origin}/`) && new URL(loc).origin === origin;
    }),
  );
});
