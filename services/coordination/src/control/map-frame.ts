// Framing of /machine/map responses: each message is `u32 little-endian length | body`, where body is the JSON
// MapResponse compressed as one zstd frame when the client asked for Compress:"zstd" (every current client does),
// else the JSON itself. The client reads the length, then exactly that many bytes.
import zlib from 'node:zlib';
import type { MapResponse } from '../tailcfg/tailcfg.ts';

export function encodeMapFrame(msg: MapResponse, compress: boolean): Buffer {
  return encodeJsonFrame(JSON.stringify(msg), compress);
}

/**
 * The last small frame built, reused when the next message is the same text. A fan-out sends one delta to every
 * stream in the same pass (map-session.ts aligns their windows, so they build identical messages): with this, a
 * network of N nodes coming online costs one compression per distinct message instead of one per stream. Full maps
 * (large, and different for every node) are not kept.
 */
const REUSE_MAX = 64 * 1024;
let last: { json: string; compress: boolean; frame: Buffer } | null = null;

/**
 * Messages up to this size go out as a zstd frame holding one raw (stored) block instead of being compressed. Every
 * zstdCompressSync call sets up a compressor: 35–70 µs even for the 100–300-byte patches ("online", new endpoints)
 * that make up most messages when many nodes connect, against ~1 µs for the frame below, and such messages shrink by
 * at most a few hundred bytes. Measured with 10,000 streams (bench/control-policy.ts), where those patches number in
 * the millions.
 */
export const STORE_BELOW = 1024;

/**
 * A zstd frame (RFC 8878 section 3.1.1) carrying `raw` uncompressed: magic number, a frame header descriptor with
 * Single_Segment_Flag set (so no window descriptor) and the content size in 1 byte (< 256) or 2 bytes (size - 256,
 * up to 65,791), then one block with Last_Block = 1, Block_Type = Raw_Block (0) and Block_Size = the content size.
 * No checksum. Any zstd decoder reads it (Go's, which tailscaled uses; Node's).
 */
export function storedZstdFrame(raw: Buffer): Buffer {
  if (raw.length > STORE_BELOW) throw new RangeError(`storedZstdFrame: ${raw.length} bytes is over ${STORE_BELOW}`);
  const small = raw.length < 256;
  const head = Buffer.allocUnsafe(small ? 9 : 10);
  head.writeUInt32LE(0xfd2fb528, 0);
  head[4] = small ? 0x20 : 0x60; // Single_Segment_Flag, Frame_Content_Size_Flag 0 (1 byte) or 1 (2 bytes)
  let off = 5;
  if (small) head[off++] = raw.length;
  else {
    head.writeUInt16LE(raw.length - 256, off);
    off += 2;
  }
  const block = (raw.length << 3) | 1; // Block_Size, Block_Type 0 (raw), Last_Block
  head[off++] = block & 0xff;
  head[off++] = (block >>> 8) & 0xff;
  head[off++] = (block >>> 16) & 0xff;
  return Buffer.concat([head, raw]);
}

/** Level 1: map messages are small and latency matters more than the last few percent of size. */
export function encodeJsonFrame(json: string, compress: boolean): Buffer {
  if (last !== null && last.compress === compress && last.json === json) return last.frame;
  const frame = encodeJsonBytesFrame(Buffer.from(json), compress);
  last = json.length <= REUSE_MAX ? { json, compress, frame } : null;
  return frame;
}

/** A message whose JSON is already UTF-8 bytes (full maps, assembled from each peer's cached bytes). */
export function encodeJsonBytesFrame(raw: Buffer, compress: boolean): Buffer {
  const body = !compress
    ? raw
    : raw.length <= STORE_BELOW
      ? storedZstdFrame(raw)
      : zlib.zstdCompressSync(raw, { params: { [zlib.constants.ZSTD_c_compressionLevel]: 1 } });
  return frameBody(body);
}

export function frameBody(body: Buffer): Buffer {
  const head = Buffer.allocUnsafe(4);
  head.writeUInt32LE(body.length, 0);
  return Buffer.concat([head, body]);
}

/** Reads every complete frame from `buf` (tests and the load client); returns the messages and the unread rest. */
export function decodeMapFrames(buf: Buffer, compressed: boolean): { messages: MapResponse[]; rest: Buffer } {
  const messages: MapResponse[] = [];
  let off = 0;
  while (buf.length - off >= 4) {
    const len = buf.readUInt32LE(off);
    if (buf.length - off - 4 < len) break;
    const body = buf.subarray(off + 4, off + 4 + len);
    const json = compressed ? zlib.zstdDecompressSync(body) : body;
    messages.push(JSON.parse(json.toString('utf8')) as MapResponse);
    off += 4 + len;
  }
  return { messages, rest: buf.subarray(off) };
}
