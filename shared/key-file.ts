// One loader for the private keys the image keeps on disk (the coordination server's Noise key, the relay's DERP key).
// A key must survive restarts and never be half-written or readable by others:
//   - created once: written to a private temporary file (mode 600), fsynced, then hard-linked into place, which fails
//     if another process got there first — then that process's key stands and is read back;
//   - read: a file readable by group or others is narrowed to 600 (and the caller told, to log it);
//   - refused with a StartupError naming the file when it cannot be read, is not in the expected format, or holds an
//     all-zero key; the process then exits 2 with that one line instead of restarting into the same error.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { StartupError } from './errors.ts';

export interface KeyFileFormat {
  /** What the key is, for messages: "Noise key", "relay key". */
  what: string;
  /** The file's text for a raw 32-byte private key. */
  encode(raw: Buffer): string;
  /** The raw key in `text`, or null when the text is not in this format. */
  decode(text: string): Buffer | null;
  /** The expected format, for the refusal message, e.g. `one line "privkey:<64 hex>"`. */
  describe: string;
  /** What a new key means for clients, for the refusal message (deleting the file makes a new key). */
  consequenceOfNewKey: string;
}

export interface LoadedKey {
  /** Raw 32-byte private key. */
  privateKey: Buffer;
  file: string;
  /** True when this call generated the key. */
  created: boolean;
  /** True when the file was readable by others and was narrowed to 600. */
  repairedMode: boolean;
}

export function loadOrCreateKeyFile(file: string, format: KeyFileFormat, generate: () => Buffer): LoadedKey {
  try {
    return readKeyFile(file, format, false);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw asStartupError(file, format, e);
  }
  try {
    fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
    const tmp = `${file}.${process.pid}.${crypto.randomBytes(4).toString('hex')}.tmp`;
    const fd = fs.openSync(tmp, 'wx', 0o600);
    try {
      fs.writeSync(fd, format.encode(generate()));
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
    return readKeyFile(file, format, created);
  } catch (e) {
    throw asStartupError(file, format, e);
  }
}

function readKeyFile(file: string, format: KeyFileFormat, created: boolean): LoadedKey {
  const text = fs.readFileSync(file, 'utf8');
  let repairedMode = false;
  if ((fs.statSync(file).mode & 0o077) !== 0) {
    fs.chmodSync(file, 0o600);
    repairedMode = true;
  }
  const privateKey = format.decode(text);
  if (!privateKey) {
    throw new StartupError(
      file,
      `is not a ${format.what} file (want ${format.describe}); restore it from a backup, or delete it to have a new key generated (${format.consequenceOfNewKey})`,
    );
  }
  if (privateKey.every((b) => b === 0)) {
    throw new StartupError(file, `holds an all-zero ${format.what}; restore it from a backup, or delete it to have a new key generated`);
  }
  return { privateKey, file, created, repairedMode };
}

function asStartupError(file: string, format: KeyFileFormat, e: unknown): StartupError {
  if (e instanceof StartupError) return e;
  const err = e as NodeJS.ErrnoException;
  const why = err.code === 'EACCES' || err.code === 'EPERM' ? 'permission denied (check the owner of the data directory)' : (err.code ?? err.message);
  return new StartupError(file, `cannot read or create the ${format.what}: ${why}`);
}
