// The encrypted transport after the handshake, as a plain Node Duplex: what is written to it goes out as sealed
// record frames, what arrives is opened and pushed as plaintext. HTTP/2 runs on top, so:
// - backpressure both ways: when our reader is full we pause the transport; when the transport is full we hold the
//   write callback until it drains;
// - a frame that is malformed or fails authentication destroys this connection with the reason (controlbase does
//   the same: after one failed open the two sides are out of step for good);
// - zero-length plaintext frames are legal and simply carry nothing.
import { Duplex } from 'node:stream';
import type { CipherState } from './cipher-state.ts';
import { FrameReader } from './frame-reader.ts';
import { MAX_PLAINTEXT_LEN, writeRecordHeader } from './messages.ts';

export interface NoiseConnOptions {
  /** Client -> us. */
  rx: CipherState;
  /** Us -> client. */
  tx: CipherState;
  /** Bytes the transport already delivered before we took over (e.g. the `head` of an HTTP upgrade). */
  head?: Buffer;
  /** Called once, when the first frame from the peer authenticates (the handshake deadline ends there). */
  onFirstFrame?: () => void;
}

export class NoiseConnError extends Error {}

/** Seals `plaintext` into as many record frames as it needs (at most 4077 plaintext bytes each). */
export function sealFrames(tx: CipherState, plaintext: Uint8Array, out: Buffer[]): void {
  let off = 0;
  do {
    const piece = plaintext.subarray(off, off + MAX_PLAINTEXT_LEN);
    const sealed = tx.encrypt(piece);
    out.push(writeRecordHeader(sealed.length), sealed);
    off += piece.length;
  } while (off < plaintext.length);
}

export class NoiseConn extends Duplex {
  private readonly transport: Duplex;
  private readonly rx: CipherState;
  private readonly tx: CipherState;
  private readonly frames = new FrameReader();
  private onFirstFrame: (() => void) | undefined;
  private pausedByUs = false;
  private transportEnded = false;
  private waitingDrain: ((err?: Error | null) => void) | null = null;

  constructor(transport: Duplex, opts: NoiseConnOptions) {
    super({ allowHalfOpen: false });
    this.transport = transport;
    this.rx = opts.rx;
    this.tx = opts.tx;
    this.onFirstFrame = opts.onFirstFrame;

    // Bytes that came with the upgrade go first, before anything the transport delivers later.
    if (opts.head && opts.head.length > 0) this.receive(opts.head);
    transport.on('data', (chunk: Buffer) => this.receive(chunk));
    transport.on('end', () => {
      this.transportEnded = true;
      if (this.frames.pending > 0) this.fail(new NoiseConnError(`peer closed the connection in the middle of a frame (${this.frames.pending} bytes)`));
      else this.push(null);
    });
    transport.on('drain', () => this.drained(null));
    transport.on('error', (e: Error) => this.destroy(e));
    transport.on('close', () => {
      this.drained(new NoiseConnError('connection closed'));
      // A close after a clean end lets the reader finish what is buffered; any other close is an abort.
      if (!this.transportEnded && !this.destroyed) this.destroy(new NoiseConnError('connection closed by peer without a clean end'));
    });
    // Whoever had the stream before may have paused it; from here on its flow is ours to control.
    if (!this.pausedByUs) transport.resume();
  }

  private receive(chunk: Buffer): void {
    if (this.destroyed) return;
    let sealed: Buffer[];
    try {
      sealed = this.frames.push(chunk);
    } catch (e) {
      this.fail(e as Error);
      return;
    }
    for (const ct of sealed) {
      let pt: Buffer;
      try {
        pt = this.rx.decrypt(ct);
      } catch (e) {
        this.fail(new NoiseConnError(`frame ${this.rx.messages - 1} from peer rejected: ${(e as Error).message}`));
        return;
      }
      if (this.onFirstFrame) {
        const cb = this.onFirstFrame;
        this.onFirstFrame = undefined;
        cb();
      }
      if (pt.length > 0 && !this.push(pt) && !this.pausedByUs) {
        this.pausedByUs = true;
        this.transport.pause();
      }
      if (this.destroyed) return;
    }
  }

  override _read(): void {
    if (this.pausedByUs) {
      this.pausedByUs = false;
      this.transport.resume();
    }
  }

  override _writev(chunks: Array<{ chunk: Buffer }>, cb: (err?: Error | null) => void): void {
    const out: Buffer[] = [];
    // Sealed as one plaintext: HTTP/2 hands over each frame's 9-byte header and its payload as separate chunks, and a
    // record per chunk doubled the seals (each a cipher set-up) and the bytes of framing. Records are only framing;
    // the peer reads one byte stream.
    const plaintext = chunks.length === 1 ? chunks[0].chunk : Buffer.concat(chunks.map((c) => c.chunk));
    try {
      if (plaintext.length > 0) sealFrames(this.tx, plaintext, out);
    } catch (e) {
      cb(e as Error);
      return;
    }
    if (out.length === 0) return cb();
    if (this.transport.write(Buffer.concat(out))) cb();
    else this.waitingDrain = cb;
  }

  override _write(chunk: Buffer, _enc: BufferEncoding, cb: (err?: Error | null) => void): void {
    this._writev([{ chunk }], cb);
  }

  override _final(cb: (err?: Error | null) => void): void {
    this.transport.end();
    cb();
  }

  override _destroy(err: Error | null, cb: (err?: Error | null) => void): void {
    this.drained(err ?? new NoiseConnError('connection destroyed'));
    this.rx.wipe();
    this.tx.wipe();
    this.transport.destroy();
    cb(err);
  }

  private drained(err: Error | null): void {
    const cb = this.waitingDrain;
    this.waitingDrain = null;
    cb?.(err);
  }

  private fail(err: Error): void {
    this.destroy(err);
  }
}
