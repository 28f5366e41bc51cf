// Splits the byte stream from the peer into transport frames. TCP (or a websocket) hands us arbitrary slices: half a
// header, three frames and a bit, ... — this keeps the unfinished tail between reads. It never allocates more than
// one frame's worth for that tail, because the length field is checked against the 4096-byte limit before waiting
// for the body.
import { HEADER_LEN, MAX_CIPHERTEXT_LEN, MAX_FRAME_LEN, MSG_ERROR, MSG_RECORD } from './messages.ts';
import { TAG_LEN } from './aead.ts';

export class FrameError extends Error {}

export class FrameReader {
  private tail: Buffer = Buffer.alloc(0);

  /** Bytes of an unfinished frame held back (non-zero at end of stream means the peer cut a frame short). */
  get pending(): number {
    return this.tail.length;
  }

  // Record frame: type 0x04 | ciphertext length u16 BE | ciphertext (16..4093 bytes, tag included).
  /** Returns the ciphertexts of every frame completed by `chunk`; throws FrameError on a frame we must not accept. */
  push(chunk: Uint8Array): Buffer[] {
    const buf = this.tail.length === 0 ? Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength) : Buffer.concat([this.tail, chunk]);
    const out: Buffer[] = [];
    let off = 0;
    while (buf.length - off >= HEADER_LEN) {
      const type = buf[off];
      const len = buf.readUInt16BE(off + 1);
      if (type !== MSG_RECORD) {
        const hint = type === MSG_ERROR ? ' (an error message; only the server may send those)' : '';
        throw new FrameError(`unexpected frame type ${type}${hint}, want ${MSG_RECORD}`);
      }
      if (len > MAX_CIPHERTEXT_LEN) throw new FrameError(`frame of ${HEADER_LEN + len} bytes exceeds the ${MAX_FRAME_LEN}-byte limit`);
      if (len < TAG_LEN) throw new FrameError(`frame carries ${len} bytes, too short for the ${TAG_LEN}-byte tag`);
      if (buf.length - off < HEADER_LEN + len) break;
      out.push(buf.subarray(off + HEADER_LEN, off + HEADER_LEN + len));
      off += HEADER_LEN + len;
    }
    // Copy the tail so a large read buffer is not kept alive by a few leftover bytes.
    this.tail = off === buf.length ? Buffer.alloc(0) : Buffer.from(buf.subarray(off));
    return out;
  }
}
