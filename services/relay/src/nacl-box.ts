// NaCl box (X25519 + XSalsa20-Poly1305) as DERP uses it for ClientInfo and ServerInfo, via tweetnacl (node:crypto has
// X25519 but not XSalsa20). Reference: tailscale types/key/node.go SealTo/OpenFrom.
//
// Sealed layout: nonce[24] | box(cleartext)[n + 16]
import crypto from 'node:crypto';
import nacl from 'tweetnacl';
import { KEY_LEN, NONCE_LEN } from './frames.ts';

/** A fresh Curve25519 private key, clamped the way Tailscale stores node keys. */
export function newPrivateKey(): Buffer {
  const k = crypto.randomBytes(KEY_LEN);
  k[0] &= 248;
  k[31] = (k[31] & 127) | 64;
  return k;
}

export function publicKeyOf(privateKey: Uint8Array): Buffer {
  return Buffer.from(nacl.scalarMult.base(privateKey));
}

/**
 * True when a box between us and `peerPublic` would be keyed by an all-zero shared secret: the zero key and the other
 * low-order points. Anyone can compute such a box, so it proves nothing about who sent it.
 */
export function isWeakPeerKey(privateKey: Uint8Array, peerPublic: Uint8Array): boolean {
  return nacl.scalarMult(privateKey, peerPublic).every((b) => b === 0);
}

export function sealTo(privateKey: Uint8Array, peerPublic: Uint8Array, cleartext: Uint8Array): Buffer {
  const nonce = crypto.randomBytes(NONCE_LEN);
  return Buffer.concat([nonce, nacl.box(cleartext, nonce, peerPublic, privateKey)]);
}

/** The cleartext, or null when the box was not sealed by `peerPublic` for us (or is damaged). */
export function openFrom(privateKey: Uint8Array, peerPublic: Uint8Array, sealed: Uint8Array): Buffer | null {
  if (sealed.length < NONCE_LEN) return null;
  const clear = nacl.box.open(sealed.subarray(NONCE_LEN), sealed.subarray(0, NONCE_LEN), peerPublic, privateKey);
  return clear ? Buffer.from(clear) : null;
}
