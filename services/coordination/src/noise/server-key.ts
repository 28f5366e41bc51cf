// The server's Noise static key (Tailscale calls it the control "machine key"). Clients pin its public half from
// GET /key and every handshake proves we hold the private half, so it must survive restarts: a new key makes every
// client's next handshake fail until it fetches /key again. Kept at <dataDir>/noise_private.key, mode 600, as one
// line "privkey:<64 hex>".
import fs from 'node:fs';
import path from 'node:path';
import crypto from 'node:crypto';
import { generatePair, privateKeyFromRaw, rawPrivateKey, rawPublicKey } from './x25519.ts';

export const SERVER_KEY_FILE = 'noise_private.key';
const FORMAT = /^privkey:([0-9a-f]{64})\s*$/;

export interface ServerKey {
  /** Raw 32-byte X25519 private key. */
  privateKey: Buffer;
  /** Raw 32-byte public key, served by GET /key as "mkey:<hex>". */
  publicKey: Buffer;
}

export function serverKeyPath(dataDir: string): string {
  return path.join(dataDir, SERVER_KEY_FILE);
}

function parse(file: string, text: string): ServerKey {
  const m = FORMAT.exec(text);
  if (!m) {
    throw new Error(
      `${file} is not a Noise key file (want one line "privkey:<64 hex>"). Restore it from a backup; deleting it makes ` +
        'the server generate a new key, and every client must then reconnect to pick it up',
    );
  }
  const privateKey = Buffer.from(m[1], 'hex');
  if (privateKey.every((b) => b === 0)) throw new Error(`${file} holds an all-zero key; restore it from a backup or delete it to generate a new one`);
  return { privateKey, publicKey: rawPublicKey(privateKeyFromRaw(privateKey)) };
}

/**
 * Reads the key, or creates it once. Safe against two processes starting together: the new key is written to a
 * private temporary file and hard-linked into place, which fails if another process got there first — then we read
 * theirs. A key file readable by others is tightened back to 600.
 */
export function loadOrCreateServerKey(dataDir: string): ServerKey {
  const file = serverKeyPath(dataDir);
  fs.mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  try {
    return readKey(file);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
  }
  const raw = rawPrivateKey(generatePair().privateKey);
  const tmp = `${file}.${process.pid}.${crypto.randomBytes(4).toString('hex')}.tmp`;
  fs.writeFileSync(tmp, `privkey:${raw.toString('hex')}\n`, { mode: 0o600, flag: 'wx' });
  try {
    fs.linkSync(tmp, file);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
  } finally {
    fs.unlinkSync(tmp);
  }
  return readKey(file);
}

function readKey(file: string): ServerKey {
  const text = fs.readFileSync(file, 'utf8');
  const st = fs.statSync(file);
  if ((st.mode & 0o077) !== 0) fs.chmodSync(file, 0o600);
  return parse(file, text);
}
