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

/** Level 1: map messages are small and latency matters more than the last few percent of size. */
export function encodeJsonFrame(json: string, compress: boolean): Buffer {
  if (last !== null && last.compress === compress && last.json === json) return last.frame;
  const raw = Buffer.from(json);
  const frame = frameBody(compress ? zlib.zstdCompressSync(raw, { params: { [zlib.constants.ZSTD_c_compressionLevel]: 1 } }) : raw);
  last = json.length <= REUSE_MAX ? { json, compress, frame } : null;
  return frame;
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
