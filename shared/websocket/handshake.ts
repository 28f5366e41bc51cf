// The server side of the RFC 6455 opening handshake that both websocket endpoints share (/ts2021 and /derp).
import crypto from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';

const ACCEPT_GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11';

/** Sec-WebSocket-Accept for a Sec-WebSocket-Key: base64(sha1(key + GUID)). */
export function acceptValue(key: string): string {
  return crypto
    .createHash('sha1')
    .update(key + ACCEPT_GUID)
    .digest('base64');
}

/** The protocols listed in Sec-WebSocket-Protocol (all header lines, comma-separated), lowercased. */
export function offeredSubprotocols(headers: IncomingHttpHeaders): string[] {
  const v = headers['sec-websocket-protocol'];
  const lines = Array.isArray(v) ? v : v === undefined ? [] : [v];
  return lines
    .flatMap((l) => l.split(','))
    .map((s) => s.trim().toLowerCase())
    .filter((s) => s !== '');
}
