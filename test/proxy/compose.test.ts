// Check 6 of proxy mode, with the real Compose v2 CLI (.ci/install-proxies.sh): the configuration Compose would run
// for deploy/compose.yaml + advanced/proxy.yaml publishes plain HTTP only on the bind address (loopback unless the
// operator says otherwise) and STUN, and nothing on 443 or 80; it refuses to render without HSE_PUBLIC_URL. And the
// base file alone is TLS mode on 80/443. Settings come from an --env-file, as an operator's deploy/.env would.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import test from 'ava';
import { findBinary, ROOT } from '../harness/process.ts';

const run = promisify(execFile);
const COMPOSE = findBinary('docker-compose');
const BASE = path.join(ROOT, 'deploy/compose.yaml');
const OVERLAY = path.join(ROOT, 'advanced/proxy.yaml');

interface Port {
  host_ip?: string;
  target: number;
  published: string;
  protocol: string;
}
interface Rendered {
  services: { hse: { ports: Port[]; environment: Record<string, string>; command?: string[] } };
}

async function render(files: string[], env: Record<string, string>): Promise<Rendered> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hse-compose-'));
  const envFile = path.join(dir, '.env');
  fs.writeFileSync(
    envFile,
    Object.entries(env)
      .map(([k, v]) => `${k}=${v}\n`)
      .join(''),
  );
  try {
    const args = [...files.flatMap((f) => ['-f', f]), '--env-file', envFile, 'config', '--format', 'json'];
    // A clean environment: only the env file speaks, as on an operator's machine.
    const { stdout } = await run(COMPOSE!, args, { env: { PATH: process.env.PATH, HOME: dir }, cwd: dir });
    return JSON.parse(stdout) as Rendered;
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

if (!COMPOSE) {
  test('the Compose v2 CLI is installed', (t) => t.fail('docker-compose not found; run bash .ci/install-proxies.sh'));
} else {
  test('6: the proxy overlay publishes HTTP only on loopback and STUN, never 443 or 80', async (t) => {
    const c = await render([BASE, OVERLAY], { HSE_PUBLIC_URL: 'https://vpn.example.com' });
    const ports = c.services.hse.ports;
    t.deepEqual(
      ports.map((p) => ({ host_ip: p.host_ip ?? '', target: p.target, published: p.published, protocol: p.protocol })),
      [
        { host_ip: '127.0.0.1', target: 8080, published: '8080', protocol: 'tcp' },
        { host_ip: '', target: 3478, published: '3478', protocol: 'udp' },
      ],
    );
    t.false(ports.some((p) => p.target === 443 || p.published === '443' || p.target === 80 || p.published === '80'));
    const e = c.services.hse.environment;
    t.is(e.HSE_TLS, 'off');
    t.is(e.HSE_HTTP_PORT, '8080', 'the router listens where the publish rule points');
    t.is(e.HSE_PUBLIC_URL, 'https://vpn.example.com');
    t.deepEqual(c.services.hse.command, ['--require-proxy-mode']);
  });

  test('6: HSE_PROXY_BIND and HSE_HTTP_PORT choose the host side only', async (t) => {
    const c = await render([BASE, OVERLAY], { HSE_PUBLIC_URL: 'https://vpn.example.com', HSE_PROXY_BIND: '10.1.2.3', HSE_HTTP_PORT: '18080' });
    const http = c.services.hse.ports.filter((p) => p.protocol === 'tcp');
    t.deepEqual(
      http.map((p) => [p.host_ip, p.published, p.target]),
      [['10.1.2.3', '18080', 8080]],
    );
    t.is(c.services.hse.environment.HSE_HTTP_PORT, '8080');
  });

  test('the overlay refuses to render without HSE_PUBLIC_URL, saying what to set', async (t) => {
    const err = await t.throwsAsync(render([BASE, OVERLAY], {}));
    t.regex((err as Error & { stderr: string }).stderr, /HSE_PUBLIC_URL/);
    t.regex((err as Error & { stderr: string }).stderr, /https:\/\//);
  });

  test('the base file alone is TLS mode: 80, 443 and STUN on every address, data on the volume', async (t) => {
    const c = await render([BASE], { HSE_PUBLIC_URL: 'https://vpn.example.com' });
    t.deepEqual(
      c.services.hse.ports.map((p) => `${p.host_ip ?? '*'}:${p.published}->${p.target}/${p.protocol}`),
      ['*:80->80/tcp', '*:443->443/tcp', '*:3478->3478/udp'],
    );
    t.is(c.services.hse.environment.HSE_DATA_DIR, '/data');
    t.is(c.services.hse.environment.HSE_LISTEN_ADDRESS, '0.0.0.0');
    t.false('HSE_TLS' in c.services.hse.environment, 'TLS mode is the default, not forced');
  });
}
