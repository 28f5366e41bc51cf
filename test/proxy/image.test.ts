// The container's own steps without a Docker engine: the scripts deploy/Dockerfile runs (image-setup.sh verify, cache), its
// ENTRYPOINT (entrypoint.sh: the image's config check, then pm2-runtime with the real ecosystem file, embedded Redis
// included) in proxy mode as the overlay starts it, its HEALTHCHECK (healthcheck.sh), and the refusals an operator
// sees, after which the entrypoint waits instead of exiting into a restart loop. The built image itself, run by a
// container engine: test/image/.
import { execFile, spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import test, { type ExecutionContext } from 'ava';
import { parseConfig } from '../../shared/config.ts';
import { checkImage, proxyModeRefusal } from '../../deploy/check-config.ts';
import { healthUrl } from '../../deploy/healthcheck.ts';
import { freePort, freeUdpPort, ROOT } from '../harness/process.ts';

const run = promisify(execFile);
const ENTRYPOINT = path.join(ROOT, 'deploy/entrypoint.sh');
const HEALTHCHECK = path.join(ROOT, 'deploy/healthcheck.sh');

function tempDir(prefix: string): string {
  // Short: the data dir holds the run dir's Unix sockets (107-byte limit).
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

test('image-setup.sh verify: the tree the Dockerfile copies can run', async (t) => {
  const { stdout } = await run(path.join(ROOT, 'deploy/image-setup.sh'), ['verify'], { env: { PATH: process.env.PATH } });
  t.regex(stdout, /^image-setup verify: ok \(node 24\.\d+\.\d+, /);
});

test('image-setup.sh cache: fills the compile cache for every supervised process', async (t) => {
  const cache = tempDir('hse-cc-');
  try {
    const { stdout } = await run(path.join(ROOT, 'deploy/image-setup.sh'), ['cache'], { env: { PATH: process.env.PATH, NODE_COMPILE_CACHE: cache } });
    t.regex(stdout, /5 of 5 processes cached/);
    t.true(fs.readdirSync(cache).length > 0);
  } finally {
    fs.rmSync(cache, { recursive: true, force: true });
  }
});

/**
 * Runs the entrypoint with a setting it refuses. It must print the reason and then wait rather than exit: under the
 * compose file's `restart: unless-stopped` an exit would be restarted whatever its status. Once the waiting line is
 * out, SIGTERM (what tini forwards from `docker compose stop`) must be what ends it.
 */
async function refusal(dir: string, env: Record<string, string>): Promise<{ lines: string[]; signal: NodeJS.Signals | null; code: number | null }> {
  const proc = spawn(ENTRYPOINT, ['--require-proxy-mode'], {
    env: { PATH: process.env.PATH, HOME: dir, PM2_HOME: path.join(dir, 'pm2'), HSE_DATA_DIR: path.join(dir, 'd'), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let err = '';
  proc.stderr.on('data', (d: Buffer) => (err += d.toString()));
  proc.stdout.resume();
  const exited = new Promise<void>((r) => proc.once('exit', () => r()));
  try {
    for (let i = 0; i < 600 && proc.exitCode === null && !/hse image: not started/.test(err); i++) await sleep(50);
    proc.kill('SIGTERM');
    await exited;
  } finally {
    if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
  }
  return { lines: err.trim().split('\n'), signal: proc.signalCode, code: proc.exitCode };
}

test('entrypoint with --require-proxy-mode refuses an http:// public URL with one line, then waits instead of exiting', async (t) => {
  const dir = tempDir('hse-ep-');
  try {
    const r = await refusal(dir, { HSE_PUBLIC_URL: 'http://vpn.example.com', HSE_TLS: 'off' });
    t.is(r.lines.length, 2, r.lines.join('\n'));
    t.regex(r.lines[0], /^hse image: refused configuration: HSE_PUBLIC_URL: "http:\/\/vpn\.example\.com" is not https:\/\//);
    t.regex(r.lines[1], /^hse image: not started \(status 2\): fix what the line above names, then docker compose up -d .*; waiting here instead of exiting/);
    t.is(r.signal, 'SIGTERM', `it exited by itself (status ${r.code}), which restart: unless-stopped would turn into a loop`);
    t.false(fs.existsSync(path.join(dir, 'pm2')), 'the supervisor never started');
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('entrypoint refuses what every process refuses (a trusted range holding every address), then waits', async (t) => {
  const dir = tempDir('hse-ep-');
  try {
    const r = await refusal(dir, { HSE_PUBLIC_URL: 'https://vpn.example.com', HSE_TLS: 'off', HSE_TRUSTED_PROXIES: '0.0.0.0/0' });
    t.regex(r.lines[0], /refused configuration: HSE_TRUSTED_PROXIES: "0\.0\.0\.0\/0"/);
    t.regex(r.lines[1], /^hse image: not started \(status 2\)/);
    t.is(r.signal, 'SIGTERM', r.lines.join('\n'));
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('check-config: proxy mode needs https and TLS off; an empty trusted list is warned about', (t) => {
  const base = { HSE_DATA_DIR: '/tmp/hse-unused', HSE_TLS: 'off' };
  t.is(proxyModeRefusal(parseConfig({ ...base, HSE_PUBLIC_URL: 'http://vpn.example.com' }))?.variable, 'HSE_PUBLIC_URL');
  t.is(proxyModeRefusal(parseConfig({ ...base, HSE_PUBLIC_URL: 'https://vpn.example.com', HSE_TLS: 'on' }))?.variable, 'HSE_TLS');
  t.is(proxyModeRefusal(parseConfig({ ...base, HSE_PUBLIC_URL: 'https://vpn.example.com' })), null);
  const dir = tempDir('hse-cc-');
  try {
    const v = checkImage(parseConfig({ HSE_DATA_DIR: dir, HSE_TLS: 'off', HSE_PUBLIC_URL: 'https://vpn.example.com' }), { requireProxyMode: true, uid: 0 });
    t.is(v.status, 0);
    t.regex(v.problems.join('\n'), /HSE_TRUSTED_PROXIES is empty/);
    t.regex(v.summary, /proxy mode .* public URL https:\/\/vpn\.example\.com/);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('healthcheck asks the router on loopback when it listens on every interface', (t) => {
  const cfg = (env: Record<string, string>) => parseConfig({ HSE_DATA_DIR: '/tmp/hse-unused', ...env });
  t.is(healthUrl(cfg({ HSE_LISTEN_ADDRESS: '0.0.0.0', HSE_HTTP_PORT: '8080' })).href, 'http://127.0.0.1:8080/health');
  t.is(healthUrl(cfg({ HSE_LISTEN_ADDRESS: '::', HSE_HTTP_PORT: '8080' })).href, 'http://[::1]:8080/health');
  t.is(healthUrl(cfg({ HSE_PUBLIC_URL: 'https://vpn.example.com', HSE_LISTEN_ADDRESS: '0.0.0.0' })).href, 'https://127.0.0.1/health');
  t.is(
    healthUrl(cfg({ HSE_PUBLIC_URL: 'https://vpn.example.com', HSE_LISTEN_ADDRESS: '127.0.0.1', HSE_HTTPS_PORT: '8443' })).href,
    'https://127.0.0.1:8443/health',
  );
});

test('healthcheck reports unhealthy (status 1, one line) when nothing answers', async (t) => {
  const port = await freePort();
  const r = spawnSync(HEALTHCHECK, [], {
    env: { PATH: process.env.PATH, HSE_HTTP_PORT: String(port), HSE_DATA_DIR: '/tmp/hse-unused' },
    encoding: 'utf8',
    timeout: 30_000,
  });
  t.is(r.status, 1);
  t.regex(r.stderr.trim(), new RegExp(`^hse health: unhealthy: http://127\\.0\\.0\\.1:${port}/health: `));
});

test('entrypoint in proxy mode runs the whole image under pm2-runtime (embedded Redis included) until healthy, and stops on SIGTERM', async (t) => {
  await entrypointRunsUntilHealthy(t, ROOT);
});

/**
 * The build the Dockerfile does, from the same context (deploy/Dockerfile.dockerignore's filter over the tracked
 * files) into a fresh directory: `deps` installs the runtime dependencies only, `verify` and `cache` pass there (so
 * no process imports a development-only package), and the entrypoint runs the image from that tree. The `system`
 * phase (apt packages, the hse user, /data) changes the machine itself and is left to the real image build.
 */
test("the Dockerfile's deps, verify and cache phases build a runnable tree with runtime dependencies only", async (t) => {
  const app = tempDir('hse-img-');
  try {
    const { stdout: tracked } = await run('git', ['ls-files', '-z'], { cwd: ROOT, maxBuffer: 32 * 1024 * 1024 });
    const excluded = /^(\.git|node_modules|data|test-artifacts|test|bench|\.ci)(\/|$)|(^|\/)\.env$|\.log$/;
    for (const f of tracked.split('\0').filter((x) => x && !excluded.test(x))) {
      fs.mkdirSync(path.dirname(path.join(app, f)), { recursive: true });
      fs.copyFileSync(path.join(ROOT, f), path.join(app, f));
      fs.chmodSync(path.join(app, f), fs.statSync(path.join(ROOT, f)).mode);
    }
    const setup = path.join(app, 'deploy/image-setup.sh');
    // The machine's own environment (its registry, proxy and CA settings), without the settings of the npm running
    // this test, as `docker build` would run npm with the builder's network settings.
    const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.toLowerCase().startsWith('npm_')));
    await run(setup, ['deps'], { env, maxBuffer: 32 * 1024 * 1024 });
    for (const dev of ['ava', 'typescript', 'playwright-core', 'fast-check']) {
      t.false(fs.existsSync(path.join(app, 'node_modules', dev)), `${dev} is a development dependency and must not be in the image`);
    }
    const verify = await run(setup, ['verify'], { env });
    t.regex(verify.stdout, /^image-setup verify: ok \(node 24\.\d+\.\d+, /);
    const cache = await run(setup, ['cache'], { env: { ...env, NODE_COMPILE_CACHE: path.join(app, '.cache') } });
    t.regex(cache.stdout, /5 of 5 processes cached/, cache.stderr);
    await entrypointRunsUntilHealthy(t, app);
  } finally {
    fs.rmSync(app, { recursive: true, force: true });
  }
});

async function entrypointRunsUntilHealthy(t: ExecutionContext, root: string): Promise<void> {
  const ENTRYPOINT = path.join(root, 'deploy/entrypoint.sh');
  const HEALTHCHECK = path.join(root, 'deploy/healthcheck.sh');
  const dir = tempDir('hse-ep-');
  const port = await freePort();
  const env = {
    PATH: process.env.PATH,
    HOME: dir,
    PM2_HOME: path.join(dir, 'pm2'),
    HSE_DATA_DIR: path.join(dir, 'd'),
    HSE_PUBLIC_URL: `https://127.0.0.1:${await freePort()}`,
    HSE_TLS: 'off',
    HSE_TRUSTED_PROXIES: '127.0.0.1/32',
    // On a shared test machine: loopback only (the container sets 0.0.0.0 and lets the publish rule restrict it).
    HSE_LISTEN_ADDRESS: '127.0.0.1',
    HSE_HTTP_PORT: String(port),
    HSE_STUN_PORT: String(await freeUdpPort()),
    HSE_CONSOLE_PASSWORD: 'image test password',
  };
  const proc = spawn(ENTRYPOINT, ['--require-proxy-mode'], { env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  let out = '';
  proc.stdout.on('data', (d: Buffer) => (out += d.toString()));
  proc.stderr.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((r) => proc.once('exit', (code) => r(code)));
  try {
    let health = { status: -1 as number | null, stdout: '', stderr: '' };
    for (let i = 0; i < 240 && proc.exitCode === null; i++) {
      health = spawnSync(HEALTHCHECK, [], { env, encoding: 'utf8', timeout: 15_000 });
      if (health.status === 0) break;
      await sleep(250);
    }
    t.is(health.status, 0, `${health.stderr}\n--- entrypoint ---\n${out}`);
    t.regex(health.stdout, /^hse health: healthy: http:\/\/127\.0\.0\.1:\d+\/health answered 200/);
    t.regex(
      out,
      /hse image: proxy mode \(TLS at your proxy\), public URL https:\/\/127\.0\.0\.1:\d+, router on 127\.0\.0\.1:\d+, trusted proxies 127\.0\.0\.1\/32/,
    );
    const key = await fetch(`http://127.0.0.1:${port}/key?v=142`);
    t.is(key.status, 200);
    // The embedded Redis keeps its data on the data volume.
    t.true(fs.existsSync(path.join(env.HSE_DATA_DIR, 'redis')), fs.readdirSync(env.HSE_DATA_DIR).join(', '));
    proc.kill('SIGTERM');
    const code = await Promise.race([exited, sleep(40_000).then(() => 'timeout' as const)]);
    t.not(code, 'timeout', `pm2-runtime did not stop on SIGTERM:\n${out}`);
    await t.throwsAsync(fetch(`http://127.0.0.1:${port}/health`), undefined, 'the router stopped with the supervisor');
  } finally {
    // Anything left (a failed run): the entrypoint started its own process group.
    try {
      process.kill(-proc.pid!, 'SIGKILL');
    } catch {
      // already gone
    }
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
