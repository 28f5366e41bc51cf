// Minimal, strict RFC 6455 framing for the websockets we serve: browser-style Tailscale clients carry a byte stream
// (Noise for /ts2021, DERP for /derp) in binary messages. No extensions (we never negotiate any, so RSV bits must be
// zero), client frames must be masked, control frames must be short and unfragmented.

export const OP_CONTINUATION = 0x0;
export const OP_TEXT = 0x1;
export const OP_BINARY = 0x2;
export const OP_CLOSE = 0x8;
export const OP_PING = 0x9;
export const OP_PONG = 0xa;

export const CLOSE_NORMAL = 1000;
export const CLOSE_PROTOCOL_ERROR = 1002;
export const CLOSE_UNSUPPORTED_DATA = 1003;
export const CLOSE_TOO_BIG = 1009;

/** Noise frames are at most 4 KiB and DERP frames 64 KiB; anything far beyond that is not a client. */
export const MAX_WS_PAYLOAD = 1 << 20;

/**
 * Largest message we send. Tailscale's websocket client keeps the library's default read limit of 32 KiB per
 * message (its wsconn never raises it) and fails the connection above it; Tailscale's server sends one message per
 * Noise frame, so 4096 bytes is what clients are used to.
 */
export const MAX_WS_MESSAGE_OUT = 4096;

export interface WsFrame {
  fin: boolean;
  opcode: number;
  payload: Buffer;
}

export class WsProtocolError extends Error {
  readonly code: number;
  constructor(code: number, message: string) {
    super(message);
    this.code = code;
  }
}

// Frame layout:
//   byte 0: FIN (0x80) | RSV1-3 (0x70, must be 0) | opcode (0x0f)
//   byte 1: MASK (0x80, set on client frames) | length (0x7f): 0-125 as is; 126: u16 BE follows; 127: u64 BE follows
//   [masking key, 4 bytes, when MASK]
//   payload, XORed with the masking key byte by byte (i mod 4)
export class WsFrameReader {
  private tail: Buffer = Buffer.alloc(0);
  private readonly requireMask: boolean;

  constructor(requireMask = true) {
    this.requireMask = requireMask;
  }

  get pending(): number {
    return this.tail.length;
  }

  push(chunk: Uint8Array): WsFrame[] {
    const buf = this.tail.length === 0 ? Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength) : Buffer.concat([this.tail, chunk]);
    const out: WsFrame[] = [];
    let off = 0;
    for (;;) {
      const f = this.one(buf, off);
      if (!f) break;
      out.push(f.frame);
      off = f.next;
    }
    this.tail = off === buf.length ? Buffer.alloc(0) : Buffer.from(buf.subarray(off));
    return out;
  }

  private one(buf: Buffer, off: number): { frame: WsFrame; next: number } | null {
    if (buf.length - off < 2) return null;
    const b0 = buf[off];
    const b1 = buf[off + 1];
    const fin = (b0 & 0x80) !== 0;
    const opcode = b0 & 0x0f;
    const masked = (b1 & 0x80) !== 0;
    if ((b0 & 0x70) !== 0) throw new WsProtocolError(CLOSE_PROTOCOL_ERROR, 'reserved bits set without a negotiated extension');
    if (![OP_CONTINUATION, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG].includes(opcode)) {
      throw new WsProtocolError(CLOSE_PROTOCOL_ERROR, `unknown websocket opcode ${opcode}`);
    }
    if (masked !== this.requireMask)
      throw new WsProtocolError(CLOSE_PROTOCOL_ERROR, this.requireMask ? 'client frame is not masked' : 'server frame is masked');
    let len = b1 & 0x7f;
    let p = off + 2;
    if (opcode >= OP_CLOSE && (len > 125 || !fin)) throw new WsProtocolError(CLOSE_PROTOCOL_ERROR, 'control frame too long or fragmented');
    if (len === 126) {
      if (buf.length - p < 2) return null;
      len = buf.readUInt16BE(p);
      p += 2;
    } else if (len === 127) {
      if (buf.length - p < 8) return null;
      const hi = buf.readUInt32BE(p);
      len = buf.readUInt32BE(p + 4);
      if (hi !== 0) throw new WsProtocolError(CLOSE_TOO_BIG, 'websocket frame over 4 GiB');
      p += 8;
    }
    if (len > MAX_WS_PAYLOAD) throw new WsProtocolError(CLOSE_TOO_BIG, `websocket frame of ${len} bytes exceeds ${MAX_WS_PAYLOAD}`);
    const maskLen = masked ? 4 : 0;
    if (buf.length - p < maskLen + len) return null;
    const payload = Buffer.from(buf.subarray(p + maskLen, p + maskLen + len));
    if (masked) {
      const key = buf.subarray(p, p + 4);
      for (let i = 0; i < payload.length; i++) payload[i] ^= key[i & 3];
    }
    return { frame: { fin, opcode, payload }, next: p + maskLen + len };
  }
}

/** One frame (FIN set unless `fin` is false). Server frames go unmasked; pass `mask` only to write client frames. */
export function writeWsFrame(opcode: number, payload: Uint8Array, mask?: Buffer, fin = true): Buffer {
  const len = payload.length;
  const extLen = len < 126 ? 0 : len < 0x10000 ? 2 : 8;
  const head = Buffer.alloc(2 + extLen + (mask ? 4 : 0));
  head[0] = (fin ? 0x80 : 0) | opcode;
  head[1] = (mask ? 0x80 : 0) | (extLen === 0 ? len : extLen === 2 ? 126 : 127);
  if (extLen === 2) head.writeUInt16BE(len, 2);
  if (extLen === 8) head.writeBigUInt64BE(BigInt(len), 2);
  if (!mask) return Buffer.concat([head, payload]);
  mask.copy(head, 2 + extLen);
  const body = Buffer.from(payload);
  for (let i = 0; i < body.length; i++) body[i] ^= mask[i & 3];
  return Buffer.concat([head, body]);
}

/** Close frame payload: code u16 BE | reason (UTF-8, short). */
export function closePayload(code: number, reason = ''): Buffer {
  const b = Buffer.alloc(2);
  b.writeUInt16BE(code, 0);
  return Buffer.concat([b, Buffer.from(reason, 'utf8').subarray(0, 120)]);
}
