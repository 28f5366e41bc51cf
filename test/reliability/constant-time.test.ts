// Secrets are compared in constant time. Each function that checks a secret is called with a right and a wrong value
// while crypto.timingSafeEqual is wrapped, and must have gone through it both times: CSRF tokens (console), passwords
// (argon2id tags), pre-auth keys (sha256 of the key, after a lookup by its public prefix), and the cookie signatures
// koa checks through keygrip. A source scan backs this up: no secret-named value is compared with === anywhere.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import test from 'ava';
import Keygrip from 'keygrip';
import { tokensMatch } from '../../services/console/src/security/csrf.ts';
import { hashPassword, verifyPassword } from '../../services/console/src/security/password-hash.ts';
import { Store } from '../../services/coordination/src/state/store.ts';
import { ROOT } from '../harness/process.ts';
import { startRedis } from '../harness/redis.ts';

type Tse = typeof crypto.timingSafeEqual;

/** Runs `f` with crypto.timingSafeEqual counted; returns its result and the number of calls. */
async function counted<T>(f: () => Promise<T> | T): Promise<{ value: T; calls: number }> {
  const real: Tse = crypto.timingSafeEqual;
  let calls = 0;
  (crypto as { timingSafeEqual: Tse }).timingSafeEqual = ((a: NodeJS.ArrayBufferView, b: NodeJS.ArrayBufferView) => {
    calls++;
    return real(a, b);
  }) as Tse;
  try {
    return { value: await f(), calls };
  } finally {
    (crypto as { timingSafeEqual: Tse }).timingSafeEqual = real;
  }
}

test.serial('CSRF tokens are compared with timingSafeEqual (of their hashes, so the length leaks nothing either)', async (t) => {
  const good = crypto.randomBytes(32).toString('base64url');
  const right = await counted(() => tokensMatch(good, good));
  const wrong = await counted(() => tokensMatch(`${good.slice(0, -1)}x`, good));
  const short = await counted(() => tokensMatch('x', good));
  t.deepEqual([right.value, wrong.value, short.value], [true, false, false]);
  t.deepEqual([right.calls, wrong.calls, short.calls], [1, 1, 1]);
});

test.serial('passwords: the argon2id tag is compared with timingSafeEqual', async (t) => {
  const stored = await hashPassword('a password of reasonable length');
  const right = await counted(() => verifyPassword('a password of reasonable length', stored));
  const wrong = await counted(() => verifyPassword('a password of reasonable lengtH', stored));
  t.deepEqual([right.value, wrong.value], [true, false]);
  t.deepEqual([right.calls, wrong.calls], [1, 1]);
});

test.serial('pre-auth keys: looked up by their public prefix, then the secret compared as a hash with timingSafeEqual', async (t) => {
  const redis = await startRedis();
  const client = redis.client();
  try {
    const store = new Store(client);
    const user = await store.createUser('ct');
    const { key } = await store.createPreAuthKey({
      userId: user.id,
      reusable: true,
      ephemeral: false,
      expiration: new Date(Date.now() + 60_000),
      createdBy: 'test',
    });
    const right = await counted(() => store.usePreAuthKey(key, 'mkey:'.padEnd(69, '0')));
    const forged = `${key.slice(0, 'hse-auth-'.length + 12)}-${'A'.repeat(32)}`;
    const wrong = await counted(() =>
      store.usePreAuthKey(forged, 'mkey:'.padEnd(69, '0')).then(
        () => 'accepted',
        (e: Error) => e.message,
      ),
    );
    t.is(right.value.id, 1);
    t.is(wrong.value, 'invalid pre-auth key');
    t.deepEqual([right.calls, wrong.calls], [1, 1]);
  } finally {
    await redis.stop();
  }
});

test.serial('cookie signatures (keygrip, used by koa for the session and sign-in cookies) go through timingSafeEqual', async (t) => {
  const grip = new Keygrip([crypto.randomBytes(32).toString('base64url')]);
  const sig = grip.sign('hse_session=abc');
  const right = await counted(() => grip.verify('hse_session=abc', sig));
  const wrong = await counted(() => grip.verify('hse_session=abd', sig));
  t.deepEqual([right.value, wrong.value], [true, false]);
  t.true(right.calls >= 1 && wrong.calls >= 1);
});

test('source scan: no secret-named value is compared with === or !== (or Buffer.equals) in the image code', (t) => {
  const files: string[] = [];
  const walk = (dir: string) => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (p.endsWith('.ts')) files.push(p);
    }
  };
  for (const d of ['shared', 'router/src', 'services', 'bin']) walk(path.join(ROOT, d));
  const secret = '[\\w.]*(?:password|passwd|token|csrf|secret|authkey|auth_key|hash|signature|sig|privatekey|meshkey)\\w*';
  const compare = new RegExp(`\\b${secret}\\s*[!=]==?(?!=)|[!=]==?\\s*${secret}\\b|${secret}\\.equals\\(`, 'i');
  // Reviewed matches that compare public values, with the reason.
  const reviewed: Record<string, string> = {
    "ctx.query.signed_out === '1'": 'a query flag, not a signature',
    'ctx.query.v === a.hash': "a static file's public content hash (cache busting)",
    'next !== UPGRADE_TOKEN': 'the public protocol name of the upgrade',
  };
  const hits: string[] = [];
  for (const f of files) {
    fs.readFileSync(f, 'utf8')
      .split('\n')
      .forEach((line, i) => {
        const code = line.replace(/\/\/.*$/, '');
        // Comparisons of types, lengths and emptiness reveal nothing about the secret's value.
        if (Object.keys(reviewed).some((r) => code.includes(r))) return;
        if (!compare.test(code) || /typeof|\.length|=== ''|!== ''|=== null|!== null|=== undefined|!== undefined/.test(code)) return;
        hits.push(`${path.relative(ROOT, f)}:${i + 1}: ${line.trim()}`);
      });
  }
  t.deepEqual(hits, []);
  t.true(files.length > 50, 'the scan saw the code');
});
