// Fills Node's compile cache (NODE_COMPILE_CACHE, chosen in ecosystem.config.js) for every process the supervisor
// runs, so that they start without loading the TypeScript stripper (see the note there). Run at image build time
// (image-setup.sh cache), after the sources are in place and at the path they will run from: the cache is keyed by
// file path and content.
//
// How: each app's main is started once with a refused setting. ESM loads and links a module's whole static import
// graph before any of it runs, so every .ts file is stripped and cached; then the main refuses the setting and exits
// 2 without opening a socket or touching data. Each runs with a clean environment (only PATH, HOME and the cache
// directory), so the operator's own settings can neither be refused here nor change what is loaded. Each runs with the
// app's own V8 flags (ecosystem.config.js): Node keeps one cache per set of flags, and a process would find nothing in
// another's. Modules an app loads only in some modes, with import() (LATER below), are then imported once the same
// way: their top level only imports and defines.
//
//   node deploy/warm-compile-cache.cjs            (npm start / npm run up) a failure is a warning: start anyway
//   node deploy/warm-compile-cache.cjs --strict   (image build) a failure fails the build
'use strict';
const { spawnSync } = require('node:child_process');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
const { apps } = require(path.join(root, 'ecosystem.config.js'));
const strict = process.argv.includes('--strict');
/** What each app loads with import() after start, in some modes only; the static graph above does not reach these. */
const LATER = {
  router: ['router/src/tls/tls-mode.ts'],
  console: ['services/console/src/oidc/provider.ts'],
  relay: ['services/relay/src/mesh-link.ts'],
};
let failed = 0;
for (const app of apps) {
  const env = { PATH: process.env.PATH, HOME: process.env.HOME, NODE_COMPILE_CACHE: app.env.NODE_COMPILE_CACHE, HSE_HTTP_PORT: 'warming-the-compile-cache' };
  const r = spawnSync(app.interpreter, [...(app.node_args ?? []), app.script], { cwd: root, env, encoding: 'utf8' });
  const later = (LATER[app.name] ?? []).map((file) => {
    const code = `await import(${JSON.stringify(path.join(root, file))})`;
    return [file, spawnSync(app.interpreter, [...(app.node_args ?? []), '--input-type=module', '-e', code], { cwd: root, env, encoding: 'utf8' })];
  });
  const laterFailed = later.find(([, l]) => l.status !== 0);
  if (r.status === 2 && /HSE_HTTP_PORT/.test(r.stderr) && !laterFailed) {
    console.log(`warm-compile-cache: ${app.name} ok`);
  } else if (laterFailed) {
    failed++;
    console.error(`warm-compile-cache: ${app.name}: importing ${laterFailed[0]} failed:\n${laterFailed[1].stderr}${laterFailed[1].stdout}`);
  } else {
    failed++;
    console.error(`warm-compile-cache: ${app.name} exited ${r.status ?? r.signal} instead of refusing the setting:\n${r.stderr}${r.stdout}`);
  }
}
console.log(`warm-compile-cache: ${apps.length - failed} of ${apps.length} processes cached in ${apps[0]?.env.NODE_COMPILE_CACHE}`);
if (failed > 0 && !strict)
  console.error('warm-compile-cache: starting anyway; the processes above strip their TypeScript themselves (more memory, same behaviour)');
process.exit(failed > 0 && strict ? 1 : 0);
