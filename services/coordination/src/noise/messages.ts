// The cleartext envelopes of controlbase messages. Every message but the initiation starts with the same 3-byte
// header (type u8 | payload length u16 BE); the initiation puts the client's capability version in front.
import { KEY_LEN } from './x25519.ts';
import { TAG_LEN } from './aead.ts';

export const MSG_INITIATION = 0x01;
export const MSG_RESPONSE = 0x02;
export const MSG_ERROR = 0x03;
export const MSG_RECORD = 0x04;

export const HEADER_LEN = 3;
export const INITIATION_HEADER_LEN = 5;
/** e (32) + encrypted s (32 + 16) + tag of the empty payload (16). */
export const INITIATION_PAYLOAD_LEN = KEY_LEN + KEY_LEN + TAG_LEN + TAG_LEN;
export const INITIATION_LEN = INITIATION_HEADER_LEN + INITIATION_PAYLOAD_LEN; // 101
/** e (32) + tag of the empty payload (16). */
export const RESPONSE_PAYLOAD_LEN = KEY_LEN + TAG_LEN;
export const RESPONSE_LEN = HEADER_LEN + RESPONSE_PAYLOAD_LEN; // 51

/** Largest whole frame either side sends or accepts, header included. */
export const MAX_FRAME_LEN = 4096;
export const MAX_CIPHERTEXT_LEN = MAX_FRAME_LEN - HEADER_LEN; // 4093
export const MAX_PLAINTEXT_LEN = MAX_CIPHERTEXT_LEN - TAG_LEN; // 4077

export interface Initiation {
  capVersion: number;
  /** Client ephemeral public key, cleartext. */
  ephemeral: Buffer;
  /** Client machine public key, sealed (32 + 16). */
  sealedStatic: Buffer;
  /** Tag over the empty payload (16). */
  tag: Buffer;
}

/** A handshake the server refuses; `reply`, when set, is sent back to the client in an error frame. */
export class HandshakeError extends Error {
  readonly reply: string | undefined;
  constructor(reason: string, reply?: string) {
    super(reason);
    this.reply = reply;
  }
}

// Initiation, client -> server, exactly 101 bytes:
//   [0..2)    capability version, u16 BE
//   [2]       type 0x01
//   [3..5)    payload length, u16 BE, always 96
//   [5..37)   client ephemeral public key
//   [37..85)  client machine public key, sealed (ciphertext 32 | tag 16)
//   [85..101) tag of the empty payload
export function parseInitiation(buf: Uint8Array): Initiation {
  const b = Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength);
  if (b.length !== INITIATION_LEN) {
    throw new HandshakeError(`handshake initiation is ${b.length} bytes, want ${INITIATION_LEN}`, 'wrong handshake initiation size');
  }
  if (b[2] !== MSG_INITIATION) {
    throw new HandshakeError(`handshake initiation has message type ${b[2]}, want ${MSG_INITIATION}`, 'unexpected handshake message type');
  }
  const len = b.readUInt16BE(3);
  if (len !== INITIATION_PAYLOAD_LEN) {
    throw new HandshakeError(`handshake initiation declares a ${len}-byte payload, want ${INITIATION_PAYLOAD_LEN}`, 'wrong handshake initiation length');
  }
  let o = INITIATION_HEADER_LEN;
  const take = (n: number) => {
    const part = Buffer.from(b.subarray(o, o + n));
    o += n;
    return part;
  };
  return { capVersion: b.readUInt16BE(0), ephemeral: take(KEY_LEN), sealedStatic: take(KEY_LEN + TAG_LEN), tag: take(TAG_LEN) };
}

// Initiation writer (used by the test client; the server only parses).
export function writeInitiation(m: Initiation): Buffer {
  const head = Buffer.alloc(INITIATION_HEADER_LEN);
  head.writeUInt16BE(m.capVersion, 0);
  head[2] = MSG_INITIATION;
  head.writeUInt16BE(INITIATION_PAYLOAD_LEN, 3);
  return Buffer.concat([head, m.ephemeral, m.sealedStatic, m.tag]);
}

// Response, server -> client, exactly 51 bytes:
//   [0]       type 0x02
//   [1..3)    payload length, u16 BE, always 48
//   [3..35)   server ephemeral public key
//   [35..51)  tag of the empty payload
export function writeResponse(ephemeral: Uint8Array, tag: Uint8Array): Buffer {
  const head = Buffer.of(MSG_RESPONSE, 0, 0);
  head.writeUInt16BE(RESPONSE_PAYLOAD_LEN, 1);
  return Buffer.concat([head, ephemeral, tag]);
}

export function parseResponse(buf: Uint8Array): { ephemeral: Buffer; tag: Buffer } {
  const b = Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength);
  if (b.length !== RESPONSE_LEN || b[0] !== MSG_RESPONSE || b.readUInt16BE(1) !== RESPONSE_PAYLOAD_LEN) {
    throw new HandshakeError('malformed handshake response');
  }
  return { ephemeral: Buffer.from(b.subarray(3, 35)), tag: Buffer.from(b.subarray(35, 51)) };
}

// Error, server -> client, instead of the response:
//   [0]       type 0x03
//   [1..3)    message length, u16 BE
//   [3..)     message, ASCII; unauthenticated, so the client shows it only as a hint
// The message is always one of our own fixed strings, never text the client sent.
export function writeError(message: string): Buffer {
  const text = Buffer.from(message.replace(/[^\x20-\x7e]/g, '?'), 'ascii').subarray(0, 0xffff);
  const head = Buffer.of(MSG_ERROR, 0, 0);
  head.writeUInt16BE(text.length, 1);
  return Buffer.concat([head, text]);
}

// Record (transport frame), both directions:
//   [0]       type 0x04
//   [1..3)    ciphertext length, u16 BE, 16..4093
//   [3..)     ChaCha20-Poly1305 ciphertext | tag 16
export function writeRecordHeader(ciphertextLen: number): Buffer {
  const head = Buffer.of(MSG_RECORD, 0, 0);
  head.writeUInt16BE(ciphertextLen, 1);
  return head;
}
