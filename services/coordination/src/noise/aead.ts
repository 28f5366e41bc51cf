// ChaCha20-Poly1305 as controlbase uses it: 32-byte key, 16-byte tag appended to the ciphertext, and a 12-byte
// nonce of 4 zero bytes followed by the message counter as a BIG-endian u64. (The Noise spec says little-endian;
// Tailscale's controlbase writes it big-endian, and that is what the client expects, so we follow the client.)
import crypto from 'node:crypto';

export const TAG_LEN = 16;
export const AEAD_KEY_LEN = 32;

/** Nonce layout: 00 00 00 00 | counter u64 BE. Counters here never exceed 2^53, so a JS number is exact. */
export function nonceFor(counter: number): Buffer {
  const n = Buffer.alloc(12);
  n.writeUInt32BE(Math.floor(counter / 0x1_0000_0000), 4);
  n.writeUInt32BE(counter >>> 0, 8);
  return n;
}

/**
 * The key may be raw bytes or a KeyObject made once for many messages: Node checks and imports raw key bytes again at
 * every createCipheriv, which was most of the cost of sealing a small frame (a transport key is used for every frame
 * of a connection; cipher-state.ts keeps one).
 */
export type AeadKey = Uint8Array | crypto.KeyObject;

/** Returns ciphertext || tag. */
export function seal(key: AeadKey, counter: number, plaintext: Uint8Array, ad?: Uint8Array): Buffer {
  const c = crypto.createCipheriv('chacha20-poly1305', key, nonceFor(counter), { authTagLength: TAG_LEN });
  if (ad && ad.length > 0) c.setAAD(ad, { plaintextLength: plaintext.length });
  const body = c.update(plaintext);
  c.final();
  return Buffer.concat([body, c.getAuthTag()]);
}

export class AuthError extends Error {}

/** Opens ciphertext || tag; throws AuthError when the tag does not verify (wrong key, counter, AD, or tampering). */
export function open(key: AeadKey, counter: number, sealed: Uint8Array, ad?: Uint8Array): Buffer {
  if (sealed.length < TAG_LEN) throw new AuthError(`sealed message of ${sealed.length} bytes is shorter than the ${TAG_LEN}-byte tag`);
  const bodyLen = sealed.length - TAG_LEN;
  const d = crypto.createDecipheriv('chacha20-poly1305', key, nonceFor(counter), { authTagLength: TAG_LEN });
  d.setAuthTag(sealed.subarray(bodyLen));
  if (ad && ad.length > 0) d.setAAD(ad, { plaintextLength: bodyLen });
  const body = d.update(sealed.subarray(0, bodyLen));
  try {
    d.final();
  } catch {
    throw new AuthError('message authentication failed');
  }
  return body;
}
