// X25519 for the load client: raw 32-byte keys on the wire, node:crypto KeyObjects inside (imported through JWK,
// which node:crypto accepts for OKP keys without any DER wrapping).
import crypto, { type KeyObject } from 'node:crypto';

export interface KeyPair {
  privateKey: KeyObject;
  /** 32 raw bytes, as the protocol carries them. */
  publicKey: Buffer;
}

export function newKeyPair(): KeyPair {
  const { privateKey, publicKey } = crypto.generateKeyPairSync('x25519');
  const jwk = publicKey.export({ format: 'jwk' });
  return { privateKey, publicKey: Buffer.from(jwk.x as string, 'base64url') };
}

function publicKeyObject(raw: Uint8Array): KeyObject {
  if (raw.length !== 32) throw new Error(`an X25519 public key is 32 bytes, got ${raw.length}`);
  return crypto.createPublicKey({ key: { kty: 'OKP', crv: 'X25519', x: Buffer.from(raw).toString('base64url') }, format: 'jwk' });
}

/** X25519(priv, pub). node:crypto refuses low-order points (all-zero result), as Go's curve25519 does. */
export function dh(privateKey: KeyObject, peerPublic: Uint8Array): Buffer {
  return crypto.diffieHellman({ privateKey, publicKey: publicKeyObject(peerPublic) });
}
