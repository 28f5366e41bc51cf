// deploy/warm-compile-cache.cjs: after it ran, every process the supervisor starts finds each of its .ts files already
// type-stripped in Node's compile cache, so none of them loads the TypeScript stripper (~14 MiB resident each). That
// holds for each app's own V8 flags (Node keeps one cache per set of flags) and for the modules an app loads later
// with import(), in some modes only (TLS, a console with a sign-in provider, a meshed relay).
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
  node_args?: string[];
  env: Record<string, string>;
}

type Result = { code?: number; stdout: string; stderr: string };

/** What the compile cache's debug output says about .ts files: how many came from the cache, and any it stripped. */
function cacheUse(out: string): { hits: number; stripped: string[] } {
  const hits = out.match(/retrieving transpile cache for StrippedTypeScript \S+\.\.\.success/g) ?? [];
  const stripped = [...out.matchAll(/no transpile cache for StrippedTypeScript (\S+)/g)].map((m) => m[1]);
  return { hits: hits.length, stripped };
}

/** Every `import('./….ts')` in the processes' own code: modules loaded after start, which no refused start reaches. */
function laterImports(): string[] {
  const found: string[] = [];
  const walk = (dir: string) => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) {
        if (e.name !== 'test' && e.name !== 'public' && e.name !== 'node_modules') walk(p);
      } else if (e.name.endsWith('.ts')) {
        for (const m of fs.readFileSync(p, 'utf8').matchAll(/import\('(\.{1,2}\/[^']+\.ts)'\)/g)) found.push(path.resolve(path.dirname(p), m[1]));
      }
    }
  };
  for (const d of ['router/src', 'services', 'shared']) walk(path.join(ROOT, d));
  return found;
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
      // Exactly as pm2 starts it, with a refused setting: the whole static import graph is loaded, then the main
      // exits 2 before serving.
      const r: Result = await run(a.interpreter, [...(a.node_args ?? []), a.script], {
        cwd: ROOT,
        env: { ...env, ...a.env, NODE_DEBUG_NATIVE: 'COMPILE_CACHE', HSE_HTTP_PORT: 'x' },
      }).catch((e: Result) => e);
      const use = cacheUse(`${r.stdout}${r.stderr}`);
      t.is(r.code, 2, `${a.name} refused the setting`);
      t.true(use.hits >= 5, `${a.name}: ${use.hits} .ts files from the cache`);
      t.deepEqual(use.stripped, [], `${a.name} stripped nothing itself`);
    }

    // Modules loaded with import() after start, with the flags of the app that loads them.
    const later = laterImports();
    t.true(later.length >= 3, `found ${later.length} import() calls of project modules`);
    for (const file of later) {
      const owner = apps.find((a) => a.name !== 'redis' && file.startsWith(path.dirname(path.dirname(a.script))));
      if (!owner) {
        t.fail(`${path.relative(ROOT, file)} is loaded later, but by no app this test knows`);
        continue;
      }
      const r: Result = await run(owner.interpreter, [...(owner.node_args ?? []), '--input-type=module', '-e', `await import(${JSON.stringify(file)})`], {
        cwd: ROOT,
        env: { ...env, ...owner.env, NODE_DEBUG_NATIVE: 'COMPILE_CACHE' },
      }).catch((e: Result) => e);
      const use = cacheUse(`${r.stdout}${r.stderr}`);
      t.deepEqual(use.stripped, [], `${path.relative(ROOT, file)} (${owner.name}) is in the cache: listed in warm-compile-cache.cjs LATER`);
    }
  } finally {
    fs.rmSync(cache, { recursive: true, force: true });
  }
});
