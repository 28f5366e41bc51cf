// The client half of Tailscale's control handshake (controlbase): Noise_IK_25519_ChaChaPoly_BLAKE2s, prologue
// "Tailscale Control Protocol v<capver>", the server's static key known in advance (from GET /key).
// Written for the bench from the Noise spec and tailscale's control/controlbase, separately from the server's
// implementation in services/coordination/src/noise/, so that a run against headscale checks our server against a
// third party and not against itself.
//
//   -> e, es, s, ss     initiation, 101 bytes, sent base64 in the X-Tailscale-Handshake header:
//                       capver u16 BE | 0x01 | len u16 BE (=96) | e.pub 32 | seal(machine pub) 48 | seal("") 16
//   <- e, ee, se        response, the first 51 bytes after the 101:
//                       0x02 | len u16 BE (=48) | e.pub 32 | seal("") 16
//   or an error frame:  0x03 | len u16 BE | ASCII message
import crypto from 'node:crypto';
import { dh, newKeyPair, type KeyPair } from './x25519.ts';

export const MSG_INITIATION = 0x01;
export const MSG_RESPONSE = 0x02;
export const MSG_ERROR = 0x03;
export const INITIATION_LEN = 101;
export const RESPONSE_LEN = 51;
const PROTOCOL_NAME = 'Noise_IK_25519_ChaChaPoly_BLAKE2s';

function blake2s(...parts: Uint8Array[]): Buffer {
  const h = crypto.createHash('blake2s256');
  for (const p of parts) h.update(p);
  return h.digest();
}

function hmac(key: Uint8Array, ...parts: Uint8Array[]): Buffer {
  const h = crypto.createHmac('blake2s256', key);
  for (const p of parts) h.update(p);
  return h.digest();
}

/** Noise HKDF with two outputs: HMAC-BLAKE2s extract with the chaining key as salt, then two expand blocks. */
function hkdf2(chainingKey: Uint8Array, ikm: Uint8Array): [Buffer, Buffer] {
  const prk = hmac(chainingKey, ikm);
  const out1 = hmac(prk, Buffer.from([1]));
  const out2 = hmac(prk, out1, Buffer.from([2]));
  return [out1, out2];
}

/** ChaCha20-Poly1305 with a key used once during the handshake: the nonce is all zeros. Returns ciphertext||tag. */
function sealOnce(key: Uint8Array, plaintext: Uint8Array, ad: Uint8Array): Buffer {
  const c = crypto.createCipheriv('chacha20-poly1305', key, Buffer.alloc(12), { authTagLength: 16 });
  c.setAAD(ad, { plaintextLength: plaintext.length });
  const body = c.update(plaintext);
  c.final();
  return Buffer.concat([body, c.getAuthTag()]);
}

function openOnce(key: Uint8Array, sealed: Uint8Array, ad: Uint8Array): Buffer {
  const n = sealed.length - 16;
  const d = crypto.createDecipheriv('chacha20-poly1305', key, Buffer.alloc(12), { authTagLength: 16 });
  d.setAuthTag(sealed.subarray(n));
  d.setAAD(ad, { plaintextLength: n });
  const body = d.update(sealed.subarray(0, n));
  d.final(); // throws when the tag does not verify: wrong server key, or not a Noise peer
  return body;
}

class SymmetricState {
  h: Buffer = blake2s(Buffer.from(PROTOCOL_NAME));
  ck: Buffer = Buffer.from(this.h);

  mixHash(data: Uint8Array): void {
    this.h = blake2s(this.h, data);
  }

  /** MixKey(DH(...)): a new chaining key and a single-use cipher key. */
  mixDH(priv: KeyPair['privateKey'], pub: Uint8Array): Buffer {
    const [ck, k] = hkdf2(this.ck, dh(priv, pub));
    this.ck = ck;
    return k;
  }

  encryptAndHash(key: Buffer, plaintext: Uint8Array): Buffer {
    const ct = sealOnce(key, plaintext, this.h);
    this.mixHash(ct);
    return ct;
  }

  decryptAndHash(key: Buffer, ciphertext: Uint8Array): Buffer {
    const pt = openOnce(key, ciphertext, this.h);
    this.mixHash(ciphertext);
    return pt;
  }

  /** [client→server key, server→client key]. */
  split(): [Buffer, Buffer] {
    return hkdf2(this.ck, Buffer.alloc(0));
  }
}

export interface TransportKeys {
  /** Client → server. */
  tx: Buffer;
  /** Server → client. */
  rx: Buffer;
}

export interface Initiation {
  message: Buffer;
  /** Reads the server's 51-byte response and returns the transport keys; throws if it does not authenticate. */
  finish(response: Uint8Array): TransportKeys;
}

export function initiate(machine: KeyPair, serverPublic: Uint8Array, capVersion: number): Initiation {
  const s = new SymmetricState();
  s.mixHash(Buffer.from(`Tailscale Control Protocol v${capVersion}`));
  s.mixHash(serverPublic);
  const e = newKeyPair();
  s.mixHash(e.publicKey);
  const sealedStatic = s.encryptAndHash(s.mixDH(e.privateKey, serverPublic), machine.publicKey);
  const tag = s.encryptAndHash(s.mixDH(machine.privateKey, serverPublic), Buffer.alloc(0));
  const message = Buffer.alloc(INITIATION_LEN);
  message.writeUInt16BE(capVersion, 0);
  message[2] = MSG_INITIATION;
  message.writeUInt16BE(INITIATION_LEN - 5, 3);
  e.publicKey.copy(message, 5);
  sealedStatic.copy(message, 37);
  tag.copy(message, 85);
  return {
    message,
    finish(response) {
      if (response.length !== RESPONSE_LEN || response[0] !== MSG_RESPONSE || ((response[1] << 8) | response[2]) !== RESPONSE_LEN - 3) {
        throw new Error(`not a Noise handshake response: ${Buffer.from(response.subarray(0, 8)).toString('hex')}…`);
      }
      const re = response.subarray(3, 35);
      s.mixHash(re);
      s.mixDH(e.privateKey, re);
      s.decryptAndHash(s.mixDH(machine.privateKey, re), response.subarray(35, 51));
      const [tx, rx] = s.split();
      return { tx, rx };
    },
  };
}
