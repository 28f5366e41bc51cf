// The image's own start-time check, run by deploy/entrypoint.sh before the supervisor: one place that turns a setting
// that cannot work in the container into one line and an exit status, instead of a supervisor restarting processes
// that each fail the same way.
//
//   check-config.ts [--require-proxy-mode]
//
// Exit 2: a refused configuration (the same rule every process applies: shared/config.ts), or — with
// --require-proxy-mode, which the proxy overlay advanced/proxy.yaml passes — a public URL that is not https:// or TLS
// left on. Exit 1: the container itself is not fit to run (data volume not writable, redis-server missing).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { ConfigError, loadConfig, type Config } from '../shared/config.ts';

export interface Verdict {
  status: 0 | 1 | 2;
  /** Lines for stderr: refusals and warnings. */
  problems: string[];
  /** One summary line for stdout when the image may start. */
  summary: string;
}

/** The overlay's extra rule: proxy mode only. Returns the refusal, or null. */
export function proxyModeRefusal(cfg: Config): ConfigError | null {
  if (cfg.publicUrl.protocol !== 'https:') {
    return new ConfigError(
      'HSE_PUBLIC_URL',
      `"${cfg.publicOrigin}" is not https://; behind a reverse proxy it must be the https:// address the proxy serves (for example https://vpn.example.com), or Tailscale clients and browsers are told the wrong scheme`,
    );
  }
  if (!cfg.proxyMode)
    return new ConfigError('HSE_TLS', 'must be off with the proxy overlay (your proxy terminates TLS); remove HSE_TLS from .env or set it to off');
  return null;
}

function writable(dir: string): boolean {
  try {
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
    const probe = path.join(dir, `.write-test-${process.pid}`);
    fs.writeFileSync(probe, '');
    fs.unlinkSync(probe);
    return true;
  } catch {
    return false;
  }
}

function runs(cmd: string): boolean {
  return spawnSync(cmd, ['--version'], { stdio: 'ignore' }).status === 0;
}

export function checkImage(cfg: Config, opts: { requireProxyMode: boolean; uid: number }): Verdict {
  const problems: string[] = [];
  if (opts.requireProxyMode) {
    const r = proxyModeRefusal(cfg);
    if (r) return { status: 2, problems: [`hse image: refused configuration: ${r.variable}: ${r.reason}`], summary: '' };
  }
  if (!writable(cfg.dataDir)) {
    return {
      status: 1,
      problems: [
        `hse image: HSE_DATA_DIR "${cfg.dataDir}" is not writable by uid ${opts.uid}; if it is a volume created by another image or user, give it to this one: docker run --rm -v <volume>:/data debian:bookworm-slim chown -R ${opts.uid}:${opts.uid} /data`,
      ],
      summary: '',
    };
  }
  if (cfg.redisUrl === null && !runs('redis-server')) {
    return {
      status: 1,
      problems: ['hse image: redis-server is not installed; install it (Debian: apt-get install redis-server) or set HSE_REDIS_URL to an external Redis'],
      summary: '',
    };
  }
  if (cfg.proxyMode && cfg.trustedProxies.empty) {
    problems.push(
      'hse image: warning: HSE_TRUSTED_PROXIES is empty, so the activity log and the sign-in rate limit will see your proxy\'s address for every client; set it to the proxy\'s own address (advanced/proxy.md, "Trusted proxy")',
    );
  }
  const mode = cfg.proxyMode ? 'proxy mode (TLS at your proxy)' : cfg.tlsMode ? 'TLS mode' : 'plain HTTP (local try-out)';
  const trusted = cfg.trustedProxies.ranges.map((r) => r.source).join(',') || 'none';
  const ports = cfg.tlsMode ? `${cfg.listenAddress}:${cfg.httpsPort} and :${cfg.tlsHttpPort}` : `${cfg.listenAddress}:${cfg.httpPort}`;
  return {
    status: 0,
    problems,
    summary: `hse image: ${mode}, public URL ${cfg.publicOrigin}, router on ${ports}, trusted proxies ${trusted}, relay ${cfg.derpMode}, data ${cfg.dataDir}`,
  };
}

if (import.meta.main) {
  const args = process.argv.slice(2);
  const unknown = args.filter((a) => a !== '--require-proxy-mode');
  if (unknown.length > 0) {
    process.stderr.write(`hse image: unknown argument ${unknown.join(' ')} (the only one is --require-proxy-mode)\n`);
    process.exit(64);
  }
  // loadConfig prints the one-line refusal and exits 2 itself.
  const cfg = loadConfig('image');
  const v = checkImage(cfg, { requireProxyMode: args.includes('--require-proxy-mode'), uid: process.getuid?.() ?? -1 });
  for (const p of v.problems) process.stderr.write(`${p}\n`);
  if (v.status === 0) process.stdout.write(`${v.summary}\n`);
  process.exit(v.status);
}
