// STUN binding requests and responses (RFC 5389), as Tailscale clients use them to learn their public address and
// to measure latency to each region. Pure functions; the parser never throws, whatever the bytes.
// Reference: tailscale net/stun/stun.go.
//
// Message: type u16 | length u16 (bytes after the header) | magic cookie 21 12 a4 42 | transaction id[12] | attrs
// Attribute: type u16 | length u16 | value[length] | zero padding to a multiple of 4
//
// Tailscale's request: type 0x0001 (binding), SOFTWARE (0x8022) "tailnode", FINGERPRINT (0x8028) last.
// Our answer: type 0x0101 (binding success) with one XOR-MAPPED-ADDRESS (0x0020):
//   0x00 | family (1 = IPv4, 2 = IPv6) | port ^ 0x2112 | address ^ (cookie, then transaction id for IPv6)
import ipaddr from 'ipaddr.js';
import zlib from 'node:zlib';

export const HEADER_LEN = 20;
const BINDING_REQUEST = 0x0001;
export const BINDING_SUCCESS = 0x0101;
export const MAGIC_COOKIE = Buffer.from([0x21, 0x12, 0xa4, 0x42]);
const ATTR_XOR_MAPPED_ADDRESS = 0x0020;
const ATTR_XOR_MAPPED_ADDRESS_ALT = 0x8020;
const ATTR_MAPPED_ADDRESS = 0x0001;
const ATTR_SOFTWARE = 0x8022;
const ATTR_FINGERPRINT = 0x8028;
/** FINGERPRINT is CRC-32 of the message before it, XORed with "STUN". */
const FINGERPRINT_XOR = 0x5354554e;

export interface BindingRequest {
  txId: Buffer;
  /** SOFTWARE attribute, if any ("tailnode" from Tailscale clients). */
  software: string | null;
}

interface Attr {
  type: number;
  value: Buffer;
  /** Offset of the attribute header in the message. */
  offset: number;
}

/** The attributes after the header, or null if they do not tile the message exactly. */
function attributes(msg: Buffer): Attr[] | null {
  const out: Attr[] = [];
  let off = HEADER_LEN;
  while (off < msg.length) {
    if (msg.length - off < 4) return null;
    const type = msg.readUInt16BE(off);
    const len = msg.readUInt16BE(off + 2);
    const padded = (len + 3) & ~3;
    if (off + 4 + padded > msg.length) return null;
    out.push({ type, value: msg.subarray(off + 4, off + 4 + len), offset: off });
    off += 4 + padded;
  }
  return out;
}

function isStunHeader(msg: Buffer): boolean {
  return msg.length >= HEADER_LEN && (msg[0] & 0xc0) === 0 && msg.subarray(4, 8).equals(MAGIC_COOKIE) && msg.readUInt16BE(2) === msg.length - HEADER_LEN;
}

function fingerprint(upTo: Buffer): number {
  return (zlib.crc32(upTo) ^ FINGERPRINT_XOR) >>> 0;
}

/**
 * A well-formed binding request: the header checks out, the attributes tile the message, and a FINGERPRINT, when
 * present, is last and correct. Anything else (other STUN methods, responses, garbage) is null.
 */
export function parseBindingRequest(bytes: Uint8Array): BindingRequest | null {
  const msg = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (!isStunHeader(msg) || msg.readUInt16BE(0) !== BINDING_REQUEST) return null;
  const attrs = attributes(msg);
  if (!attrs) return null;
  let software: string | null = null;
  for (let i = 0; i < attrs.length; i++) {
    const a = attrs[i];
    if (a.type === ATTR_SOFTWARE) software = a.value.toString('utf8');
    if (a.type === ATTR_FINGERPRINT) {
      if (i !== attrs.length - 1 || a.value.length !== 4) return null;
      if (a.value.readUInt32BE(0) !== fingerprint(msg.subarray(0, a.offset))) return null;
    }
  }
  return { txId: Buffer.from(msg.subarray(8, HEADER_LEN)), software };
}

/** Address bytes of a dotted IPv4 or an IPv6 literal (a %zone suffix is dropped); null if it is neither. */
function addressBytes(address: string): Buffer | null {
  const bare = address.replace(/%.*$/, '');
  if (!ipaddr.isValid(bare)) return null;
  const parsed = ipaddr.parse(bare);
  return Buffer.from(parsed.toByteArray());
}

/** The binding success answer telling the sender at `address`:`port` what we saw. Null for a non-IP address. */
export function bindingResponse(txId: Uint8Array, address: string, port: number): Buffer | null {
  const addr = addressBytes(address);
  if (!addr || txId.length !== 12) return null;
  const family = addr.length === 4 ? 1 : 2;
  const attrLen = 4 + addr.length;
  const out = Buffer.alloc(HEADER_LEN + 4 + attrLen);
  out.writeUInt16BE(BINDING_SUCCESS, 0);
  out.writeUInt16BE(4 + attrLen, 2);
  MAGIC_COOKIE.copy(out, 4);
  out.set(txId, 8);
  out.writeUInt16BE(ATTR_XOR_MAPPED_ADDRESS, 20);
  out.writeUInt16BE(attrLen, 22);
  out[24] = 0;
  out[25] = family;
  out.writeUInt16BE(port ^ 0x2112, 26);
  const xorKey = Buffer.concat([MAGIC_COOKIE, Buffer.from(txId)]);
  for (let i = 0; i < addr.length; i++) out[28 + i] = addr[i] ^ xorKey[i];
  return out;
}

// Client side, for tests and benchmarks.

/** A binding request exactly like Tailscale's: SOFTWARE "tailnode" and a FINGERPRINT. */
export function bindingRequest(txId: Uint8Array, software = 'tailnode'): Buffer {
  const sw = Buffer.from(software, 'utf8');
  const swPadded = (sw.length + 3) & ~3;
  const out = Buffer.alloc(HEADER_LEN + 4 + swPadded + 8);
  out.writeUInt16BE(BINDING_REQUEST, 0);
  out.writeUInt16BE(out.length - HEADER_LEN, 2);
  MAGIC_COOKIE.copy(out, 4);
  out.set(txId, 8);
  out.writeUInt16BE(ATTR_SOFTWARE, 20);
  out.writeUInt16BE(sw.length, 22);
  sw.copy(out, 24);
  const fpAt = HEADER_LEN + 4 + swPadded;
  out.writeUInt16BE(ATTR_FINGERPRINT, fpAt);
  out.writeUInt16BE(4, fpAt + 2);
  out.writeUInt32BE(fingerprint(out.subarray(0, fpAt)), fpAt + 4);
  return out;
}

export interface BindingResponse {
  txId: Buffer;
  address: string;
  port: number;
}

/** Reads XOR-MAPPED-ADDRESS (or plain MAPPED-ADDRESS) from a binding success; null for anything else. */
export function parseBindingResponse(bytes: Uint8Array): BindingResponse | null {
  const msg = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (!isStunHeader(msg) || msg.readUInt16BE(0) !== BINDING_SUCCESS) return null;
  const attrs = attributes(msg);
  if (!attrs) return null;
  const txId = Buffer.from(msg.subarray(8, HEADER_LEN));
  let fallback: BindingResponse | null = null;
  for (const a of attrs) {
    const xor = a.type === ATTR_XOR_MAPPED_ADDRESS || a.type === ATTR_XOR_MAPPED_ADDRESS_ALT;
    if (!xor && a.type !== ATTR_MAPPED_ADDRESS) continue;
    if (a.value.length < 4) return null;
    const len = a.value[1] === 1 ? 4 : a.value[1] === 2 ? 16 : 0;
    if (len === 0 || a.value.length < 4 + len) return null;
    const raw = Buffer.from(a.value.subarray(4, 4 + len));
    let port = a.value.readUInt16BE(2);
    if (xor) {
      const xorKey = Buffer.concat([MAGIC_COOKIE, txId]);
      for (let i = 0; i < len; i++) raw[i] ^= xorKey[i];
      port ^= 0x2112;
    }
    const address = ipaddr.fromByteArray([...raw]).toString();
    if (xor) return { txId, address, port };
    fallback = { txId, address, port };
  }
  return fallback;
}
