// A websocket carrying a byte stream (Noise on /ts2021, DERP on /derp), as a Duplex: payloads of binary messages in, writes out as binary messages of
// at most 4096 bytes (see MAX_WS_MESSAGE_OUT). Message boundaries carry no meaning (the client's wsconn treats the
// socket the same way), so fragmented messages are fine. Pings are answered; a close is echoed and ends the stream; text frames and protocol errors
// close the websocket with the matching status code.
import crypto from 'node:crypto';
import { Duplex } from 'node:stream';
import {
  CLOSE_NORMAL,
  CLOSE_UNSUPPORTED_DATA,
  closePayload,
  OP_BINARY,
  OP_CLOSE,
  OP_CONTINUATION,
  OP_PING,
  OP_PONG,
  OP_TEXT,
  CLOSE_PROTOCOL_ERROR,
  MAX_WS_MESSAGE_OUT,
  WsFrameReader,
  WsProtocolError,
  writeWsFrame,
  type WsFrame,
} from './frames.ts';

export class WebSocketStream extends Duplex {
  private readonly socket: Duplex;
  private readonly frames: WsFrameReader;
  /** Clients mask what they send and expect unmasked frames (the server role is the one production uses). */
  private readonly client: boolean;
  private inMessage = false;
  private closeSent = false;
  private pausedByUs = false;
  private waitingDrain: ((err?: Error | null) => void) | null = null;
  private ended = false;

  constructor(socket: Duplex, head?: Buffer, role: 'server' | 'client' = 'server') {
    super({ allowHalfOpen: false });
    this.socket = socket;
    this.client = role === 'client';
    this.frames = new WsFrameReader(!this.client);
    if (head && head.length > 0) this.receive(head);
    socket.on('data', (chunk: Buffer) => this.receive(chunk));
    socket.on('end', () => {
      this.ended = true;
      this.push(null);
    });
    socket.on('drain', () => this.drained(null));
    socket.on('error', (e: Error) => this.destroy(e));
    socket.on('close', () => {
      this.drained(new Error('websocket closed'));
      if (!this.ended && !this.destroyed) this.destroy(new Error('websocket closed by peer without a clean end'));
    });
    // Whoever had the stream before may have paused it; from here on its flow is ours to control.
    if (!this.pausedByUs) socket.resume();
  }

  private receive(chunk: Buffer): void {
    if (this.destroyed || this.ended) return;
    let frames: WsFrame[];
    try {
      frames = this.frames.push(chunk);
    } catch (e) {
      const err = e as WsProtocolError;
      this.closeWith(err.code, err.message);
      return;
    }
    for (const f of frames) {
      if (this.destroyed || this.ended) return;
      this.handle(f);
    }
  }

  private handle(f: WsFrame): void {
    switch (f.opcode) {
      case OP_BINARY:
      case OP_CONTINUATION:
        if (f.opcode === OP_BINARY && this.inMessage) return this.closeWith(CLOSE_PROTOCOL_ERROR, 'new message inside a fragmented one');
        if (f.opcode === OP_CONTINUATION && !this.inMessage) return this.closeWith(CLOSE_PROTOCOL_ERROR, 'continuation frame without a message');
        this.inMessage = !f.fin;
        if (f.payload.length > 0 && !this.push(f.payload) && !this.pausedByUs) {
          this.pausedByUs = true;
          this.socket.pause();
        }
        return;
      case OP_TEXT:
        return this.closeWith(CLOSE_UNSUPPORTED_DATA, 'this endpoint carries binary messages only, not text');
      case OP_PING:
        this.socket.write(this.frame(OP_PONG, f.payload));
        return;
      case OP_PONG:
        return;
      case OP_CLOSE: {
        // Echo the peer's code (or 1000) and finish: nothing more will come from them.
        const code = f.payload.length >= 2 ? f.payload.readUInt16BE(0) : CLOSE_NORMAL;
        this.sendClose(code === 1005 || code === 1006 || code === 1015 ? CLOSE_NORMAL : code, '');
        this.ended = true;
        this.push(null);
        this.socket.end();
        return;
      }
    }
  }

  private frame(opcode: number, payload: Uint8Array): Buffer {
    return writeWsFrame(opcode, payload, this.client ? crypto.randomBytes(4) : undefined);
  }

  private sendClose(code: number, reason: string): void {
    if (this.closeSent || !this.socket.writable) return;
    this.closeSent = true;
    this.socket.write(this.frame(OP_CLOSE, closePayload(code, reason)));
  }

  private closeWith(code: number, reason: string): void {
    this.sendClose(code, reason);
    this.socket.end();
    this.destroy(new WsProtocolError(code, `websocket closed: ${reason}`));
  }

  override _read(): void {
    if (this.pausedByUs) {
      this.pausedByUs = false;
      this.socket.resume();
    }
  }

  override _writev(chunks: Array<{ chunk: Buffer }>, cb: (err?: Error | null) => void): void {
    const payload = Buffer.concat(chunks.map((c) => c.chunk));
    if (payload.length === 0) return cb();
    if (this.closeSent) return cb(new Error('websocket is closing'));
    const messages: Buffer[] = [];
    for (let off = 0; off < payload.length; off += MAX_WS_MESSAGE_OUT) {
      messages.push(this.frame(OP_BINARY, payload.subarray(off, off + MAX_WS_MESSAGE_OUT)));
    }
    if (this.socket.write(messages.length === 1 ? messages[0] : Buffer.concat(messages))) cb();
    else this.waitingDrain = cb;
  }

  override _write(chunk: Buffer, _enc: BufferEncoding, cb: (err?: Error | null) => void): void {
    this._writev([{ chunk }], cb);
  }

  override _final(cb: (err?: Error | null) => void): void {
    this.sendClose(CLOSE_NORMAL, '');
    this.socket.end();
    cb();
  }

  override _destroy(err: Error | null, cb: (err?: Error | null) => void): void {
    this.drained(err ?? new Error('websocket destroyed'));
    // closeWith() has queued a close frame and end(); let them leave first (bounded, in case the peer reads nothing).
    if (this.closeSent && !this.socket.writableFinished && !this.socket.destroyed) {
      const socket = this.socket;
      const timer = setTimeout(() => socket.destroy(), 2_000).unref();
      socket.once('finish', () => {
        clearTimeout(timer);
        socket.destroy();
      });
    } else this.socket.destroy();
    cb(err);
  }

  private drained(err: Error | null): void {
    const cb = this.waitingDrain;
    this.waitingDrain = null;
    cb?.(err);
  }
}
