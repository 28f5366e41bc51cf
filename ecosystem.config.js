// pm2 process list of the image: `pm2-runtime start ecosystem.config.js` in the container (npm start),
// `pm2 start ecosystem.config.js` on bare metal (npm run up), as the design card writes it. An ES module (the package
// is "type": "module"): pm2 6 on Node 24 loads it and reads its exported `apps`. One process per box of docs/architecture.md, each run by the
// project's pinned Node 24 from node_modules, not whatever `node` the machine has.
//
// Restart policy: a process that exits is restarted, except exit status 2, which every hse process uses for "refused
// configuration" (and the Redis launcher for "redis-server not installed"): restarting cannot fix that, so pm2 leaves
// it stopped, `pm2 ls` shows it stopped, and the one-line reason stays at the end of its log. The backoff between
// restarts (0.5 s growing ×1.5 to 15 s, none once a process has run for 30 s) is the processes' own
// (shared/restart-backoff.ts), not pm2's exp_backoff_restart_delay: with any pm2 restart delay set, pm2 6 (and 7)
// marks every exited process "waiting restart" and logs "will restart in …" even when stop_exit_codes means it will not.
//
// Logs are private: pm2 makes its home and log files readable by everyone on the host (755/644), and what the
// processes log is nobody else's business. Its home and log directory are closed to group and others here, and each
// app's two log files are created owner-only before pm2 opens them (it appends, keeping the mode).
//
// Memory: each Node app is started by /bin/sh running deploy/run-node.sh, which execs the pinned Node with the app's
// V8 flags and its main (deploy/process-settings.js: which flags, and what each bought). The process pm2 watches and
// signals is then Node itself (exec keeps the pid), as with Redis. With `interpreter: node`, pm2 would start every app
// inside its ProcessContainerFork.js, which loads semver and pm2's helpers into each; `pmx: false` keeps pm2's metrics
// agent (@pm2/io) out of them too.
//
// Settings come from the environment pm2 is started with; an `.env` file next to this one fills in what that
// environment does not set. The checks below (is an external Redis set, is HSE_DERP_MODE public) only choose which
// processes exist; every process still validates all settings itself through shared/config.ts.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import util from 'node:util';
import { NODE_PROCESSES } from './deploy/process-settings.js';

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

// Where pm2 keeps its files: PM2_HOME, else ~/.pm2 (pm2's own rule, lib/constants.js).
const pm2Home = process.env.PM2_HOME || path.resolve(process.env.HOME || os.homedir(), '.pm2');
const logDir = path.join(pm2Home, 'logs');
for (const dir of [pm2Home, logDir]) {
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  fs.chmodSync(dir, 0o700);
}
// Whatever pm2 creates from here on in this process (pm2-runtime runs its daemon in-process) is owner-only too.
process.umask(0o077);

/** An app's log file, created owner-only (or made so) before pm2 opens it for appending. */
function privateLog(file) {
  fs.closeSync(fs.openSync(file, 'a', 0o600));
  fs.chmodSync(file, 0o600);
  return file;
}

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
    // A process that keeps failing within 5 s of starting is given up on after this many tries (then `pm2 logs`
    // shows why); one that ran longer counts as healthy and is always restarted.
    min_uptime: 5_000,
    max_restarts: 100,
    // The router drains for up to 10 s on SIGTERM; give every process a little more before SIGKILL.
    kill_signal: 'SIGTERM',
    kill_timeout: 15_000,
    out_file: privateLog(path.join(logDir, `${name}-out.log`)),
    error_file: privateLog(path.join(logDir, `${name}-error.log`)),
    merge_logs: true,
    time: true,
    watch: false,
    // No @pm2/io metrics agent inside the apps (see Memory above).
    pmx: false,
    automation: false,
    ...extra,
  };
}

/**
 * A Node app: /bin/sh deploy/run-node.sh <node> <V8 flags> <main>, so that pm2 runs no wrapper of its own in it.
 * `kind` names its settings in process-settings.js (the further router processes share the router's).
 */
function nodeApp(name, main, kind = name, extraEnv = {}) {
  const { v8, env } = NODE_PROCESSES[kind];
  const base = app(name, main, { interpreter: '/bin/sh' });
  return { ...base, node_args: [path.join(root, 'deploy', 'run-node.sh'), node, ...v8], env: { ...base.env, ...env, ...extraEnv } };
}

/**
 * HSE_ROUTER_PROCESSES: routers sharing the public port (SO_REUSEPORT), named router, router-2, … Only a whole number
 * from 2 to 16 starts more than one; anything else starts one, which refuses the setting itself if it is invalid.
 */
function routerCount() {
  const v = setting('HSE_ROUTER_PROCESSES');
  return /^\d+$/.test(v) && Number(v) >= 2 && Number(v) <= 16 ? Number(v) : 1;
}

export const apps = [];
// The embedded Redis: run.sh writes redis.conf (a short Node step) and then execs redis-server, so the app's process
// is Redis itself and pm2's stop signal reaches it directly. No tree kill: the only children Redis has are its own
// AOF-rewrite forks, which Redis manages; signalling them too would abort a rewrite mid-way.
if (setting('HSE_REDIS_URL') === '' && setting('HSE_REDIS_SENTINELS') === '')
  apps.push(app('redis', 'services/redis/run.sh', { interpreter: '/bin/sh', treekill: false }));
apps.push(nodeApp('router', 'router/src/main.ts'));
for (let i = 2; i <= routerCount(); i++) apps.push(nodeApp(`router-${i}`, 'router/src/main.ts', 'router', { HSE_ROUTER_INSTANCE: String(i) }));
apps.push(nodeApp('coordination', 'services/coordination/src/main.ts'));
apps.push(nodeApp('console', 'services/console/src/main.ts'));
if (setting('HSE_DERP_MODE').toLowerCase() !== 'public') apps.push(nodeApp('relay', 'services/relay/src/main.ts'));
