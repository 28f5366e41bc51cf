// The relay's own Curve25519 key: clients learn it from the greeting and seal ClientInfo to it. It lives in
// HSE_DATA_DIR so it survives restarts (clients do not pin it, but a stable key keeps logs comparable), is created
// once, and is readable by its owner only; read and created by the shared key-file loader (shared/key-file.ts).
//
// File <dataDir>/derp.key, the same JSON as Tailscale's derper writes, so a key can move between the two:
//   {"PrivateKey":"privkey:<64 lowercase hex>"}
import path from 'node:path';
import { type KeyFileFormat, loadOrCreateKeyFile, type LoadedKey } from '../../../shared/key-file.ts';
import { newPrivateKey, publicKeyOf } from './nacl-box.ts';

export const SERVER_KEY_FILE = 'derp.key';

export interface ServerKey extends LoadedKey {
  publicKey: Buffer;
}

const FORMAT: KeyFileFormat = {
  what: 'relay key',
  describe: '{"PrivateKey":"privkey:<64 hex>"}',
  consequenceOfNewKey: 'clients pick the new one up from the greeting',
  encode: (raw) => `${JSON.stringify({ PrivateKey: `privkey:${raw.toString('hex')}` }, null, '\t')}\n`,
  decode: (text) => {
    let hex: unknown;
    try {
      hex = (JSON.parse(text) as { PrivateKey?: unknown }).PrivateKey;
    } catch {
      return null;
    }
    const m = typeof hex === 'string' ? /^privkey:([0-9a-f]{64})$/i.exec(hex) : null;
    return m ? Buffer.from(m[1], 'hex') : null;
  },
};

/** Reads the key, or creates it once; throws a StartupError naming the file when it is damaged or unreadable. */
export function loadOrCreateServerKey(dataDir: string): ServerKey {
  const key = loadOrCreateKeyFile(path.join(dataDir, SERVER_KEY_FILE), FORMAT, newPrivateKey);
  return { ...key, publicKey: publicKeyOf(key.privateKey) };
}
