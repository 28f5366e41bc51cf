// One direction of the transport after the handshake: a key and a message counter that starts at 0 and goes up by
// one per frame. controlbase never rekeys; it stops at 2^64-1 messages. We stop at 2^53 (where a JS number stops
// being exact) — at 4 KiB per frame that is 32 EiB, so no real connection gets there, but we refuse rather than
// reuse a nonce.
import crypto from 'node:crypto';
import { open, seal } from './aead.ts';

const MAX_COUNTER = Number.MAX_SAFE_INTEGER;

export class CipherState {
  private raw: Buffer | null;
  /** The key imported once (aead.ts says why); its copy is freed and cleared by Node when it is collected. */
  private key: crypto.KeyObject | null;
  private counter = 0;

  constructor(key: Buffer) {
    this.raw = key;
    this.key = crypto.createSecretKey(key);
  }

  /** How many messages this direction has processed (the next counter value). */
  get messages(): number {
    return this.counter;
  }

  encrypt(plaintext: Uint8Array): Buffer {
    const key = this.use();
    return seal(key, this.counter++, plaintext);
  }

  /** Throws AuthError on a bad tag; the counter still advances, and the caller must drop the connection. */
  decrypt(sealed: Uint8Array): Buffer {
    const key = this.use();
    return open(key, this.counter++, sealed);
  }

  /** Forgets the key so a closed connection keeps nothing that could decrypt its past traffic. */
  wipe(): void {
    this.raw?.fill(0);
    this.raw = null;
    this.key = null;
  }

  private use(): crypto.KeyObject {
    if (!this.key) throw new Error('cipher state used after the connection closed');
    if (this.counter >= MAX_COUNTER) throw new Error('cipher exhausted: too many messages on one connection');
    return this.key;
  }
}
