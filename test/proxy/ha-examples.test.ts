// The examples for several instances (advanced/ha.md, advanced/ha/):
//   - the Compose file, rendered by the real Compose v2 CLI: the addresses it fixes agree with each other (the
//     instances name the sentinels and trust the proxy at their addresses, the sentinels watch the primary's, the
//     replica follows it), both instances get the same settings and their own data volume, and it refuses to render
//     without HSE_PUBLIC_URL;
//   - the nginx, Caddy and Traefik upstream blocks, each run for real from its example in front of two instances: both
//     instances serve (a relay greets with its own key, so the greetings seen through the proxy tell them apart), and
//     once one instance is killed every request through the proxy is still answered, by the other.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { promisify } from 'node:util';
import test from 'ava';
import { createTestCA, TEST_DOMAIN, type TestCA } from '../harness/ca.ts';
import { killImage, startInstances } from '../harness/instances.ts';
import { findBinary, freePorts, ROOT } from '../harness/process.ts';
import { missingProxy, type ProxyKind, startProxy } from '../harness/proxies.ts';
import { startRedis, type TestRedis } from '../harness/redis.ts';
import { HttpsClient } from './https-client.ts';

const run = promisify(execFile);
const COMPOSE = findBinary('docker-compose');
const FILE = path.join(ROOT, 'advanced/ha/compose.yaml');

interface Service {
  environment?: Record<string, string>;
  entrypoint?: string[];
  command?: string[];
  volumes?: { source: string; target: string }[];
  networks?: Record<string, { ipv4_address?: string } | null>;
}

async function render(env: Record<string, string>): Promise<{ services: Record<string, Service> }> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hse-compose-ha-'));
  const envFile = path.join(dir, '.env');
  fs.writeFileSync(
    envFile,
    Object.entries(env)
      .map(([k, v]) => `${k}=${v}\n`)
      .join(''),
  );
  try {
    const { stdout } = await run(COMPOSE!, ['-f', FILE, '--env-file', envFile, 'config', '--format', 'json'], {
      env: { PATH: process.env.PATH, HOME: dir },
      cwd: dir,
    });
    return JSON.parse(stdout) as { services: Record<string, Service> };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

if (!COMPOSE) {
  test('the Compose v2 CLI is installed', (t) => t.fail('docker-compose not found; run bash .ci/install-proxies.sh'));
} else {
  test('the HA Compose file: two instances with the same settings and their own data, on the sentinels watching the primary, trusting the proxy', async (t) => {
    const c = await render({ HSE_PUBLIC_URL: 'https://vpn.example.com' });
    const s = c.services;
    const ip = (name: string) => Object.values(s[name].networks ?? {})[0]?.ipv4_address ?? `(no address for ${name})`;
    const [a, b] = [s['hse-a'], s['hse-b']];
    t.deepEqual(a.environment, b.environment, 'both instances get the same settings');
    const env = a.environment!;
    t.is(env.HSE_PUBLIC_URL, 'https://vpn.example.com');
    t.is(env.HSE_TLS, 'off');
    t.is(env.HSE_TRUSTED_PROXIES, ip('proxy'), 'they trust the proxy, at its address');
    t.is(env.HSE_REDIS_SENTINELS, ['sentinel-1', 'sentinel-2', 'sentinel-3'].map((n) => `${ip(n)}:26379`).join(','));
    t.is(env.HSE_DERP_MESH_WITH, 'http://hse-a:8080,http://hse-b:8080', 'every instance lists every instance');
    t.not(a.volumes?.[0].source, b.volumes?.[0].source, 'each instance has its own data volume (its own relay key)');
    for (const n of ['sentinel-1', 'sentinel-2', 'sentinel-3']) {
      t.regex((s[n].entrypoint ?? []).join(' '), new RegExp(`sentinel monitor hse ${ip('redis-1').replace(/\./g, '\\.')} 6379 2`), `${n} watches the primary`);
    }
    t.is(env.HSE_REDIS_SENTINEL_NAME, 'hse');
    t.regex((s['redis-2'].command ?? []).join(' '), new RegExp(`--replicaof ${ip('redis-1').replace(/\./g, '\\.')} 6379`), 'the replica follows the primary');
    t.regex((s['redis-1'].command ?? []).join(' '), /--appendonly yes/);
    t.regex((s['redis-2'].command ?? []).join(' '), /--appendonly yes/);

    const refused = await render({}).then(
      () => '',
      (e: { stderr?: string }) => e.stderr ?? 'refused',
    );
    t.regex(refused, /HSE_PUBLIC_URL/, 'no public URL, no configuration');
  });
}

/** The key a relay greets with, through the proxy: a DERP upgrade over TLS, then the ServerKey frame. */
function relayKey(port: number, ca: TestCA): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = tls.connect({ host: '127.0.0.1', port, ca: ca.caPem }, () => {
      s.write(`GET /derp HTTP/1.1\r\nHost: ${TEST_DOMAIN}:${port}\r\nUpgrade: DERP\r\nConnection: Upgrade\r\n\r\n`);
    });
    let buf = Buffer.alloc(0);
    const timer = setTimeout(() => s.destroy(new Error('no relay greeting within 10 s')), 10_000);
    s.on('data', (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      const head = buf.subarray(0, end).toString('latin1');
      if (!/^HTTP\/1\.1 101/.test(head)) {
        clearTimeout(timer);
        s.destroy();
        reject(new Error(`no upgrade: ${head.split('\r\n')[0]}`));
        return;
      }
      // Frame: type 0x01 (server key), 4-byte length, 8-byte magic "DERP🔑", then the 32-byte key.
      const frame = buf.subarray(end + 4);
      if (frame.length < 5 + 8 + 32) return;
      clearTimeout(timer);
      s.destroy();
      resolve(frame.subarray(13, 45).toString('hex'));
    });
    s.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
  });
}

for (const kind of ['nginx', 'caddy', 'traefik'] as ProxyKind[]) {
  const missing = missingProxy(kind);
  if (missing) {
    test(`${kind} is installed`, (t) => t.fail(missing));
    continue;
  }
  test.serial(`${kind} with both instances as upstreams: both serve, and with one killed every request is answered by the other`, async (t) => {
    const ca = await createTestCA();
    const [https, http, pA, pB] = await freePorts(4);
    let redis: TestRedis | null = null;
    const cleanup: (() => Promise<void>)[] = [];
    try {
      redis = await startRedis();
      const [A, B] = await startInstances(2, {
        services: ['coordination', 'relay'],
        store: { HSE_REDIS_URL: redis.url },
        publicUrl: `https://${TEST_DOMAIN}:${https}`,
        ports: [pA, pB],
        mesh: false,
        env: { HSE_TLS: 'off', HSE_TRUSTED_PROXIES: '127.0.0.1/32' },
      });
      cleanup.push(
        () => B.stop(),
        () => A.stop(),
      );
      const instances = [pA, pB].map((port) => ({ host: '127.0.0.1', port }));
      const proxy = await startProxy(kind, { domain: TEST_DOMAIN, upstream: instances[0], instances, ca, ports: { https, http } });
      cleanup.push(() => proxy.stop());

      const seen = new Set<string>();
      for (let i = 0; i < 12 && seen.size < 2; i++) seen.add(await relayKey(https, ca));
      t.is(seen.size, 2, `both instances' relays answered through ${kind}`);

      await killImage(A);
      const client = new HttpsClient(proxy.url, ca.caPem);
      const statuses: number[] = [];
      const after = new Set<string>();
      for (let i = 0; i < 12; i++) {
        statuses.push((await client.request('/key?v=142')).status);
        after.add(await relayKey(https, ca));
      }
      t.deepEqual(
        statuses,
        statuses.map(() => 200),
        'every request is answered once one instance is dead',
      );
      t.is(after.size, 1, 'by the one that is left');
    } finally {
      for (const c of cleanup.reverse()) await c();
      await redis?.stop();
      fs.rmSync(ca.dir, { recursive: true, force: true });
    }
  });
}
