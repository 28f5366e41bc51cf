// WebSocket framing (RFC 6455 section 5), just what DERP over WebSocket needs: binary messages, ping/pong, close;
// no extensions (we never negotiate compression: WireGuard packets do not compress).
//
// Frame layout:
//   b0: FIN(1) RSV1..3(3, must be 0) opcode(4)
//   b1: MASK(1) len7
//   len7 = 126 -> u16 BE length follows; 127 -> u64 BE length follows (top bit 0); else len7 is the length
//   MASK = 1 -> masking key[4] follows; payload[i] ^= key[i % 4]
//   payload[length]
// Frames from a client are masked, frames from a server are not (section 5.1); a violation is a protocol error.
import crypto from 'node:crypto';
import { ByteQueue } from './byte-queue.ts';

export const WsOpcode = {
  Continuation: 0x0,
  Text: 0x1,
  Binary: 0x2,
  Close: 0x8,
  Ping: 0x9,
  Pong: 0xa,
} as const;

export const WsCloseCode = {
  Normal: 1000,
  GoingAway: 1001,
  ProtocolError: 1002,
  UnsupportedData: 1003,
  PolicyViolation: 1008,
  TooBig: 1009,
} as const;

export interface WsFrame {
  fin: boolean;
  opcode: number;
  payload: Buffer;
}

/** A framing violation; `code` is the close code to send before closing. */
export class WsProtocolError extends Error {
  readonly code: number;
  constructor(code: number, message: string) {
    super(message);
    this.code = code;
  }
}

/** Largest frame payload accepted. DERP frames are at most 64 KiB + 37 bytes and clients write one per message. */
export const MAX_WS_PAYLOAD = 1 << 20;

/** One frame. `mask` true for a client's frames (a fresh random key each), false for a server's. */
export function encodeWsFrame(opcode: number, payload: Uint8Array, mask: boolean, fin = true): Buffer {
  const len = payload.length;
  const ext = len < 126 ? 0 : len <= 0xffff ? 2 : 8;
  const head = 2 + ext + (mask ? 4 : 0);
  const out = Buffer.allocUnsafe(head + len);
  out[0] = (fin ? 0x80 : 0) | opcode;
  out[1] = (mask ? 0x80 : 0) | (ext === 0 ? len : ext === 2 ? 126 : 127);
  if (ext === 2) out.writeUInt16BE(len, 2);
  else if (ext === 8) out.writeBigUInt64BE(BigInt(len), 2);
  if (mask) {
    const key = crypto.randomBytes(4);
    key.copy(out, 2 + ext);
    for (let i = 0; i < len; i++) out[head + i] = payload[i] ^ key[i & 3];
  } else {
    out.set(payload, head);
  }
  return out;
}

// Close payload: code u16 BE | UTF-8 reason (<= 123 bytes, so the control frame stays within 125)
export function encodeClosePayload(code: number, reason = ''): Buffer {
  const text = Buffer.from(reason, 'utf8').subarray(0, 123);
  const b = Buffer.allocUnsafe(2 + text.length);
  b.writeUInt16BE(code, 0);
  text.copy(b, 2);
  return b;
}

/** Incremental frame parser. `expectMasked`: true on the server side. */
export class WsFrameParser {
  private readonly bytes = new ByteQueue();
  private readonly expectMasked: boolean;

  constructor(expectMasked: boolean) {
    this.expectMasked = expectMasked;
  }

  push(chunk: Buffer): void {
    this.bytes.push(chunk);
  }

  /** The next whole frame (payload unmasked), or null until more bytes arrive. Throws WsProtocolError. */
  next(): WsFrame | null {
    const q = this.bytes;
    if (q.length < 2) return null;
    const b0 = q.at(0);
    const b1 = q.at(1);
    const fin = (b0 & 0x80) !== 0;
    const opcode = b0 & 0x0f;
    const masked = (b1 & 0x80) !== 0;
    if ((b0 & 0x70) !== 0) throw new WsProtocolError(WsCloseCode.ProtocolError, 'reserved bits set without a negotiated extension');
    if (masked !== this.expectMasked) throw new WsProtocolError(WsCloseCode.ProtocolError, masked ? 'server frames must not be masked' : 'client frames must be masked');
    const len7 = b1 & 0x7f;
    const ext = len7 === 126 ? 2 : len7 === 127 ? 8 : 0;
    const headLen = 2 + ext + (masked ? 4 : 0);
    if (q.length < headLen) return null;
    let len = len7;
    if (ext === 2) len = (q.at(2) << 8) | q.at(3);
    else if (ext === 8) {
      if (q.at(2) !== 0 || q.at(3) !== 0 || q.at(4) !== 0 || q.at(5) !== 0) throw new WsProtocolError(WsCloseCode.TooBig, 'frame longer than 4 GiB');
      len = ((q.at(6) << 24) >>> 0) + (q.at(7) << 16) + (q.at(8) << 8) + q.at(9);
    }
    if (opcode >= 0x8) {
      if (!fin) throw new WsProtocolError(WsCloseCode.ProtocolError, 'fragmented control frame');
      if (len > 125) throw new WsProtocolError(WsCloseCode.ProtocolError, 'control frame payload over 125 bytes');
    }
    if (len > MAX_WS_PAYLOAD) throw new WsProtocolError(WsCloseCode.TooBig, `frame of ${len} bytes exceeds ${MAX_WS_PAYLOAD}`);
    if (q.length < headLen + len) return null;
    const head = q.take(headLen);
    const body = q.take(len);
    let payload = body;
    if (masked) {
      const key = head.subarray(2 + ext, 2 + ext + 4);
      payload = Buffer.allocUnsafe(len);
      for (let i = 0; i < len; i++) payload[i] = body[i] ^ key[i & 3];
    }
    return { fin, opcode, payload };
  }
}
