// DERP over WebSocket (what browser clients use; Tailscale's derpserver/websocket.go): the client asks for
// subprotocol "derp", and the DERP byte stream then travels in binary messages, message boundaries meaning nothing.
// This file checks the opening handshake (RFC 6455 section 4.2); the framing and the byte stream on top of it are the
// shared ones (shared/websocket/), so the DERP connection code runs unchanged over either transport.
import type { IncomingHttpHeaders } from 'node:http';
import { acceptValue, offeredSubprotocols } from '../../../shared/websocket/handshake.ts';

export { acceptValue, offeredSubprotocols };
export { WebSocketStream } from '../../../shared/websocket/stream.ts';
export const DERP_SUBPROTOCOL = 'derp';

export type HandshakeCheck = { ok: true; accept: string } | { ok: false; status: number; message: string };

/** Checks a WebSocket upgrade request for DERP; on success gives the Sec-WebSocket-Accept value. */
export function checkHandshake(method: string | undefined, headers: IncomingHttpHeaders): HandshakeCheck {
  if (method !== 'GET') return { ok: false, status: 405, message: 'a WebSocket upgrade must be a GET' };
  if (headers['sec-websocket-version'] !== '13') return { ok: false, status: 426, message: 'only WebSocket version 13 is supported' };
  const key = headers['sec-websocket-key'];
  if (typeof key !== 'string' || !/^[A-Za-z0-9+/]{22}==$/.test(key.trim())) {
    return { ok: false, status: 400, message: 'Sec-WebSocket-Key must be 16 random bytes in base64' };
  }
  if (!offeredSubprotocols(headers).includes(DERP_SUBPROTOCOL)) {
    return { ok: false, status: 400, message: 'the client must offer the "derp" subprotocol' };
  }
  return { ok: true, accept: acceptValue(key.trim()) };
}
