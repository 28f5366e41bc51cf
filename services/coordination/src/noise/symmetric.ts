// The Noise SymmetricState (Noise spec §5.2) for Noise_IK_25519_ChaChaPoly_BLAKE2s, as controlbase runs it:
// h (handshake hash) and ck (chaining key), both 32-byte BLAKE2s outputs; HKDF is RFC 5869 with HMAC-BLAKE2s and
// empty info; handshake encryption always uses counter 0 with AD = h, because each derived key encrypts at most one
// message.
import crypto from 'node:crypto';
import { open, seal } from './aead.ts';
import { CipherState } from './cipher-state.ts';
import { dh } from './x25519.ts';
import type { KeyObject } from 'node:crypto';

export const PROTOCOL_NAME = 'Noise_IK_25519_ChaChaPoly_BLAKE2s';
const HASH = 'blake2s256';

export function hash(...parts: Uint8Array[]): Buffer {
  const h = crypto.createHash(HASH);
  for (const p of parts) h.update(p);
  return h.digest();
}

function hmac(key: Uint8Array, ...parts: Uint8Array[]): Buffer {
  const m = crypto.createHmac(HASH, key);
  for (const p of parts) m.update(p);
  return m.digest();
}

/**
 * HKDF(chainingKey, ikm) with two 32-byte outputs: extract PRK = HMAC(ck, ikm), then T1 = HMAC(PRK, 0x01),
 * T2 = HMAC(PRK, T1 || 0x02). This is RFC 5869 with salt = ck and empty info, which is what both the Noise spec and
 * Go's hkdf.New(blake2s, ikm, ck, nil) produce.
 */
export function hkdf2(chainingKey: Uint8Array, ikm: Uint8Array): [Buffer, Buffer] {
  const prk = hmac(chainingKey, ikm);
  const t1 = hmac(prk, Buffer.of(0x01));
  const t2 = hmac(prk, t1, Buffer.of(0x02));
  return [t1, t2];
}

export class SymmetricState {
  h: Buffer;
  ck: Buffer;
  private done = false;

  constructor() {
    // The protocol name is 33 bytes, longer than the 32-byte hash, so the spec says h = HASH(name).
    this.h = hash(Buffer.from(PROTOCOL_NAME, 'ascii'));
    this.ck = Buffer.from(this.h);
  }

  mixHash(data: Uint8Array): void {
    this.check();
    this.h = hash(this.h, data);
  }

  /** MixKey(X25519(priv, pub)): advances ck and returns the single-use key for the next handshake payload. */
  mixDH(priv: KeyObject, peerPublic: Uint8Array): Buffer {
    this.check();
    const [ck, k] = hkdf2(this.ck, dh(priv, peerPublic));
    this.ck = ck;
    return k;
  }

  encryptAndHash(k: Buffer, plaintext: Uint8Array): Buffer {
    this.check();
    const out = seal(k, 0, plaintext, this.h);
    this.mixHash(out);
    return out;
  }

  /** Throws AuthError when the tag does not verify; h is only advanced on success. */
  decryptAndHash(k: Buffer, sealed: Uint8Array): Buffer {
    this.check();
    const out = open(k, 0, sealed, this.h);
    this.mixHash(sealed);
    return out;
  }

  /** Split(): [initiator->responder, responder->initiator]. The state cannot be used afterwards. */
  split(): [CipherState, CipherState] {
    this.check();
    this.done = true;
    const [k1, k2] = hkdf2(this.ck, Buffer.alloc(0));
    return [new CipherState(k1), new CipherState(k2)];
  }

  private check(): void {
    if (this.done) throw new Error('Noise symmetric state used after Split');
  }
}
