// Every refused configuration of issue 2, as a real start of the router process: it exits with status 2 after one
// line naming the variable and the reason (what pm2 then leaves stopped, see test/supervisor). Settings that are only
// questionable start with a warning instead.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import test from 'ava';
import { freePort, runProcess } from '../harness/process.ts';

async function start(env: Record<string, string>) {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'hse-cfg-'));
  const port = await freePort();
  const proc = runProcess('router/src/main.ts', { HSE_DATA_DIR: dataDir, HSE_HTTP_PORT: String(port), ...env });
  return { proc, cleanup: () => fs.rmSync(dataDir, { recursive: true, force: true }) };
}

const REFUSED: [string, Record<string, string>, RegExp][] = [
  ['0.0.0.0/0', { HSE_TRUSTED_PROXIES: '0.0.0.0/0' }, /HSE_TRUSTED_PROXIES: "0\.0\.0\.0\/0" trusts every IPv4 address/],
  ['::/0', { HSE_TRUSTED_PROXIES: '::/0' }, /HSE_TRUSTED_PROXIES: "::\/0" trusts every IPv6 address/],
  ['0::0/0', { HSE_TRUSTED_PROXIES: '10.0.0.1, 0::0/0' }, /HSE_TRUSTED_PROXIES: "0::0\/0" trusts every IPv6 address/],
  ['::ffff:0.0.0.0/96', { HSE_TRUSTED_PROXIES: '::ffff:0.0.0.0/96' }, /HSE_TRUSTED_PROXIES: "::ffff:0\.0\.0\.0\/96" trusts every IPv4 address/],
  ['::ffff:0:0/96', { HSE_TRUSTED_PROXIES: '::ffff:0:0/96' }, /trusts every IPv4 address/],
  ['two halves of 0.0.0.0/0', { HSE_TRUSTED_PROXIES: '0.0.0.0/1 128.0.0.0/1' }, /HSE_TRUSTED_PROXIES: the entries together trust every IPv4 address/],
  [
    'an entry that is not an address',
    { HSE_TRUSTED_PROXIES: '10.0.0.1,proxy.example.com' },
    /HSE_TRUSTED_PROXIES: "proxy\.example\.com" is not an IP address or CIDR/,
  ],
  ['a prefix too long', { HSE_TRUSTED_PROXIES: '10.0.0.1/33' }, /HSE_TRUSTED_PROXIES: "10\.0\.0\.1\/33" has a prefix longer than 32 bits/],
  ['a doubled prefix', { HSE_TRUSTED_PROXIES: '10.0.0.0/24/8' }, /HSE_TRUSTED_PROXIES: "10\.0\.0\.0\/24\/8" is not an IP address or CIDR/],
  ['port 0', { HSE_HTTP_PORT: '0' }, /HSE_HTTP_PORT: "0" is not a TCP\/UDP port/],
  ['port 65536', { HSE_HTTP_PORT: '65536' }, /HSE_HTTP_PORT: "65536" is not a TCP\/UDP port/],
  ['a port that is not a number', { HSE_HTTP_PORT: 'http' }, /HSE_HTTP_PORT: "http" is not a TCP\/UDP port/],
  ['a bind address that is a name', { HSE_PROXY_BIND: 'localhost' }, /HSE_PROXY_BIND: "localhost" is not an IP address to bind to/],
  ['a bind address out of range', { HSE_PROXY_BIND: '127.0.0.256' }, /HSE_PROXY_BIND: "127\.0\.0\.256" is not an IP address to bind to/],
  ['a bad listen address', { HSE_LISTEN_ADDRESS: '0.0.0' }, /HSE_LISTEN_ADDRESS: "0\.0\.0" is not an IP address to bind to/],
  ['a public URL that is not a URL', { HSE_PUBLIC_URL: 'vpn.example.com' }, /HSE_PUBLIC_URL: "vpn\.example\.com" is not a URL/],
  [
    'a public URL of another scheme',
    { HSE_PUBLIC_URL: 'ftp://vpn.example.com' },
    /HSE_PUBLIC_URL: "ftp:\/\/vpn\.example\.com" must start with http:\/\/ or https:\/\//,
  ],
  ['a public URL with a path', { HSE_PUBLIC_URL: 'https://vpn.example.com/hse' }, /HSE_PUBLIC_URL: .* must be the bare origin/],
  ['a bad head timeout', { HSE_HEADER_TIMEOUT: '0' }, /HSE_HEADER_TIMEOUT: "0" is not a whole number from 1 to 3600/],
  ['a key expiry that is not a duration', { HSE_NODE_KEY_EXPIRY: '1 week' }, /HSE_NODE_KEY_EXPIRY: "1 week" is not a duration/],
  ['no router process', { HSE_ROUTER_PROCESSES: '0' }, /HSE_ROUTER_PROCESSES: "0" is not a whole number from 1 to 16/],
  ['too many router processes', { HSE_ROUTER_PROCESSES: '17' }, /HSE_ROUTER_PROCESSES: "17" is not a whole number from 1 to 16/],
  [
    'several router processes in TLS mode',
    { HSE_ROUTER_PROCESSES: '2', HSE_PUBLIC_URL: 'https://vpn.example.com' },
    /HSE_ROUTER_PROCESSES: is 2, but in TLS mode one router holds the certificate and renews it/,
  ],
  [
    'several router processes on one Unix socket',
    { HSE_ROUTER_PROCESSES: '2', HSE_PUBLIC_URL: 'https://vpn.example.com', HSE_TLS: 'off', HSE_LISTEN_SOCKET: '/tmp/hse-router-test.sock' },
    /HSE_ROUTER_PROCESSES: is 2, but HSE_LISTEN_SOCKET is one socket file with one listener/,
  ],
  [
    'a router instance beyond the processes',
    { HSE_ROUTER_PROCESSES: '2', HSE_ROUTER_INSTANCE: '3' },
    /HSE_ROUTER_INSTANCE: is 3, more than HSE_ROUTER_PROCESSES \(2\); it is set by the supervisor, leave it unset/,
  ],
];

for (const [name, env, message] of REFUSED) {
  test(`refused: ${name} (exit 2, one line)`, async (t) => {
    const { proc, cleanup } = await start(env);
    try {
      t.is(await proc.exited(), 2);
      const lines = proc.output().trimEnd().split('\n');
      t.is(lines.length, 1, proc.output());
      t.regex(lines[0], /^hse router: refused configuration: /);
      t.regex(lines[0], message);
    } finally {
      cleanup();
    }
  });
}

test('HSE_TRUSTED_PROXIES_ANY=1 allows trusting every address (with a warning)', async (t) => {
  const { proc, cleanup } = await start({ HSE_TRUSTED_PROXIES: '0.0.0.0/0, ::/0', HSE_TRUSTED_PROXIES_ANY: '1' });
  try {
    // Many routers start at once in this file; on a loaded machine that takes a while.
    await proc.waitFor(/listening on/, 60_000);
    t.regex(proc.output(), /WARN router: HSE_TRUSTED_PROXIES: "0\.0\.0\.0\/0" is wider than one host/);
    t.is(await proc.stop(), 0);
  } finally {
    await proc.stop();
    cleanup();
  }
});

test('an entry wider than one host starts, with a warning naming it', async (t) => {
  const { proc, cleanup } = await start({ HSE_TRUSTED_PROXIES: '10.0.0.1 10.1.0.0/16' });
  try {
    // Many routers start at once in this file; on a loaded machine that takes a while.
    await proc.waitFor(/listening on/, 60_000);
    const warnings = proc
      .output()
      .split('\n')
      .filter((l) => / WARN /.test(l));
    t.is(warnings.length, 1);
    t.regex(warnings[0], /HSE_TRUSTED_PROXIES: "10\.1\.0\.0\/16" is wider than one host/);
    t.regex(proc.output(), /trustedProxies=10\.0\.0\.1,10\.1\.0\.0\/16/);
    t.is(await proc.stop(), 0);
  } finally {
    await proc.stop();
    cleanup();
  }
});

test('a port another process holds: exit 1 (worth retrying), with the reason', async (t) => {
  const net = await import('node:net');
  const holder = net.createServer();
  await new Promise<void>((r) => holder.listen(0, '127.0.0.1', r));
  const port = (holder.address() as import('node:net').AddressInfo).port;
  const { proc, cleanup } = await start({ HSE_HTTP_PORT: String(port) });
  try {
    t.is(await proc.exited(), 1);
    t.regex(proc.output(), /cannot listen on 127\.0\.0\.1:\d+: EADDRINUSE/);
  } finally {
    holder.close();
    cleanup();
  }
});
