// Bytes received but not yet consumed, kept as the chunks they arrived in: taking a frame copies only that frame,
// so a frame trickling in byte by byte costs linear time, not quadratic.
export class ByteQueue {
  private chunks: Buffer[] = [];
  private total = 0;

  get length(): number {
    return this.total;
  }

  push(chunk: Buffer): void {
    if (chunk.length === 0) return;
    this.chunks.push(chunk);
    this.total += chunk.length;
  }

  /** Byte at offset `i` (< length) without consuming anything. */
  at(i: number): number {
    for (const c of this.chunks) {
      if (i < c.length) return c[i];
      i -= c.length;
    }
    throw new RangeError(`offset ${i} beyond the ${this.total} queued bytes`);
  }

  /** Removes and returns the first `n` (<= length) bytes; a view into the chunk when they lie in one. */
  take(n: number): Buffer {
    if (n > this.total) throw new RangeError(`cannot take ${n} of ${this.total} queued bytes`);
    if (n === 0) return Buffer.alloc(0);
    const first = this.chunks[0];
    if (first.length >= n) {
      if (first.length === n) this.chunks.shift();
      else this.chunks[0] = first.subarray(n);
      this.total -= n;
      return first.subarray(0, n);
    }
    const out = Buffer.allocUnsafe(n);
    let off = 0;
    while (off < n) {
      const c = this.chunks[0];
      const k = Math.min(c.length, n - off);
      c.copy(out, off, 0, k);
      off += k;
      if (k === c.length) this.chunks.shift();
      else this.chunks[0] = c.subarray(k);
    }
    this.total -= n;
    return out;
  }

  /** Discards the first `n` (<= length) bytes. */
  drop(n: number): void {
    if (n > this.total) throw new RangeError(`cannot drop ${n} of ${this.total} queued bytes`);
    let left = n;
    while (left > 0) {
      const c = this.chunks[0];
      if (c.length <= left) {
        left -= c.length;
        this.chunks.shift();
      } else {
        this.chunks[0] = c.subarray(left);
        left = 0;
      }
    }
    this.total -= n;
  }
}
