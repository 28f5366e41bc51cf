// DERP frames: the constants of the protocol and the encoders/decoders of each frame body. Pure functions over
// Buffers, no I/O, so both the server and our test/benchmark client use them and property tests can hammer them.
// Reference: tailscale/tailscale derp/derp.go (protocol version 2).
import ipaddr from 'ipaddr.js';
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

// --- mesh frames: only for relays that present the region's mesh key (see mesh-link.ts, derp-server.ts) ----------

/** Flags byte of PeerPresent (derp.go PeerPresentFlags); a modern server never sends 0. */
export const PeerPresentFlags = {
  IsRegular: 1 << 0,
  IsMeshPeer: 1 << 1,
  IsProber: 1 << 2,
  /** The client's DERP connection is not to its region's first (ideal) node. */
  NotIdeal: 1 << 3,
} as const;

/** Body of the PeerPresent frames we send: key 32 + IP 16 + port 2 + flags 1. */
export const PEER_PRESENT_LEN = KEY_LEN + 16 + 2 + 1;

export interface PeerPresent {
  peer: Buffer;
  /** The client's address as the sending relay saw it ("" when it sent none or all zeros); port 0 when unknown. */
  ip: string;
  port: number;
  /** 0 from older servers that send no flags byte. */
  flags: number;
}

// PeerPresent body: peer key[32] | IP[16] (IPv4 as ::ffff:a.b.c.d) | port u16 BE | flags u8
// Older servers send the key alone or without the flags; newer ones may append more, which we ignore.
export function encodePeerPresent(peer: Uint8Array, ip: string, port: number, flags: number): Buffer {
  needKey('peer key', peer);
  const body = Buffer.alloc(PEER_PRESENT_LEN);
  body.set(peer, 0);
  ipTo16(ip).copy(body, KEY_LEN);
  body.writeUInt16BE(port & 0xffff, KEY_LEN + 16);
  body[KEY_LEN + 18] = flags & 0xff;
  return encodeFrame(FrameType.PeerPresent, body);
}

export function decodePeerPresent(body: Buffer): PeerPresent {
  if (body.length < KEY_LEN) throw new FrameError(`PeerPresent of ${body.length} bytes is shorter than a key`);
  const peer = body.subarray(0, KEY_LEN);
  if (body.length < KEY_LEN + 18) return { peer, ip: '', port: 0, flags: 0 };
  return {
    peer,
    ip: ipFrom16(body.subarray(KEY_LEN, KEY_LEN + 16)),
    port: body.readUInt16BE(KEY_LEN + 16),
    flags: body.length > KEY_LEN + 18 ? body[KEY_LEN + 18] : 0,
  };
}

/** 16 bytes of an IPv4 (mapped) or IPv6 literal; all zeros for "" or anything that is not an IP literal. */
function ipTo16(ip: string): Buffer {
  if (!ipaddr.isValid(ip)) return Buffer.alloc(16);
  const a = ipaddr.parse(ip);
  return Buffer.from((a.kind() === 'ipv4' ? (a as ipaddr.IPv4).toIPv4MappedAddress() : a).toByteArray());
}

function ipFrom16(b: Buffer): string {
  if (b.every((x) => x === 0)) return '';
  const a = ipaddr.fromByteArray([...b]) as ipaddr.IPv6;
  return a.isIPv4MappedAddress() ? a.toIPv4Address().toString() : a.toString();
}

// ForwardPacket body: source key[32] | destination key[32] | packet[0..64 KiB]
export function encodeForwardPacket(src: Uint8Array, dst: Uint8Array, packet: Uint8Array): Buffer {
  needKey('source key', src);
  needKey('destination key', dst);
  if (packet.length > MAX_PACKET_SIZE) throw new RangeError(`packet of ${packet.length} bytes exceeds ${MAX_PACKET_SIZE}`);
  return encodeFrame(FrameType.ForwardPacket, src, dst, packet);
}

export function decodeForwardPacket(body: Buffer): { src: Buffer; dst: Buffer; packet: Buffer } {
  if (body.length < 2 * KEY_LEN) throw new FrameError(`ForwardPacket of ${body.length} bytes is shorter than two keys`);
  if (body.length - 2 * KEY_LEN > MAX_PACKET_SIZE)
    throw new FrameError(`ForwardPacket carries ${body.length - 2 * KEY_LEN} bytes, more than the ${MAX_PACKET_SIZE}-byte limit`);
  return { src: body.subarray(0, KEY_LEN), dst: body.subarray(KEY_LEN, 2 * KEY_LEN), packet: body.subarray(2 * KEY_LEN) };
}

// WatchConns body: empty. The server answers with PeerPresent for every client connected now, then PeerPresent and
// PeerGone(Disconnected) as clients come and go.
export function encodeWatchConns(): Buffer {
  return encodeFrame(FrameType.WatchConns);
}

// ClosePeer body: key[32] of the client whose connection(s) the server closes.
export function encodeClosePeer(peer: Uint8Array): Buffer {
  needKey('peer key', peer);
  return encodeFrame(FrameType.ClosePeer, peer);
}

export function decodeClosePeer(body: Buffer): Buffer {
  if (body.length !== KEY_LEN) throw new FrameError(`ClosePeer must be ${KEY_LEN} bytes, got ${body.length}`);
  return body;
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
