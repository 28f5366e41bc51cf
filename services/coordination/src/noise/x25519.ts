// Curve25519 keys as the control protocol carries them: 32 raw bytes on the wire, KeyObjects inside node:crypto.
// node:crypto only imports and exports DER, so raw keys are wrapped in the fixed PKCS#8 / SPKI prefixes for
// X25519 (OID 1.3.101.110) — the prefixes never vary, the key is always the last 32 bytes.
import crypto, { type KeyObject } from 'node:crypto';

export const KEY_LEN = 32;

// PKCS#8 PrivateKeyInfo: SEQ { INTEGER 0, SEQ { OID 1.3.101.110 }, OCTET STRING { OCTET STRING (32) } }
const PKCS8_PREFIX = Buffer.from('302e020100300506032b656e04220420', 'hex');
// SubjectPublicKeyInfo: SEQ { SEQ { OID 1.3.101.110 }, BIT STRING (0 unused bits) (32) }
const SPKI_PREFIX = Buffer.from('302a300506032b656e032100', 'hex');

export interface X25519Pair {
  privateKey: KeyObject;
  /** Raw 32-byte public key, as sent on the wire. */
  publicKey: Buffer;
}

export function privateKeyFromRaw(raw: Uint8Array): KeyObject {
  if (raw.length !== KEY_LEN) throw new Error(`X25519 private key must be ${KEY_LEN} bytes, got ${raw.length}`);
  return crypto.createPrivateKey({ key: Buffer.concat([PKCS8_PREFIX, raw]), format: 'der', type: 'pkcs8' });
}

export function publicKeyFromRaw(raw: Uint8Array): KeyObject {
  if (raw.length !== KEY_LEN) throw new Error(`X25519 public key must be ${KEY_LEN} bytes, got ${raw.length}`);
  return crypto.createPublicKey({ key: Buffer.concat([SPKI_PREFIX, raw]), format: 'der', type: 'spki' });
}

export function rawPrivateKey(key: KeyObject): Buffer {
  return key.export({ format: 'der', type: 'pkcs8' }).subarray(PKCS8_PREFIX.length);
}

export function rawPublicKey(key: KeyObject): Buffer {
  const pub = key.type === 'private' ? crypto.createPublicKey(key) : key;
  return pub.export({ format: 'der', type: 'spki' }).subarray(SPKI_PREFIX.length);
}

export function pairFromPrivate(privateKey: KeyObject): X25519Pair {
  return { privateKey, publicKey: rawPublicKey(privateKey) };
}

export function generatePair(): X25519Pair {
  return pairFromPrivate(crypto.generateKeyPairSync('x25519').privateKey);
}

/**
 * X25519(priv, pub). Throws when the peer's public key is a low-order point (the shared secret would be all zeros,
 * which OpenSSL refuses, as Go's curve25519.X25519 does) — a peer sending one is either broken or hostile.
 */
export function dh(privateKey: KeyObject, peerPublic: Uint8Array): Buffer {
  const out = crypto.diffieHellman({ privateKey, publicKey: publicKeyFromRaw(peerPublic) });
  if (out.every((b) => b === 0)) throw new Error('X25519 produced an all-zero shared secret (low-order public key)');
  return out;
}
