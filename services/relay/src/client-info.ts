// The login exchange after the server's greeting: the client proves it holds the private half of the key it names
// by sealing ClientInfo to the server key; the server answers with ServerInfo sealed back to that key.
// Reference: derp/derp_client.go (ClientInfo, sendClientKey), derp/derpserver/derpserver.go (recvClientKey,
// sendServerInfo).
//
// ClientInfo frame body: client public key[32] | nonce[24] | box(JSON)
//   JSON: {"version":2, "meshKey":"<hex>"?, "CanAckPings":bool, "IsProber":bool?, "AppName":"..."?}
// ServerInfo frame body: nonce[24] | box(JSON)
//   JSON: {"version":2} (+ optional "TokenBucketBytesPerSecond", "TokenBucketBytesBurst" rate hints, unused here)
import { decodeClientInfo, encodeClientInfo, encodeServerInfo, FrameError, PROTOCOL_VERSION } from './frames.ts';
import { isWeakPeerKey, openFrom, sealTo } from './nacl-box.ts';

/** ClientInfo is a few dozen bytes of JSON; the limit only stops an unauthenticated peer from making us buffer much. */
export const MAX_CLIENT_INFO_LEN = 64 << 10;

export interface ClientInfo {
  version: number;
  /** Non-empty only for relays of the region meshing with us: 64 hex digits (derp-server.ts checks it). */
  meshKey: string;
  canAckPings: boolean;
  isProber: boolean;
  appName: string;
}

export interface ServerInfo {
  version: number;
}

/** Opens and checks a ClientInfo frame body. Throws FrameError with the reason when it does not hold up. */
export function openClientInfo(serverPrivate: Uint8Array, body: Buffer): { clientKey: Buffer; info: ClientInfo } {
  const { clientKey, sealed } = decodeClientInfo(body);
  if (isWeakPeerKey(serverPrivate, clientKey)) throw new FrameError('client key is zero or a low-order point, which proves nothing');
  const clear = openFrom(serverPrivate, clientKey, sealed);
  if (!clear) throw new FrameError('ClientInfo box does not open with the key it names (client holds another key, or talks to another server key)');
  let json: unknown;
  try {
    json = JSON.parse(clear.toString('utf8'));
  } catch {
    throw new FrameError('ClientInfo is not JSON');
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json)) throw new FrameError('ClientInfo is not a JSON object');
  const o = json as Record<string, unknown>;
  return {
    clientKey: Buffer.from(clientKey),
    info: {
      version: typeof o.version === 'number' ? o.version : 0,
      meshKey: typeof o.meshKey === 'string' ? o.meshKey : '',
      canAckPings: o.CanAckPings === true,
      isProber: o.IsProber === true,
      appName: typeof o.AppName === 'string' ? o.AppName.slice(0, 64) : '',
    },
  };
}

export function sealServerInfo(serverPrivate: Uint8Array, clientKey: Uint8Array): Buffer {
  const info: ServerInfo = { version: PROTOCOL_VERSION };
  return encodeServerInfo(sealTo(serverPrivate, clientKey, Buffer.from(JSON.stringify(info))));
}

// Client side, for our test and benchmark client.

export function sealClientInfo(clientPrivate: Uint8Array, clientPublic: Uint8Array, serverPublic: Uint8Array, info: Partial<ClientInfo> = {}): Buffer {
  const json: Record<string, unknown> = { version: info.version ?? PROTOCOL_VERSION, CanAckPings: info.canAckPings ?? true };
  if (info.meshKey) json.meshKey = info.meshKey;
  if (info.isProber) json.IsProber = true;
  if (info.appName) json.AppName = info.appName;
  return encodeClientInfo(clientPublic, sealTo(clientPrivate, serverPublic, Buffer.from(JSON.stringify(json))));
}

export function openServerInfo(clientPrivate: Uint8Array, serverPublic: Uint8Array, body: Buffer): ServerInfo {
  const clear = openFrom(clientPrivate, serverPublic, body);
  if (!clear) throw new FrameError('ServerInfo box does not open with the server key from the greeting');
  let o: unknown;
  try {
    o = JSON.parse(clear.toString('utf8'));
  } catch {
    throw new FrameError('ServerInfo is not JSON');
  }
  const version = typeof o === 'object' && o !== null ? (o as Record<string, unknown>).version : undefined;
  return { version: typeof version === 'number' ? version : 0 };
}
