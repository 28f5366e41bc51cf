// The relay's own Curve25519 key: clients learn it from the greeting and seal ClientInfo to it. It lives in
// HSE_DATA_DIR so it survives restarts (clients do not pin it, but a stable key keeps logs comparable), is created
// once, and is readable by its owner only.
//
// File <dataDir>/derp.key, the same JSON as Tailscale's derper writes, so a key can move between the two:
//   {"PrivateKey":"privkey:<64 lowercase hex>"}
import fs from 'node:fs';
import path from 'node:path';
import { newPrivateKey, publicKeyOf } from './nacl-box.ts';

export const SERVER_KEY_FILE = 'derp.key';

export interface ServerKey {
  privateKey: Buffer;
  publicKey: Buffer;
  file: string;
  /** True when this call generated the key. */
  created: boolean;
  /** Set when the file's permissions were wider than 600 and were narrowed. */
  repairedMode: boolean;
}

function parse(file: string, text: string): Buffer {
  let hex: unknown;
  try {
    hex = (JSON.parse(text) as { PrivateKey?: unknown }).PrivateKey;
  } catch {
    hex = undefined;
  }
  const m = typeof hex === 'string' ? /^privkey:([0-9a-f]{64})$/i.exec(hex) : null;
  if (!m) {
    throw new Error(`relay key file ${file} is not {"PrivateKey":"privkey:<64 hex>"}; restore it from a backup, or delete it to have a new key generated`);
  }
  return Buffer.from(m[1], 'hex');
}

function load(file: string, created: boolean): ServerKey {
  const st = fs.statSync(file);
  let repairedMode = false;
  if ((st.mode & 0o077) !== 0) {
    fs.chmodSync(file, 0o600);
    repairedMode = true;
  }
  const privateKey = parse(file, fs.readFileSync(file, 'utf8'));
  return { privateKey, publicKey: publicKeyOf(privateKey), file, created, repairedMode };
}

export function loadOrCreateServerKey(dataDir: string): ServerKey {
  const file = path.join(dataDir, SERVER_KEY_FILE);
  if (fs.existsSync(file)) return load(file, false);
  fs.mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  // Written to a private temp file and linked into place: a reader never sees half a key, and if another instance
  // won the race its key stands and we use it.
  const tmp = `${file}.${process.pid}.tmp`;
  const body = `${JSON.stringify({ PrivateKey: `privkey:${newPrivateKey().toString('hex')}` }, null, '\t')}\n`;
  const fd = fs.openSync(tmp, 'wx', 0o600);
  try {
    fs.writeSync(fd, body);
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
  let created = true;
  try {
    fs.linkSync(tmp, file);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    created = false;
  } finally {
    fs.rmSync(tmp, { force: true });
  }
  return load(file, created);
}
