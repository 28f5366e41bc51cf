// The server's Noise key: generated once, kept with owner-only permissions, the same across restarts (clients pin
// it), and a damaged file is an error that says what to do rather than a silent new key.
import test from 'ava';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadOrCreateServerKey, serverKeyPath } from '../../services/coordination/src/noise/server-key.ts';
import { pairFromPrivate, privateKeyFromRaw } from '../../services/coordination/src/noise/x25519.ts';

function tmpDir(t: { teardown(fn: () => void): void }): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hse-noise-key-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

test('creates the key once, mode 600, and returns the same key afterwards', (t) => {
  const dir = path.join(tmpDir(t), 'data');
  const a = loadOrCreateServerKey(dir);
  const file = serverKeyPath(dir);
  t.is(fs.statSync(file).mode & 0o777, 0o600);
  t.regex(fs.readFileSync(file, 'utf8'), /^privkey:[0-9a-f]{64}\n$/);
  const b = loadOrCreateServerKey(dir);
  t.deepEqual(b.privateKey, a.privateKey);
  t.deepEqual(b.publicKey, a.publicKey);
  t.deepEqual(pairFromPrivate(privateKeyFromRaw(a.privateKey)).publicKey, a.publicKey);
  t.deepEqual(fs.readdirSync(dir), ['noise_private.key']); // no temporary files left behind
});

test('an existing key file is used as is; loose permissions are tightened', (t) => {
  const dir = tmpDir(t);
  const file = serverKeyPath(dir);
  fs.writeFileSync(file, `privkey:${'11'.repeat(32)}\n`, { mode: 0o644 });
  fs.chmodSync(file, 0o644);
  const k = loadOrCreateServerKey(dir);
  t.is(k.privateKey.toString('hex'), '11'.repeat(32));
  t.is(fs.statSync(file).mode & 0o777, 0o600);
});

test('a damaged key file is an error that tells the operator what to do', (t) => {
  const dir = tmpDir(t);
  fs.writeFileSync(serverKeyPath(dir), 'garbage\n', { mode: 0o600 });
  const e = t.throws(() => loadOrCreateServerKey(dir));
  t.regex(e?.message ?? '', /not a Noise key file.*backup/);
  fs.writeFileSync(serverKeyPath(dir), `privkey:${'00'.repeat(32)}\n`);
  t.throws(() => loadOrCreateServerKey(dir), { message: /all-zero/ });
});
