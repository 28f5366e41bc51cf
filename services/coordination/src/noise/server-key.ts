// The server's Noise static key (Tailscale calls it the control "machine key"). Clients pin its public half from
// GET /key and every handshake proves we hold the private half, so it must survive restarts: a new key makes every
// client's next handshake fail until it fetches /key again. Kept at <dataDir>/noise_private.key, mode 600, as one
// line "privkey:<64 hex>"; read and created by the shared key-file loader (shared/key-file.ts).
import path from 'node:path';
import { type KeyFileFormat, loadOrCreateKeyFile, type LoadedKey } from '../../../../shared/key-file.ts';
import { generatePair, privateKeyFromRaw, rawPrivateKey, rawPublicKey } from './x25519.ts';

export const SERVER_KEY_FILE = 'noise_private.key';

export interface ServerKey extends LoadedKey {
  /** Raw 32-byte public key, served by GET /key as "mkey:<hex>". */
  publicKey: Buffer;
}

const FORMAT: KeyFileFormat = {
  what: 'Noise key',
  describe: 'one line "privkey:<64 hex>"',
  consequenceOfNewKey: 'every client must then reconnect to pick it up',
  encode: (raw) => `privkey:${raw.toString('hex')}\n`,
  decode: (text) => {
    const m = /^privkey:([0-9a-f]{64})\s*$/.exec(text);
    return m ? Buffer.from(m[1], 'hex') : null;
  },
};

export function serverKeyPath(dataDir: string): string {
  return path.join(dataDir, SERVER_KEY_FILE);
}

/** Reads the key, or creates it once; throws a StartupError naming the file when it is damaged or unreadable. */
export function loadOrCreateServerKey(dataDir: string): ServerKey {
  const key = loadOrCreateKeyFile(serverKeyPath(dataDir), FORMAT, () => rawPrivateKey(generatePair().privateKey));
  return { ...key, publicKey: rawPublicKey(privateKeyFromRaw(key.privateKey)) };
}
