// DERP frames: the constants of the protocol and the encoders/decoders of each frame body. Pure functions over
// Buffers, no I/O, so both the server and our test/benchmark client use them and property tests can hammer them.
// Reference: tailscale/tailscale derp/derp.go (protocol version 2).
//
// Every frame on the wire:
//   type u8 | length u32 big-endian (bytes that follow, header excluded) | body[length]

export const FRAME_HEADER_LEN = 5;
export const KEY_LEN = 32;
export const NONCE_LEN = 24;
/** NaCl box adds a 16-byte Poly1305 tag. */
export const BOX_OVERHEAD = 16;
/** "DERP🔑": 44 45 52 50 f0 9f 94 91. */
export const MAGIC = Buffer.from('DERP🔑', 'utf8');
export const PROTOCOL_VERSION = 2;
/** Largest packet a client may relay (the bytes after the destination key). */
export const MAX_PACKET_SIZE = 64 << 10;
/** The reference client refuses frames above 1 MiB; nothing we send comes close. */
export const MAX_CLIENT_FRAME = 1 << 20;

export const FrameType = {
  ServerKey: 0x01,
  ClientInfo: 0x02,
  ServerInfo: 0x03,
  SendPacket: 0x04,
  RecvPacket: 0x05,
  KeepAlive: 0x06,
  NotePreferred: 0x07,
  PeerGone: 0x08,
  PeerPresent: 0x09,
  ForwardPacket: 0x0a,
  WatchConns: 0x10,
  ClosePeer: 0x11,
  Ping: 0x12,
  Pong: 0x13,
  Health: 0x14,
  Restarting: 0x15,
} as const;
export type FrameTypeValue = (typeof FrameType)[keyof typeof FrameType];

export const PeerGoneReason = {
  /** The peer was connected here and went away. */
  Disconnected: 0x00,
  /** The destination of a packet is not connected here. */
  NotHere: 0x01,
} as const;

/** A frame body that violates the protocol. The connection that sent it is closed; nothing else is affected. */
export class FrameError extends Error {}

export interface Frame {
  type: number;
  body: Buffer;
}

/** Header and body as one buffer, ready for one write. */
export function encodeFrame(type: number, ...parts: Uint8Array[]): Buffer {
  let len = 0;
  for (const p of parts) len += p.length;
  const out = Buffer.allocUnsafe(FRAME_HEADER_LEN + len);
  out[0] = type;
  out.writeUInt32BE(len, 1);
  let off = FRAME_HEADER_LEN;
  for (const p of parts) {
    out.set(p, off);
    off += p.length;
  }
  return out;
}

function needKey(name: string, key: Uint8Array): void {
  if (key.length !== KEY_LEN) throw new RangeError(`${name} must be ${KEY_LEN} bytes, got ${key.length}`);
}

// ServerKey body: magic[8] | server public key[32] (| future fields, which clients ignore)
export function encodeServerKey(serverPublic: Uint8Array): Buffer {
  needKey('server key', serverPublic);
  return encodeFrame(FrameType.ServerKey, MAGIC, serverPublic);
}

export function decodeServerKey(body: Buffer): Buffer {
  if (body.length < MAGIC.length + KEY_LEN || !body.subarray(0, MAGIC.length).equals(MAGIC)) {
    throw new FrameError('server greeting lacks the DERP magic and key (is this a DERP server?)');
  }
  return Buffer.from(body.subarray(MAGIC.length, MAGIC.length + KEY_LEN));
}

// ClientInfo body: client public key[32] | nonce[24] | box(JSON ClientInfo)[n + 16]
export function encodeClientInfo(clientPublic: Uint8Array, sealed: Uint8Array): Buffer {
  needKey('client key', clientPublic);
  return encodeFrame(FrameType.ClientInfo, clientPublic, sealed);
}

export function decodeClientInfo(body: Buffer): { clientKey: Buffer; sealed: Buffer } {
  if (body.length < KEY_LEN + NONCE_LEN + BOX_OVERHEAD) throw new FrameError(`ClientInfo of ${body.length} bytes is too short to hold a key and a sealed box`);
  return { clientKey: body.subarray(0, KEY_LEN), sealed: body.subarray(KEY_LEN) };
}

// ServerInfo body: nonce[24] | box(JSON ServerInfo)[n + 16]
export function encodeServerInfo(sealed: Uint8Array): Buffer {
  return encodeFrame(FrameType.ServerInfo, sealed);
}

// SendPacket body: destination key[32] | packet[0..64 KiB]
export function encodeSendPacket(dst: Uint8Array, packet: Uint8Array): Buffer {
  needKey('destination key', dst);
  if (packet.length > MAX_PACKET_SIZE) throw new RangeError(`packet of ${packet.length} bytes exceeds ${MAX_PACKET_SIZE}`);
  return encodeFrame(FrameType.SendPacket, dst, packet);
}

export function decodeSendPacket(body: Buffer): { dst: Buffer; packet: Buffer } {
  if (body.length < KEY_LEN) throw new FrameError(`SendPacket of ${body.length} bytes is shorter than a destination key`);
  if (body.length - KEY_LEN > MAX_PACKET_SIZE)
    throw new FrameError(`SendPacket carries ${body.length - KEY_LEN} bytes, more than the ${MAX_PACKET_SIZE}-byte limit`);
  return { dst: body.subarray(0, KEY_LEN), packet: body.subarray(KEY_LEN) };
}

// RecvPacket body (protocol v2): source key[32] | packet
export function encodeRecvPacket(src: Uint8Array, packet: Uint8Array): Buffer {
  return encodeFrame(FrameType.RecvPacket, src, packet);
}

export function decodeRecvPacket(body: Buffer): { src: Buffer; packet: Buffer } {
  if (body.length < KEY_LEN) throw new FrameError(`RecvPacket of ${body.length} bytes is shorter than a source key`);
  return { src: body.subarray(0, KEY_LEN), packet: body.subarray(KEY_LEN) };
}

// KeepAlive body: empty
export function encodeKeepAlive(): Buffer {
  return encodeFrame(FrameType.KeepAlive);
}

// NotePreferred body: u8, non-zero = "this relay is my home"
export function encodeNotePreferred(preferred: boolean): Buffer {
  return encodeFrame(FrameType.NotePreferred, Uint8Array.of(preferred ? 1 : 0));
}

export function decodeNotePreferred(body: Buffer): boolean {
  if (body.length !== 1) throw new FrameError(`NotePreferred must be 1 byte, got ${body.length}`);
  return body[0] !== 0;
}

// PeerGone body: peer key[32] | reason u8 (older servers omitted the reason; it then means Disconnected)
export function encodePeerGone(peer: Uint8Array, reason: number): Buffer {
  needKey('peer key', peer);
  return encodeFrame(FrameType.PeerGone, peer, Uint8Array.of(reason));
}

export function decodePeerGone(body: Buffer): { peer: Buffer; reason: number } {
  if (body.length < KEY_LEN) throw new FrameError(`PeerGone of ${body.length} bytes is shorter than a key`);
  return { peer: body.subarray(0, KEY_LEN), reason: body.length > KEY_LEN ? body[KEY_LEN] : PeerGoneReason.Disconnected };
}

/** Pings carry 8 bytes; the reference allows some room for future fields and refuses anything larger than this. */
export const MAX_PING_LEN = 1000;

// Ping body: data[8] (| up to 992 bytes the receiver ignores). Pong body: the 8 data bytes of the ping it answers.
export function encodePing(data: Uint8Array): Buffer {
  if (data.length !== 8) throw new RangeError('ping data must be 8 bytes');
  return encodeFrame(FrameType.Ping, data);
}

export function encodePong(data: Uint8Array): Buffer {
  if (data.length !== 8) throw new RangeError('pong data must be 8 bytes');
  return encodeFrame(FrameType.Pong, data);
}

export function decodePing(body: Buffer): Buffer {
  if (body.length < 8) throw new FrameError(`ping of ${body.length} bytes is shorter than its 8 data bytes`);
  if (body.length > MAX_PING_LEN) throw new FrameError(`ping of ${body.length} bytes exceeds ${MAX_PING_LEN}`);
  return body.subarray(0, 8);
}

// Health body: UTF-8 text of the problem; empty = healthy again
export function encodeHealth(problem: string): Buffer {
  return encodeFrame(FrameType.Health, Buffer.from(problem, 'utf8'));
}

// Restarting body: reconnect-in ms u32 BE | try-for ms u32 BE
export function encodeRestarting(reconnectInMs: number, tryForMs: number): Buffer {
  const b = Buffer.alloc(8);
  b.writeUInt32BE(reconnectInMs, 0);
  b.writeUInt32BE(tryForMs, 4);
  return encodeFrame(FrameType.Restarting, b);
}

// Disco packets (NAT traversal control messages) start with "TS💬" (54 53 f0 9f 92 ac) | sender disco key[32] |
// nonce[24]. The server gives them their own queue, so a flood of data cannot starve path discovery, and answers a
// disco packet to an absent peer with PeerGone(NotHere) so the sender stops routing it here.
const DISCO_MAGIC = Buffer.from('TS💬', 'utf8');
export function looksLikeDisco(packet: Uint8Array): boolean {
  if (packet.length < DISCO_MAGIC.length + KEY_LEN + NONCE_LEN) return false;
  for (let i = 0; i < DISCO_MAGIC.length; i++) if (packet[i] !== DISCO_MAGIC[i]) return false;
  return true;
}
