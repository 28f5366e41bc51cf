// Every process treats an operator-fixable problem at start the same way: one line naming the file or variable and
// the reason, exit status 2 (which pm2 does not restart, test/supervisor), never a restart loop on exit 1. Each case
// is a real start of the process's main.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import test from 'ava';
import { runProcess } from '../harness/process.ts';
import { startRedis, type TestRedis } from '../harness/redis.ts';

let redis: TestRedis;
test.before(async () => {
  redis = await startRedis();
});
test.after.always(async () => {
  await redis?.stop();
});

function tmpDir(): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'hse-start-'));
}

test('a damaged Noise key file stops the coordination service with one line naming the file, exit 2', async (t) => {
  const dataDir = tmpDir();
  t.teardown(() => fs.rmSync(dataDir, { recursive: true, force: true }));
  const file = path.join(dataDir, 'noise_private.key');
  fs.writeFileSync(file, 'not a key\n', { mode: 0o600 });
  const p = runProcess('services/coordination/src/main.ts', { HSE_DATA_DIR: dataDir, HSE_REDIS_URL: redis.url });
  t.is(await p.exited(), 2);
  const lines = p.output().trim().split('\n');
  t.is(lines.length, 1, p.output());
  t.regex(lines[0], new RegExp(`^hse coordination: cannot start: ${file.replace(/[.]/g, '\\.')}: is not a Noise key file .*backup.*delete it`));
});

test('an all-zero Noise key is refused the same way', async (t) => {
  const dataDir = tmpDir();
  t.teardown(() => fs.rmSync(dataDir, { recursive: true, force: true }));
  fs.writeFileSync(path.join(dataDir, 'noise_private.key'), `privkey:${'00'.repeat(32)}\n`, { mode: 0o600 });
  const p = runProcess('services/coordination/src/main.ts', { HSE_DATA_DIR: dataDir, HSE_REDIS_URL: redis.url });
  t.is(await p.exited(), 2);
  t.regex(p.output(), /cannot start: .*noise_private\.key: holds an all-zero Noise key/);
});

test('a data directory that cannot be created stops every service with exit 2, naming HSE_DATA_DIR', async (t) => {
  // A regular file where the data directory should be: mkdir fails with ENOTDIR/EEXIST whoever runs the test (root
  // ignores permission bits, so a mode-000 directory would not show it).
  const parent = tmpDir();
  t.teardown(() => fs.rmSync(parent, { recursive: true, force: true }));
  const blocker = path.join(parent, 'file');
  fs.writeFileSync(blocker, '');
  for (const main of ['services/coordination/src/main.ts', 'services/relay/src/main.ts']) {
    const p = runProcess(main, { HSE_DATA_DIR: path.join(blocker, 'data'), HSE_REDIS_URL: redis.url, HSE_DERP_VERIFY_CLIENTS: 'off' });
    t.is(await p.exited(), 2, main);
    t.regex(p.output(), /cannot start: HSE_DATA_DIR: cannot create or use .*file\/data/, main);
  }
});
