// pm2 process list of the image: `pm2-runtime start ecosystem.config.js` in the container (npm start),
// `pm2 start ecosystem.config.js` on bare metal (npm run up), as the design card writes it. An ES module (the package
// is "type": "module"): pm2 6 on Node 24 loads it and reads its exported `apps`. One process per box of docs/architecture.md, each run by the
// project's pinned Node 24 from node_modules, not whatever `node` the machine has.
//
// Restart policy: a process that exits is restarted with exponential backoff (0.5 s growing ×1.5 to 15 s, reset
// after it has run for 30 s), except exit status 2, which every hse process uses for "refused configuration" (and the
// Redis launcher for "redis-server not installed"): restarting cannot fix that, so pm2 leaves it stopped and the
// one-line reason stays at the end of its log.
//
// Settings come from the environment pm2 is started with; an `.env` file next to this one fills in what that
// environment does not set. The checks below (is an external Redis set, is HSE_DERP_MODE public) only choose which
// processes exist; every process still validates all settings itself through shared/config.ts.
import fs from 'node:fs';
import path from 'node:path';
import util from 'node:util';

const root = import.meta.dirname;
const node = path.join(root, 'node_modules', '.bin', 'node');

/** Variables from ./.env that the environment does not already set (the environment wins, as with docker compose). */
function dotenv() {
  const file = path.join(root, '.env');
  if (!fs.existsSync(file) || typeof util.parseEnv !== 'function') return {};
  const parsed = util.parseEnv(fs.readFileSync(file, 'utf8'));
  const out = {};
  for (const [k, v] of Object.entries(parsed)) if (process.env[k] === undefined) out[k] = v;
  return out;
}

const fileEnv = dotenv();
const setting = (name) => String(process.env[name] ?? fileEnv[name] ?? '').trim();

// Node's compile cache keeps each .ts file's type-stripped text (and V8's code cache) keyed by path and content, so a
// process whose files are all in it never loads the TypeScript stripper: ~14 MiB less resident per Node process, and
// a faster start. Stale entries cannot be used (the content hash must match). The image fills it at build time
// (deploy/warm-compile-cache.cjs); on bare metal the first start fills it. An operator's own NODE_COMPILE_CACHE wins.
const compileCache = setting('NODE_COMPILE_CACHE') || path.join(root, 'node_modules', '.cache', 'hse-compile');

function app(name, script, extra = {}) {
  return {
    name,
    script: path.join(root, script),
    cwd: root,
    interpreter: node,
    exec_mode: 'fork',
    instances: 1,
    env: { ...fileEnv, NODE_COMPILE_CACHE: compileCache },
    autorestart: true,
    stop_exit_codes: [2],
    exp_backoff_restart_delay: 500,
    // A process that keeps failing within 5 s of starting is given up on after this many tries (then `pm2 logs`
    // shows why); one that ran longer counts as healthy and is always restarted.
    min_uptime: 5_000,
    max_restarts: 100,
    // The router drains for up to 10 s on SIGTERM; give every process a little more before SIGKILL.
    kill_signal: 'SIGTERM',
    kill_timeout: 15_000,
    merge_logs: true,
    time: true,
    watch: false,
    ...extra,
  };
}

export const apps = [];
// The embedded Redis: run.sh writes redis.conf (a short Node step) and then execs redis-server, so the app's process
// is Redis itself and pm2's stop signal reaches it directly. No tree kill: the only children Redis has are its own
// AOF-rewrite forks, which Redis manages; signalling them too would abort a rewrite mid-way.
if (setting('HSE_REDIS_URL') === '' && setting('HSE_REDIS_SENTINELS') === '')
  apps.push(app('redis', 'services/redis/run.sh', { interpreter: '/bin/sh', treekill: false }));
apps.push(app('router', 'router/src/main.ts'));
apps.push(app('coordination', 'services/coordination/src/main.ts'));
apps.push(app('console', 'services/console/src/main.ts'));
if (setting('HSE_DERP_MODE').toLowerCase() !== 'public') apps.push(app('relay', 'services/relay/src/main.ts'));
