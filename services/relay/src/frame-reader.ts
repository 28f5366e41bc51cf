// Incremental DERP frame reader: bytes go in as the transport delivers them (any chunking), whole frames come out.
//
// Wire layout (derp/derp.go): type u8 | length u32 BE | body[length]
//
// The caller decides per frame header, through a policy, whether to read the body, skip it (unknown types: the
// protocol says to ignore them) or refuse the connection (a length over the limit for that type). Skipped bodies are
// discarded as they arrive, never buffered, so a peer cannot make us hold more than one permitted frame in memory.
// The caller pulls frames with next(), so it can stop pulling (while an admission check runs, say) without losing
// bytes.
import { ByteQueue } from './byte-queue.ts';
import { FRAME_HEADER_LEN, FrameError, type Frame } from './frames.ts';

/** 'read' delivers the body; 'skip' drops it. Throw FrameError to refuse the frame (and the connection). */
export type FramePolicy = (type: number, length: number) => 'read' | 'skip';

export class FrameReader {
  private policy: FramePolicy;
  private readonly bytes = new ByteQueue();
  /** Header of the frame in progress, once read. */
  private current: { type: number; length: number; skip: boolean } | null = null;

  constructor(policy: FramePolicy) {
    this.policy = policy;
  }

  setPolicy(policy: FramePolicy): void {
    this.policy = policy;
  }

  /** Bytes held, waiting for the rest of a frame or for the caller to pull. */
  get bufferedBytes(): number {
    return this.bytes.length;
  }

  push(chunk: Buffer): void {
    this.bytes.push(chunk);
  }

  /** The next complete frame, or null until more bytes arrive. Throws FrameError for a refused frame. */
  next(): Frame | null {
    for (;;) {
      if (this.current === null) {
        if (this.bytes.length < FRAME_HEADER_LEN) return null;
        const h = this.bytes.take(FRAME_HEADER_LEN);
        const type = h[0];
        const length = h.readUInt32BE(1);
        const action = this.policy(type, length);
        this.current = { type, length, skip: action === 'skip' };
      }
      const cur = this.current;
      if (cur.skip) {
        const n = Math.min(cur.length, this.bytes.length);
        this.bytes.drop(n);
        cur.length -= n;
        if (cur.length > 0) return null;
        this.current = null;
        continue;
      }
      if (this.bytes.length < cur.length) return null;
      this.current = null;
      return { type: cur.type, body: this.bytes.take(cur.length) };
    }
  }
}

/** A policy that refuses any frame longer than `max` bytes and reads the rest: for clients and tests. */
export function limitPolicy(max: number): FramePolicy {
  return (type, length) => {
    if (length > max) throw new FrameError(`frame type 0x${type.toString(16)} of ${length} bytes exceeds the ${max}-byte limit`);
    return 'read';
  };
}
