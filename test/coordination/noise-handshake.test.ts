// The handshake's building blocks against published vectors (X25519: RFC 7748; BLAKE2s: RFC 7693; HKDF against
// node's own RFC 5869 implementation), and the responder's refusals: too old, wrong key, tampering, bad points.
import test from 'ava';
import crypto from 'node:crypto';
import { nonceFor } from '../../services/coordination/src/noise/aead.ts';
import { prologue, respondToInitiation } from '../../services/coordination/src/noise/handshake.ts';
import { MIN_CAP_VERSION } from '../../services/coordination/src/tailcfg/capver.ts';
import { HandshakeError, INITIATION_LEN, writeError } from '../../services/coordination/src/noise/messages.ts';
import { hash, hkdf2, PROTOCOL_NAME } from '../../services/coordination/src/noise/symmetric.ts';
import { dh, generatePair, pairFromPrivate, privateKeyFromRaw, rawPrivateKey } from '../../services/coordination/src/noise/x25519.ts';
import { initiate } from '../harness/noise-client.ts';

const hex = (s: string) => Buffer.from(s, 'hex');

test('X25519 matches RFC 7748 section 6.1', (t) => {
  const alice = pairFromPrivate(privateKeyFromRaw(hex('77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a')));
  const bob = pairFromPrivate(privateKeyFromRaw(hex('5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb')));
  t.is(alice.publicKey.toString('hex'), '8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a');
  t.is(bob.publicKey.toString('hex'), 'de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f');
  const shared = '4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742';
  t.is(dh(alice.privateKey, bob.publicKey).toString('hex'), shared);
  t.is(dh(bob.privateKey, alice.publicKey).toString('hex'), shared);
});

test('raw private keys survive the DER round trip', (t) => {
  const p = generatePair();
  const again = pairFromPrivate(privateKeyFromRaw(rawPrivateKey(p.privateKey)));
  t.deepEqual(again.publicKey, p.publicKey);
});

test('X25519 with a low-order point is refused', (t) => {
  const p = generatePair();
  t.throws(() => dh(p.privateKey, Buffer.alloc(32)));
  t.throws(() => dh(p.privateKey, Buffer.concat([Buffer.of(1), Buffer.alloc(31)])));
});

test('BLAKE2s-256 matches RFC 7693 ("abc") and the initial h is the hash of the protocol name', (t) => {
  t.is(hash(Buffer.from('abc')).toString('hex'), '508c5e8c327c14e2e1a72ba34eeb452f37458b209ed63a294d999b4c86675982');
  t.is(PROTOCOL_NAME.length, 33); // longer than a hash, so the Noise spec hashes it rather than padding
});

test('our two-output HKDF equals RFC 5869 HKDF-BLAKE2s with the chaining key as salt and empty info', (t) => {
  for (const ikmLen of [0, 32, 77]) {
    const ck = crypto.randomBytes(32);
    const ikm = crypto.randomBytes(ikmLen);
    const [a, b] = hkdf2(ck, ikm);
    const ref = Buffer.from(crypto.hkdfSync('blake2s256', ikm, ck, Buffer.alloc(0), 64));
    t.deepEqual(Buffer.concat([a, b]), ref);
  }
});

test('nonces are 4 zero bytes then a big-endian 64-bit counter', (t) => {
  t.is(nonceFor(0).toString('hex'), '000000000000000000000000');
  t.is(nonceFor(1).toString('hex'), '000000000000000000000001');
  t.is(nonceFor(0x1_0000_0002).toString('hex'), '000000000000000100000002');
});

test('prologue names the client capability version in decimal', (t) => {
  t.is(prologue(142).toString(), 'Tailscale Control Protocol v142');
});

test('a full handshake agrees on keys and the machine key', (t) => {
  const server = generatePair();
  const init = initiate({ serverPublic: server.publicKey });
  const hs = respondToInitiation(init.initiation, server);
  t.is(hs.response.length, 51);
  t.deepEqual(hs.machineKey, init.machine.publicKey);
  const c = init.finish(hs.response);
  t.deepEqual(c.handshakeHash, hs.handshakeHash);
  t.deepEqual(hs.rx.decrypt(c.tx.encrypt(Buffer.from('up'))).toString(), 'up');
  t.deepEqual(c.rx.decrypt(hs.tx.encrypt(Buffer.from('down'))).toString(), 'down');
});

function refusal(fn: () => unknown): HandshakeError {
  try {
    fn();
  } catch (e) {
    if (e instanceof HandshakeError) return e;
    throw new Error(`threw something other than HandshakeError: ${(e as Error).stack}`);
  }
  throw new Error('did not throw');
}

test(`capability versions below ${MIN_CAP_VERSION} are told to upgrade; ${MIN_CAP_VERSION} is accepted`, (t) => {
  const server = generatePair();
  const old = refusal(() => respondToInitiation(initiate({ serverPublic: server.publicKey, capVersion: MIN_CAP_VERSION - 1 }).initiation, server));
  t.regex(old.reply ?? '', /too old/);
  t.notThrows(() => respondToInitiation(initiate({ serverPublic: server.publicKey, capVersion: MIN_CAP_VERSION }).initiation, server));
});

test('an initiation for another server key fails without a reply', (t) => {
  const server = generatePair();
  const e = refusal(() => respondToInitiation(initiate({ serverPublic: generatePair().publicKey }).initiation, server));
  t.is(e.reply, undefined);
  t.regex(e.message, /did not authenticate.*GET \/key/);
});

test('every single-byte change to the initiation is refused', (t) => {
  const server = generatePair();
  const good = initiate({ serverPublic: server.publicKey }).initiation;
  for (let i = 0; i < INITIATION_LEN; i++) {
    const bad = Buffer.from(good);
    bad[i] ^= i < 2 ? 0x80 : 0x01; // in the version field, flip a high bit so the version stays >= 113 or fails the prologue
    t.true(refusal(() => respondToInitiation(bad, server)) instanceof HandshakeError, `byte ${i}`);
  }
});

test('initiations of the wrong size, type or declared length get the reference error texts', (t) => {
  const server = generatePair();
  const good = initiate({ serverPublic: server.publicKey }).initiation;
  t.is(refusal(() => respondToInitiation(good.subarray(0, 100), server)).reply, 'wrong handshake initiation size');
  t.is(refusal(() => respondToInitiation(Buffer.concat([good, Buffer.of(0)]), server)).reply, 'wrong handshake initiation size');
  const badType = Buffer.from(good);
  badType[2] = 2;
  t.is(refusal(() => respondToInitiation(badType, server)).reply, 'unexpected handshake message type');
  const badLen = Buffer.from(good);
  badLen.writeUInt16BE(95, 3);
  t.is(refusal(() => respondToInitiation(badLen, server)).reply, 'wrong handshake initiation length');
});

test('a low-order ephemeral key in the initiation is refused', (t) => {
  const server = generatePair();
  const bad = Buffer.from(initiate({ serverPublic: server.publicKey }).initiation);
  bad.fill(0, 5, 37);
  t.regex(refusal(() => respondToInitiation(bad, server)).message, /handshake failed/);
});

test('error frames carry only printable ASCII with the right length', (t) => {
  const f = writeError('too old\n\u00e9');
  t.is(f[0], 3);
  t.is(f.readUInt16BE(1), f.length - 3);
  t.is(f.subarray(3).toString('latin1'), 'too old??');
});
