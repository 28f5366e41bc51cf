// The "early payload": the first plaintext the server sends inside Noise, before HTTP/2 starts. Clients since
// capability version 49 look at the first 9 bytes: an HTTP/2 frame header means there is none; this magic means
// there is. Tailscale's own server and headscale both send one carrying a per-connection node-key challenge, so we
// do too — the client then reads the same bytes from us as from them. Nothing in the client requires it today.
import { formatChallenge } from './challenge.ts';
import { generatePair } from './x25519.ts';

/** 5 bytes no HTTP/2 frame header can start with (frame type 'T' does not exist). */
export const EARLY_PAYLOAD_MAGIC = Buffer.from('ffffff5453', 'hex');

// Layout: ff ff ff 54 53 | JSON length u32 BE | JSON (tailcfg.EarlyNoise: {"nodeKeyChallenge":"chalpub:<64 hex>"})
export function earlyPayload(): Buffer {
  const json = Buffer.from(JSON.stringify({ nodeKeyChallenge: formatChallenge(generatePair().publicKey) }), 'utf8');
  const len = Buffer.alloc(4);
  len.writeUInt32BE(json.length, 0);
  return Buffer.concat([EARLY_PAYLOAD_MAGIC, len, json]);
}

/** Reader for tests and tools: returns the JSON and the bytes after it, or null when `buf` does not start with one. */
export function parseEarlyPayload(buf: Buffer): { json: unknown; rest: Buffer } | null {
  if (buf.length < 9 || !buf.subarray(0, 5).equals(EARLY_PAYLOAD_MAGIC)) return null;
  const len = buf.readUInt32BE(5);
  if (buf.length < 9 + len) return null;
  return { json: JSON.parse(buf.subarray(9, 9 + len).toString('utf8')), rest: buf.subarray(9 + len) };
}
