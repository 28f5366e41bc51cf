// HSE_LISTEN_SOCKET: on a shared host the router listens on a Unix socket instead of a TCP port, so only the proxy
// (by the socket's owner, group and mode) can reach it — a local user cannot connect and forge X-Forwarded-For, which
// any local user can do to a loopback port (every user may bind any 127/8 source address).
//   - the real nginx and Caddy, from their examples with the upstream switched to the socket, show the client's
//     address in the activity log; a forged X-Forwarded-For from the client does not get through;
//   - the router opens no TCP port;
//   - `nobody` cannot connect to the socket; a process in the socket's group can;
//   - the settings are parsed and refused in shared/config.ts with the variable named.
//   - Traefik cannot proxy to a Unix socket at all (advanced/proxy.md says so and what to do instead): shown with the
//     real Traefik, so the documentation learns when a version can.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import test from 'ava';
import { parseConfig } from '../../shared/config.ts';
import { createTestCA, TEST_DOMAIN, type TestCA } from '../harness/ca.ts';
import { startImage, type Image } from '../harness/image.ts';
import { findBinary, freePort, NODE } from '../harness/process.ts';
import { missingProxy, startProxy, type ProxyKind, type RunningProxy } from '../harness/proxies.ts';
import { HttpsClient } from './https-client.ts';

const PASSWORD = 'socket listener test password';
/** The group the proxy runs as on Debian (www-data holds nginx's workers; caddy is a member too). */
const PROXY_GROUP = 'www-data';
const PROXY_GID = 33;

let image: Image;
let ca: TestCA;
let sockDir: string;
let socket: string;
const ports: Record<string, { https: number; http: number }> = {};
const proxies: RunningProxy[] = [];

test.before(async () => {
  ca = await createTestCA();
  // Like /run/hse: a directory anyone may pass through, so only the socket's own mode and group decide.
  sockDir = fs.mkdtempSync(path.join(os.tmpdir(), 'hse-sock-'));
  fs.chmodSync(sockDir, 0o755);
  socket = path.join(sockDir, 'router.sock');
  for (const kind of ['nginx', 'caddy']) ports[kind] = { https: await freePort(), http: await freePort() };
  // One image behind both proxies: its public URL names the nginx port (the checks here do not depend on it).
  image = await startImage({
    publicUrl: `https://${TEST_DOMAIN}:${ports.nginx.https}`,
    services: ['console', 'coordination'],
    env: { HSE_TLS: 'off', HSE_LISTEN_SOCKET: socket, HSE_LISTEN_SOCKET_GROUP: PROXY_GROUP, HSE_CONSOLE_PASSWORD: PASSWORD },
  });
});

test.after.always(async () => {
  for (const p of proxies) await p.stop();
  await image?.stop();
  ca?.remove();
  if (sockDir) fs.rmSync(sockDir, { recursive: true, force: true });
});

/** Connects to the socket as `uid:gid`; resolves "connected" or the error code. */
function connectAs(uid: number, gid: number): Promise<string> {
  const code = `require('net').connect(${JSON.stringify(socket)}).on('connect',()=>{console.log('connected');process.exit(0)}).on('error',(e)=>{console.log(e.code);process.exit(0)})`;
  return new Promise((resolve, reject) => {
    const p = spawn(NODE, ['-e', code], { uid, gid, stdio: ['ignore', 'pipe', 'pipe'], env: { PATH: process.env.PATH } });
    let out = '';
    p.stdout.on('data', (d: Buffer) => (out += d.toString()));
    p.stderr.on('data', (d: Buffer) => (out += d.toString()));
    p.on('error', reject);
    p.on('exit', () => resolve(out.trim()));
  });
}

test.serial('the socket is the group’s and the owner’s only, and the router opens no TCP port', async (t) => {
  const st = fs.statSync(socket);
  t.true(st.isSocket());
  t.is(st.mode & 0o777, 0o660);
  t.is(st.gid, PROXY_GID);
  t.is(await connectAs(65534, 65534), 'EACCES', 'a local user outside the group (nobody) cannot connect');
  t.is(await connectAs(65534, PROXY_GID), 'connected', 'a process in the group (the proxy) can');
  const tcp = await new Promise<string>((resolve) => {
    const c = net.connect(image.port, '127.0.0.1');
    c.once('connect', () => {
      c.destroy();
      resolve('connected');
    });
    c.once('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? e.message));
  });
  t.is(tcp, 'ECONNREFUSED', 'nothing listens on HSE_HTTP_PORT');
});

for (const kind of ['nginx', 'caddy'] as ProxyKind[]) {
  test.serial(`${kind} proxies to the socket, and the activity log shows the client's address`, async (t) => {
    const missing = missingProxy(kind);
    if (missing) return t.fail(missing);
    const proxy = await startProxy(kind, { domain: TEST_DOMAIN, upstream: { socket }, ca, ports: ports[kind] });
    proxies.push(proxy);
    const c = new HttpsClient(proxy.url, ca.caPem, '127.0.0.2');
    const r = await c.signIn('admin', PASSWORD, { 'x-forwarded-for': '203.0.113.7' });
    t.is(r.status, 303, `${r.body.slice(0, 300)}\n${proxy.output().slice(-2000)}`);
    const list = await c.request('/console/api/logs?action=console.signin&limit=5');
    const entries = (JSON.parse(list.body) as { entries: { ip: string; actor: string }[] }).entries;
    t.is(entries[0]?.ip, '127.0.0.2', JSON.stringify(entries));
    t.false(JSON.stringify(entries).includes('203.0.113.7'), 'the forged address stayed out');
  });
}

test.serial('Traefik cannot reach the socket, whichever way its URL is written (why proxy.md leaves it out)', async (t) => {
  const traefik = findBinary('traefik');
  if (!traefik) return t.fail(missingProxy('traefik')!);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hse-traefik-sock-'));
  const port = await freePort();
  const urls = [`unix://${socket}`, `http://unix:${socket}`, `unix:${socket}`];
  fs.writeFileSync(
    path.join(dir, 'dynamic.yml'),
    [
      'http:',
      '  routers:',
      ...urls.flatMap((_, i) => [`    r${i}:`, `      rule: PathPrefix(\`/try${i}/\`)`, `      service: s${i}`]),
      '  services:',
      ...urls.flatMap((u, i) => [`    s${i}:`, '      loadBalancer:', '        servers:', `          - url: "${u}"`]),
      '',
    ].join('\n'),
  );
  fs.writeFileSync(
    path.join(dir, 'traefik.yml'),
    `entryPoints:\n  web:\n    address: "127.0.0.1:${port}"\nproviders:\n  file:\n    filename: ${path.join(dir, 'dynamic.yml')}\nlog:\n  level: ERROR\n`,
  );
  const proc = spawn(traefik, [`--configFile=${path.join(dir, 'traefik.yml')}`], { stdio: 'ignore', env: { PATH: process.env.PATH, HOME: dir } });
  try {
    for (let i = 0; i < urls.length; i++) {
      let status = 404;
      // Traefik answers 404 until its file provider has loaded the routers.
      for (let n = 0; n < 100 && status === 404; n++) {
        status = await fetch(`http://127.0.0.1:${port}/try${i}/health`).then(
          (r) => r.status,
          () => 404,
        );
        if (status === 404) await new Promise((r) => setTimeout(r, 100));
      }
      t.true(status >= 500, `${urls[i]}: Traefik answered ${status}`);
    }
  } finally {
    proc.kill('SIGKILL');
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test.serial('a request over the socket without X-Forwarded-For is answered (a local health check)', async (t) => {
  const r = await new Promise<number>((resolve, reject) => {
    const c = net.connect(socket);
    let text = '';
    c.on('data', (d: Buffer) => (text += d.toString()));
    c.on('end', () => resolve(Number(/^HTTP\/1\.1 (\d+)/.exec(text)?.[1] ?? 0)));
    c.on('error', reject);
    c.write('GET /health HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n');
  });
  t.is(r, 200);
});

test('HSE_LISTEN_SOCKET settings: absolute path, mode without access for others, not in TLS mode', (t) => {
  const base = { HSE_PUBLIC_URL: 'https://vpn.example.com', HSE_TLS: 'off' };
  const c = parseConfig({ ...base, HSE_LISTEN_SOCKET: '/run/hse/router.sock' });
  t.is(c.listenSocket, '/run/hse/router.sock');
  t.is(c.listenSocketMode, 0o660);
  t.is(c.listenSocketGroup, null);
  t.is(
    parseConfig({ ...base, HSE_LISTEN_SOCKET: '/run/hse/r.sock', HSE_LISTEN_SOCKET_MODE: '600', HSE_LISTEN_SOCKET_GROUP: 'www-data' }).listenSocketMode,
    0o600,
  );
  t.is(parseConfig({}).listenSocket, null);
  const refused = (env: Record<string, string>) => t.throws(() => parseConfig({ ...base, ...env })) as Error;
  t.regex(refused({ HSE_LISTEN_SOCKET: 'run/router.sock' }).message, /^HSE_LISTEN_SOCKET: .*absolute/);
  t.regex(refused({ HSE_LISTEN_SOCKET: `/${'x'.repeat(120)}` }).message, /^HSE_LISTEN_SOCKET: .*107 bytes/);
  t.regex(refused({ HSE_LISTEN_SOCKET: '/run/hse/r.sock', HSE_LISTEN_SOCKET_MODE: '666' }).message, /^HSE_LISTEN_SOCKET_MODE: .*others/);
  t.regex(refused({ HSE_LISTEN_SOCKET: '/run/hse/r.sock', HSE_LISTEN_SOCKET_MODE: '9' }).message, /^HSE_LISTEN_SOCKET_MODE: /);
  t.regex(refused({ HSE_LISTEN_SOCKET: '/run/hse/r.sock', HSE_LISTEN_SOCKET_MODE: '060' }).message, /^HSE_LISTEN_SOCKET_MODE: .*owner/);
  t.regex(refused({ HSE_LISTEN_SOCKET_GROUP: 'www-data' }).message, /^HSE_LISTEN_SOCKET_GROUP: .*HSE_LISTEN_SOCKET/);
  t.regex(
    t.throws(() => parseConfig({ HSE_PUBLIC_URL: 'https://vpn.example.com', HSE_LISTEN_SOCKET: '/run/hse/r.sock' }))!.message,
    /^HSE_LISTEN_SOCKET: .*TLS mode/,
  );
});
