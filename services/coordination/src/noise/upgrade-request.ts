// Reads what a /ts2021 upgrade request asks for, without touching the socket: which transport (the plain
// `tailscale-control-protocol` upgrade the native clients use, or a websocket for clients that can only do that),
// and the client's Noise initiation, which rides in the request so the handshake costs no extra round trip.
//   native:    POST (or GET) /ts2021, Upgrade: tailscale-control-protocol, X-Tailscale-Handshake: <base64 std>
//   websocket: GET /ts2021?X-Tailscale-Handshake=<base64 std, URL-encoded>, Upgrade: websocket,
//              Sec-WebSocket-Protocol: tailscale-control-protocol, Sec-WebSocket-Version: 13, Sec-WebSocket-Key
import { acceptValue as websocketAccept } from '../../../../shared/websocket/handshake.ts';
import type { IncomingMessage } from 'node:http';

export const UPGRADE_TOKEN = 'tailscale-control-protocol';
export const HANDSHAKE_HEADER = 'x-tailscale-handshake';
/** Query parameter name of the websocket variant; Go form keys are case-sensitive, so exactly this. */
export const HANDSHAKE_PARAM = 'X-Tailscale-Handshake';

export type UpgradeRequest = { kind: 'native'; initiation: Buffer; upgrade: string } | { kind: 'websocket'; initiation: Buffer; accept: string };

export class UpgradeRefused extends Error {
  readonly status: number;
  constructor(status: number, message: string) {
    super(message);
    this.status = status;
  }
}

function header(req: IncomingMessage, name: string): string {
  const v = req.headers[name];
  return (Array.isArray(v) ? v[0] : (v ?? '')).trim();
}

/** Standard base64 with padding, strictly: Buffer.from(..., 'base64') alone would accept junk. */
export function decodeStdBase64(text: string): Buffer | null {
  if (text.length === 0 || text.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(text)) return null;
  const b = Buffer.from(text, 'base64');
  return b.toString('base64') === text ? b : null;
}

export { websocketAccept };

/** Throws UpgradeRefused with the status and a short text the client (or the operator reading curl output) sees. */
export function readUpgradeRequest(req: IncomingMessage): UpgradeRequest {
  const upgrade = header(req, 'upgrade');
  const next = upgrade.toLowerCase();
  if (next === '')
    throw new UpgradeRefused(400, 'missing Upgrade header: /ts2021 must be an HTTP upgrade; check that your proxy passes Upgrade and Connection');
  if (next === 'websocket') return readWebsocket(req);
  if (next !== UPGRADE_TOKEN) throw new UpgradeRefused(400, `unknown next protocol; want Upgrade: ${UPGRADE_TOKEN}`);
  if (req.method !== 'POST' && req.method !== 'GET') throw new UpgradeRefused(405, 'use POST');
  const b64 = header(req, HANDSHAKE_HEADER);
  if (b64 === '') throw new UpgradeRefused(400, 'missing X-Tailscale-Handshake header');
  const initiation = decodeStdBase64(b64);
  if (!initiation) throw new UpgradeRefused(400, 'invalid X-Tailscale-Handshake header (want standard base64)');
  return { kind: 'native', initiation, upgrade };
}

function readWebsocket(req: IncomingMessage): UpgradeRequest {
  if (req.method !== 'GET') throw new UpgradeRefused(405, 'websocket upgrades use GET');
  if (header(req, 'sec-websocket-version') !== '13') throw new UpgradeRefused(400, 'unsupported websocket version; want Sec-WebSocket-Version: 13');
  const key = header(req, 'sec-websocket-key');
  const keyBytes = decodeStdBase64(key);
  if (keyBytes?.length !== 16) throw new UpgradeRefused(400, 'invalid Sec-WebSocket-Key');
  const protocols = header(req, 'sec-websocket-protocol')
    .split(',')
    .map((p) => p.trim());
  if (!protocols.includes(UPGRADE_TOKEN)) throw new UpgradeRefused(400, `websocket must offer subprotocol ${UPGRADE_TOKEN}`);
  const query = new URL(req.url ?? '/', 'http://x').searchParams;
  const b64 = query.get(HANDSHAKE_PARAM) ?? '';
  if (b64 === '') throw new UpgradeRefused(400, 'missing X-Tailscale-Handshake query parameter');
  const initiation = decodeStdBase64(b64);
  if (!initiation) throw new UpgradeRefused(400, 'invalid X-Tailscale-Handshake query parameter (want standard base64)');
  return { kind: 'websocket', initiation, accept: websocketAccept(key) };
}
