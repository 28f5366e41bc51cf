// STUN binding requests as Tailscale sends them (net/stun Request): a 20-byte header (type 0x0001, attribute length,
// magic cookie 21 12 a4 42, 12-byte transaction id), SOFTWARE "tailnode", then FINGERPRINT = CRC-32 of everything
// before it XOR 0x5354554e. derper's server refuses a request without exactly these; ours answers it too.
import zlib from 'node:zlib';

const SOFTWARE = Buffer.from('tailnode');
const COOKIE = 0x2112a442;

export function bindingRequest(txid: Uint8Array): Buffer {
  const attrs = 4 + SOFTWARE.length + 8;
  const b = Buffer.alloc(20 + attrs);
  b.writeUInt16BE(0x0001, 0);
  b.writeUInt16BE(attrs, 2);
  b.writeUInt32BE(COOKIE, 4);
  b.set(txid, 8);
  b.writeUInt16BE(0x8022, 20);
  b.writeUInt16BE(SOFTWARE.length, 22);
  SOFTWARE.copy(b, 24);
  const fpAt = 24 + SOFTWARE.length;
  b.writeUInt16BE(0x8028, fpAt);
  b.writeUInt16BE(4, fpAt + 2);
  b.writeUInt32BE((zlib.crc32(b.subarray(0, fpAt)) ^ 0x5354554e) >>> 0, fpAt + 4);
  return b;
}

/** True for a binding success response (0x0101) with our cookie; its transaction id is bytes 8..20. */
export function isBindingSuccess(b: Buffer): boolean {
  return b.length >= 20 && b.readUInt16BE(0) === 0x0101 && b.readUInt32BE(4) === COOKIE;
}
