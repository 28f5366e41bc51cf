// deploy/warm-compile-cache.cjs: after it ran, every process the supervisor starts finds each of its .ts files already
// type-stripped in Node's compile cache, so none of them loads the TypeScript stripper (~14 MiB resident each).
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import test from 'ava';
import { NODE, ROOT } from '../harness/process.ts';

const run = promisify(execFile);

interface App {
  name: string;
  script: string;
  interpreter: string;
  env: Record<string, string>;
}

test('after the warm-up, every app main starts with all its TypeScript from the compile cache', async (t) => {
  const cache = fs.mkdtempSync(path.join(os.tmpdir(), 'hse-cc-'));
  try {
    const env = { PATH: process.env.PATH, HOME: process.env.HOME, NODE_COMPILE_CACHE: cache };
    const warm = await run(NODE, ['deploy/warm-compile-cache.cjs'], { cwd: ROOT, env });
    t.regex(warm.stdout, /5 of 5 processes cached/);

    const { stdout } = await run(NODE, ['-e', "console.log(JSON.stringify(require('./ecosystem.config.js').apps))"], { cwd: ROOT, env });
    const apps = JSON.parse(stdout) as App[];
    for (const a of apps) t.is(a.env.NODE_COMPILE_CACHE, cache, `${a.name} gets the cache directory`);

    for (const a of apps) {
      // A refused setting: the whole static import graph is loaded, then the main exits 2 before serving.
      const r = await run(a.interpreter, [a.script], {
        cwd: ROOT,
        env: { ...env, ...a.env, NODE_DEBUG_NATIVE: 'COMPILE_CACHE', HSE_HTTP_PORT: 'x' },
      }).catch((e: { code: number; stdout: string; stderr: string }) => e);
      const out = `${r.stdout}${r.stderr}`;
      t.is((r as { code?: number }).code, 2, `${a.name} refused the setting`);
      const hits = out.match(/retrieving transpile cache for StrippedTypeScript \S+\.\.\.success/g) ?? [];
      t.true(hits.length >= 5, `${a.name}: ${hits.length} .ts files from the cache`);
      t.notRegex(out, /no transpile cache for StrippedTypeScript/, `${a.name} stripped nothing itself`);
    }
  } finally {
    fs.rmSync(cache, { recursive: true, force: true });
  }
});
