// The image as users get it: built from deploy/Dockerfile (test/image/build.sh: podman, on a locally made stand-in for
// node:24-bookworm-slim, test/image/base.sh) and run with the real Compose CLI through podman's Docker API
// (test/harness/engine.ts), from the checked-in compose files and an operator's deploy/.env (deployment.ts).
//
//   TLS mode     deploy/compose.yaml alone: HTTPS on the container's 443 with the operator's certificate files.
//   proxy mode   deploy/compose.yaml + advanced/proxy.yaml, behind the real nginx, Caddy, Traefik and Nginx Proxy
//                Manager configurations of advanced/proxy/ (test/harness/proxies.ts): advanced/proxy.md's checks as
//                the document writes them (doc-checks.ts), check 6 read from the engine and the host's sockets, the
//                trusted-proxy rule with the document's own command for the gateway, and two official Tailscale
//                clients joining through each proxy and pinging each other through the container's relay.
//   operating    the healthcheck, the non-root user, restart and down + up keeping the tailnet, memory at rest, and a
//                refused setting: one line in `docker compose logs`, and no restart loop.
//
// Everything runs in order in one file: one container at a time, on loopback ports chosen free (never the machine's
// own 80/443), under the compose project hse-image-test.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import https from 'node:https';
import http from 'node:http';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import test, { type ExecutionContext } from 'ava';
import { createTestCA, TEST_DOMAIN, type TestCA } from '../harness/ca.ts';
import { engineMissing, startEngine, type Engine } from '../harness/engine.ts';
import { findBinary, freePort, freeUdpPort, ROOT } from '../harness/process.ts';
import { memOf } from '../harness/proc.ts';
import { missingProxy, PROXY_KINDS, startProxy, substitute, type ProxyKind, type RunningProxy } from '../harness/proxies.ts';
import { haveTailscale, type TsNode } from '../harness/tailscale.ts';
import { blockWith, commandLines, operatorLaptop, runChecks1to5, type Laptop } from '../proxy/doc-checks.ts';
import { waitProxied } from '../proxy/https-client.ts';
import { joinTwoAndPing, pingViaRelay, seesOnline } from '../proxy/two-clients.ts';
import { BASE, CONTAINER, Deployment, NETWORK, OVERLAY } from './deployment.ts';

/** A process's name for the log: its script (a service's main.ts, pm2-runtime) if it has one, else its first words. */
function shortName(args: string): string {
  const words = args.split(' ');
  const script = words.find((w) => w.endsWith('.ts') || w.endsWith('pm2-runtime'));
  return script ? script.replace(/^\/app\//, '') : words.slice(0, 2).join(' ');
}

const PASSWORD = 'image test password';
/** The image's non-root user (deploy/image-setup.sh). */
const HSE_UID = '10001';
const PROXY_FILES = [BASE, OVERLAY];
/** The test's own overlay for TLS mode (written below): host ports and the certificate mount, nothing else. */
const TLS_FILES = [BASE, 'test-tls.yaml'];
/** nginx last: it stays up, with its two clients, for the restart tests. */
const KINDS: ProxyKind[] = ['npm', 'caddy', 'traefik', 'nginx'];

const missing = [
  ...engineMissing(),
  ...PROXY_KINDS.map(missingProxy),
  findBinary('curl') ? null : 'curl not found; apt-get install curl',
  findBinary('jq') ? null : 'jq not found; apt-get install jq',
  findBinary('ss') ? null : 'ss not found; apt-get install iproute2',
  haveTailscale() ? null : 'the official Tailscale client (tailscaled, tailscale) not found; run .ci/run or go install them (see README)',
].filter((x) => x !== null);

/** Runs test/image/build.sh (the base, then `podman build`), failing with its output. */
function buildImage(): Promise<{ seconds: number; output: string }> {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const p = spawn('bash', [path.join(ROOT, 'test/image/build.sh')], { cwd: ROOT, env: process.env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    p.stdout.on('data', (d: Buffer) => (out += d.toString()));
    p.stderr.on('data', (d: Buffer) => (out += d.toString()));
    p.once('error', reject);
    p.once('exit', (code) => {
      if (code === 0) resolve({ seconds: Math.round((Date.now() - started) / 1000), output: out });
      else reject(new Error(`test/image/build.sh failed with status ${code}:\n${out.slice(-6000)}`));
    });
  });
}

/** GET over HTTPS trusting only `ca`, or plain HTTP; redirects are not followed. */
function get(url: string, ca?: string): Promise<{ status: number; location?: string; body: string }> {
  return new Promise((resolve, reject) => {
    const mod = url.startsWith('https:') ? https : http;
    const req = mod.get(url, { ca, agent: false }, (res) => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d.toString()));
      res.on('end', () => resolve({ status: res.statusCode!, location: res.headers.location, body }));
    });
    req.setTimeout(15_000, () => req.destroy(new Error(`no answer from ${url} in 15 s`)));
    req.on('error', reject);
  });
}

if (missing.length > 0) {
  test('the image test can run here', (t) => t.fail(missing.join('; ')));
} else {
  let engine: Engine;
  let d: Deployment;
  let ca: TestCA;
  let laptop: Laptop;
  let proxy: RunningProxy | undefined;
  /** Clients still running (the nginx pair, for the restart tests). */
  const nodes: TsNode[] = [];
  let ports: { tlsHttps: number; tlsHttp: number; http: number; stun: number; proxy: { https: number; http: number } };
  let publicUrl = '';
  let gateway = '';
  let files = PROXY_FILES;

  const hse = async (...args: string[]) => d.composeOk(PROXY_FILES, ['exec', '-T', 'hse', 'hse', ...args]);
  /** What a failing assertion should show: the container's log and the running proxy's. */
  const context = async () =>
    `----- docker compose logs -----\n${(await d.logs(files)).slice(-8000)}\n----- proxy -----\n${proxy?.output().slice(-3000) ?? ''}`;
  const proxyEnv = (extra: Record<string, string> = {}) => ({
    HSE_PUBLIC_URL: publicUrl,
    HSE_HTTP_PORT: String(ports.http),
    HSE_STUN_PORT: String(ports.stun),
    HSE_CONSOLE_PASSWORD: PASSWORD,
    ...extra,
  });
  const up = async (f: string[]) => {
    files = f;
    await d.composeOk(f, ['up', '-d']);
  };
  const startKind = async (kind: ProxyKind) => {
    proxy = await startProxy(kind, { domain: TEST_DOMAIN, upstream: { host: '127.0.0.1', port: ports.http }, ca, ports: ports.proxy });
    await waitProxied(proxy.url, ca.caPem, '/health', 60_000);
  };
  const stopProxy = async () => {
    await proxy?.stop();
    proxy = undefined;
  };

  test.before(async (t) => {
    t.timeout(45 * 60_000, 'a build from cold: debootstrap, apt-get and npm ci inside the build');
    const built = await buildImage();
    t.log(`image built in ${built.seconds} s: ${built.output.split('\n').findLast((l) => l.startsWith('image build:')) ?? ''}`);
    engine = await startEngine();
    d = new Deployment(engine);
    // Leftovers of an interrupted run of this test (same project name): containers, network, volume.
    d.setEnv({ HSE_PUBLIC_URL: 'https://leftovers.invalid' });
    await d.compose(PROXY_FILES, ['down', '--volumes', '--remove-orphans', '--timeout', '5']);
    ca = await createTestCA();
    laptop = operatorLaptop(ca.caFile);
    ports = {
      tlsHttps: await freePort(),
      tlsHttp: await freePort(),
      http: await freePort(),
      stun: await freeUdpPort(),
      proxy: { https: await freePort(), http: await freePort() },
    };
    publicUrl = `https://${TEST_DOMAIN}:${ports.proxy.https}`;
  });

  test.after.always(async () => {
    for (const n of nodes) await n.destroy();
    await stopProxy();
    await d?.destroy(files);
    await engine?.stop();
    ca?.remove();
    laptop?.remove();
  });

  test.serial("TLS mode (the base file): HTTPS on the container's own 443 with the operator's certificate files, healthy", async (t) => {
    // The certificate as an operator mounts it; the image runs as uid 10001, which must be able to read the key.
    const certs = fs.mkdtempSync(path.join(d.dir, 'certs-'));
    fs.copyFileSync(ca.certFile, path.join(certs, 'fullchain.pem'));
    fs.copyFileSync(ca.keyFile, path.join(certs, 'privkey.pem'));
    fs.chmodSync(certs, 0o755);
    fs.chownSync(path.join(certs, 'privkey.pem'), Number(HSE_UID), Number(HSE_UID));
    d.write(
      'test-tls.yaml',
      [
        '# The image test changes only where the host side of 80 and 443 is (free loopback ports, never the',
        "# machine's own 80/443) and mounts the certificate files HSE_TLS_CERT_FILE/HSE_TLS_KEY_FILE name.",
        'services:',
        '  hse:',
        '    ports: !override',
        `      - "127.0.0.1:${ports.tlsHttps}:443"`,
        `      - "127.0.0.1:${ports.tlsHttp}:80"`,
        `      - "${ports.stun}:${ports.stun}/udp"`,
        '    volumes:',
        `      - "${certs}:/certs:ro"`,
        '',
      ].join('\n'),
    );
    const tlsUrl = `https://${TEST_DOMAIN}:${ports.tlsHttps}`;
    d.setEnv({
      HSE_PUBLIC_URL: tlsUrl,
      HSE_TLS_CERT_FILE: '/certs/fullchain.pem',
      HSE_TLS_KEY_FILE: '/certs/privkey.pem',
      HSE_STUN_PORT: String(ports.stun),
      HSE_CONSOLE_PASSWORD: PASSWORD,
    });
    await up(TLS_FILES);
    try {
      await d.waitHealthy();
      const logs = await d.logs(TLS_FILES);
      t.regex(logs, new RegExp(`hse image: TLS mode, public URL ${tlsUrl.replace(/\./g, '\\.')}, router on 0\\.0\\.0\\.0:443 and :80`), logs);
      const key = await get(`${tlsUrl}/key?v=142`, ca.caPem);
      t.is(key.status, 200, key.body);
      t.regex(key.body, /"publicKey":"mkey:[0-9a-f]{64}"/);
      const plain = await get(`http://127.0.0.1:${ports.tlsHttp}/console`);
      t.true([301, 302, 307, 308].includes(plain.status), `port 80 answered ${plain.status}`);
      t.true(plain.location?.startsWith(`${tlsUrl}/`), `port 80 redirected to ${plain.location}`);
      t.is(await d.inspect('{{.State.Health.Status}}'), 'healthy');
      t.is((await d.composeOk(TLS_FILES, ['port', 'hse', '443'])).trim(), `127.0.0.1:${ports.tlsHttps}`);
    } catch (e) {
      t.fail(`${(e as Error).message}\n${await context()}`);
    } finally {
      await d.compose(TLS_FILES, ['down', '--volumes', '--timeout', '10']);
    }
  });

  test.serial("proxy mode, first start: advanced/proxy.md's command finds the network's gateway, and untrusted it is every client's address", async (t) => {
    d.setEnv(proxyEnv());
    await up(PROXY_FILES);
    await d.waitHealthy();
    t.regex(await d.logs(PROXY_FILES), /hse image: warning: HSE_TRUSTED_PROXIES is empty/);
    // The document's command, for this project's network (hse_default is the network of a project named hse).
    const command = substitute(blockWith('Trusted proxy', 'docker network inspect'), /\bhse_default\b/g, NETWORK, 'proxy.md').trim();
    const r = await d.sh(command);
    t.is(r.code, 0, r.stderr);
    gateway = r.stdout.trim();
    t.regex(gateway, /^\d+\.\d+\.\d+\.\d+$/, `the command printed ${JSON.stringify(r.stdout)}`);
    // "Not sure? Set nothing, sign in through the proxy, and open Logs: the address shown is the proxy's."
    await startKind('nginx');
    const out = await runChecks1to5(laptop, proxy!.url, PASSWORD, () => proxy?.output() ?? '');
    t.is(out.ip, `"ip":"${gateway}"`, "a proxy on the same host reaches the container from its network's gateway");
    await stopProxy();
  });

  test.serial('proxy mode with HSE_TRUSTED_PROXIES set to that gateway: up -d again replaces the container with the rule', async (t) => {
    t.truthy(gateway, 'the previous test found the gateway');
    d.setEnv(proxyEnv({ HSE_TRUSTED_PROXIES: gateway }));
    await up(PROXY_FILES);
    await d.waitHealthy();
    const logs = await d.logs(PROXY_FILES);
    t.regex(
      logs,
      new RegExp(
        `hse image: proxy mode \\(TLS at your proxy\\), public URL ${publicUrl.replace(/\./g, '\\.')}, router on 0\\.0\\.0\\.0:8080, trusted proxies ${gateway}`,
      ),
      logs,
    );
  });

  for (const kind of KINDS) {
    test.serial(`behind ${kind}: checks 1 to 5 as documented, and two official clients join through it and ping via the container's relay`, async (t) => {
      await startKind(kind);
      const pair: TsNode[] = [];
      try {
        const out = await runChecks1to5(laptop, proxy!.url, PASSWORD, () => proxy?.output() ?? '');
        t.regex(out.key, /^\{.*"publicKey":"mkey:[0-9a-f]{64}".*\}$/, 'check 1');
        t.is(out.redirect, `302 ${proxy!.url}/console/login`, 'check 2');
        t.regex(out.cookie, /^set-cookie: __Secure-hse_session=[^;]+;.*\bsecure\b/i, 'check 3');
        t.is(out.ip, '"ip":"127.0.0.2"', `checks 4 and 5: the client, not the gateway ${gateway} or the forged 203.0.113.x`);
        const stdout = await joinTwoAndPing({
          user: `${kind}user`,
          loginUrl: proxy!.url,
          caFile: ca.caFile,
          names: [`${kind}-a`, `${kind}-b`],
          hse,
          nodes: pair,
        });
        t.regex(stdout, new RegExp(`pong from ${kind}-b`));
        t.regex(stdout, /via DERP\(hse\)/);
      } catch (e) {
        t.fail(`${(e as Error).message}\n${await context()}`);
      } finally {
        if (kind === 'nginx') nodes.push(...pair);
        else {
          for (const n of pair) await n.destroy();
          await stopProxy();
        }
      }
    });
  }

  test.serial('check 6 from the engine, as documented: HTTP published on loopback only, STUN on every address, nothing on 443 or 80', async (t) => {
    const lines = commandLines(blockWith('The six checks', 'port hse 8080'));
    t.true(lines.length >= 4, lines.join('\n'));
    const conmon = (await engine.podman(['inspect', '-f', '{{.State.ConmonPid}}', CONTAINER])).stdout.trim();
    for (const documented of lines) {
      // The operator's own ports (HSE_HTTP_PORT and HSE_STUN_PORT), and no sudo: this runs as root.
      let line = documented.replace(/^sudo /, '').replace(/\b3478\b/g, String(ports.stun));
      if (/^ss /.test(line)) line = line.replace(/\b8080\b/g, String(ports.http));
      const r = await d.sh(line);
      if (/port hse 8080$/.test(line)) t.is(r.stdout.trim(), `127.0.0.1:${ports.http}`, `${line}: ${r.stderr}`);
      else if (/port --protocol udp hse/.test(line)) t.regex(r.stdout.trim(), new RegExp(`^(0\\.0\\.0\\.0)?:${ports.stun}$`), `${line}: ${r.stderr}`);
      else if (/port hse (443|80)$/.test(line)) {
        t.not(r.code, 0, `${line} printed ${r.stdout}`);
        t.regex(r.stderr, /no port (443|80)\/tcp/, line);
      } else if (/^ss /.test(line)) {
        const listening = r.stdout.trim().split('\n');
        const ours = listening.filter((l) => l.includes(`pid=${conmon},`));
        t.log(`host sockets on the documented ports:\n${r.stdout.trim()}`);
        t.true(
          ours.some((l) => /^tcp\s/.test(l) && l.includes(` 127.0.0.1:${ports.http} `)),
          `the HTTP port is held on loopback:\n${r.stdout}`,
        );
        t.true(
          ours.some((l) => /^udp\s/.test(l) && l.includes(` 0.0.0.0:${ports.stun} `)),
          `STUN is held on every address:\n${r.stdout}`,
        );
        t.false(
          listening.some((l) => l.includes(`:${ports.http} `) && !l.includes(` 127.0.0.1:${ports.http} `)),
          `the HTTP port listens on another address too:\n${r.stdout}`,
        );
        t.false(
          ours.some((l) => /:(80|443)\s/.test(l)),
          `the container holds 80 or 443:\n${r.stdout}`,
        );
      } else t.fail(`check 6 has a command this test does not know how to read: ${documented}`);
    }
  });

  test.serial("the healthcheck turns healthy, and every process runs as the image's non-root user", async (t) => {
    await d.waitHealthy();
    t.is(await d.inspect('{{.State.Health.Status}}'), 'healthy');
    const ps = JSON.parse((await d.composeOk(PROXY_FILES, ['ps', '--format', 'json'])).trim().split('\n')[0]) as { Health: string; State: string };
    t.is(ps.Health, 'healthy', JSON.stringify(ps));
    t.is(await d.inspect('{{.Config.User}}'), 'hse');
    t.is((await d.composeOk(PROXY_FILES, ['exec', '-T', 'hse', 'id', '-u'])).trim(), HSE_UID);
    t.is((await d.composeOk(PROXY_FILES, ['exec', '-T', 'hse', 'stat', '-c', '%u:%g %a', '/data'])).trim(), `${HSE_UID}:${HSE_UID} 700`);
    const top = (await engine.podman(['top', CONTAINER, 'user', 'args'])).stdout.trim().split('\n').slice(1);
    t.true(top.length >= 7, `tini, pm2-runtime, redis-server and four Node processes:\n${top.join('\n')}`);
    for (const line of top) t.regex(line, /^hse\s/, line);
  });

  test.serial('every Node process finds its code in the compile cache the build filled, so none strips TypeScript at run time', async (t) => {
    // The processes' NODE_COMPILE_CACHE as the supervisor sets it, and each main started as the image's user the way
    // deploy/warm-compile-cache.cjs does (a refused setting: all imports load, then it exits 2), with Node's report.
    const script = [
      'cd /app',
      'cache=$(node -p "require(\'./ecosystem.config.js\').apps[0].env.NODE_COMPILE_CACHE")',
      'for main in router/src/main.ts services/coordination/src/main.ts services/console/src/main.ts services/relay/src/main.ts; do',
      '  NODE_DEBUG_NATIVE=COMPILE_CACHE NODE_COMPILE_CACHE="$cache" HSE_HTTP_PORT=refused node "$main" 2>&1 | grep "^\\[compile cache\\]" || true',
      'done',
    ].join('\n');
    const out = await d.composeOk(PROXY_FILES, ['exec', '-T', 'hse', 'sh', '-c', script]);
    const lookups = out.split('\n').filter((l) => l.includes('retrieving transpile cache'));
    t.true(lookups.length >= 20, out.slice(0, 3000));
    t.deepEqual(
      lookups.filter((l) => !l.endsWith('...success')),
      [],
      'a file missing from the cache is stripped at run time',
    );
    const refused = out.split('\n').filter((l) => /^\[compile cache\] Cannot|permission denied/.test(l));
    t.deepEqual(refused, [], 'the image user cannot use the cache');
  });

  /** What must survive: the server's key, and the nodes with their addresses. */
  async function tailnet(): Promise<{ key: string; nodes: unknown }> {
    const key = await get(`http://127.0.0.1:${ports.http}/key?v=142`);
    const list = JSON.parse(await hse('nodes', 'list', '--json')) as Record<string, unknown>[];
    return {
      key: key.body,
      nodes: list.map((n) => JSON.stringify(n, ['id', 'stableId', 'givenName', 'user', 'ipv4', 'ipv6', 'machineKey', 'nodeKey'])).sort(),
    };
  }

  async function clientsBack(t: ExecutionContext): Promise<void> {
    t.is(nodes.length, 2, 'the nginx clients are running');
    const [a] = nodes;
    const ip = await seesOnline(a, 'nginx-b', 120_000);
    const stdout = await pingViaRelay(a, ip);
    t.regex(stdout, /pong from nginx-b/);
    t.regex(stdout, /via DERP\(hse\)/);
  }

  test.serial('docker compose restart keeps the tailnet: same server key and nodes, and the clients come back through the relay', async (t) => {
    const before = await tailnet();
    t.true((before.nodes as string[]).length >= 8, JSON.stringify(before.nodes));
    await d.composeOk(PROXY_FILES, ['restart']);
    await d.waitHealthy();
    t.deepEqual(await tailnet(), before);
    await clientsBack(t);
  });

  test.serial('docker compose down, then up -d: the volume keeps the tailnet', async (t) => {
    const before = await tailnet();
    await d.composeOk(PROXY_FILES, ['down']);
    t.is((await engine.exec('docker', ['ps', '-a', '-q', '--filter', `name=${CONTAINER}`])).stdout.trim(), '', 'down removed the container');
    await up(PROXY_FILES);
    await d.waitHealthy();
    t.deepEqual(await tailnet(), before);
    await clientsBack(t);
  });

  test.serial('memory at rest and image size (the whole container idle after a start, PSS read from /proc)', async (t) => {
    for (const n of nodes.splice(0)) await n.destroy();
    await stopProxy();
    await d.composeOk(PROXY_FILES, ['restart']);
    await d.waitHealthy();
    // bench/memory.ts lets the image idle 20 s after start before reading; the same here, so the figures compare.
    await sleep(20_000);
    const top = (await engine.podman(['top', CONTAINER, 'hpid', 'args'])).stdout.trim().split('\n').slice(1);
    const procs = top.map((l) => {
      const [pid, ...args] = l.trim().split(/\s+/);
      return { pid: Number(pid), args: args.join(' '), ...memOf(Number(pid)) };
    });
    for (const name of ['pm2-runtime', 'router/src/main.ts', 'coordination/src/main.ts', 'console/src/main.ts', 'relay/src/main.ts', 'redis-server']) {
      const p = procs.find((x) => x.args.includes(name));
      t.true(p !== undefined && p.pssKiB > 0, `${name} is running and readable in /proc:\n${top.join('\n')}`);
    }
    const pss = procs.reduce((s, p) => s + p.pssKiB, 0) / 1024;
    const stats = (await engine.exec('docker', ['stats', '--no-stream', '--format', '{{.MemUsage}}', CONTAINER])).stdout.trim();
    const size = Number((await engine.podman(['image', 'inspect', '--format', '{{.Size}}', 'hse:local'])).stdout.trim());
    t.true(size > 0);
    t.log(
      `memory at rest: ${pss.toFixed(0)} MiB PSS over ${procs.length} processes (${procs.map((p) => `${shortName(p.args)} ${Math.round(p.pssKiB / 1024)}`).join(', ')}); engine: ${stats}`,
    );
    t.log(`image size: ${Math.round(size / 1e6)} MB (hse:local)`);
  });

  test.serial('a refused setting: docker compose logs shows its one-line reason, and the container waits instead of restarting', async (t) => {
    d.setEnv(proxyEnv({ HSE_TRUSTED_PROXIES: gateway, HSE_PUBLIC_URL: `http://${TEST_DOMAIN}:${ports.proxy.https}` }));
    await up(PROXY_FILES);
    let logs = '';
    for (let i = 0; i < 120 && !/hse image: not started/.test(logs); i++) {
      await sleep(500);
      logs = await d.logs(PROXY_FILES);
    }
    t.regex(logs, /^hse image: refused configuration: HSE_PUBLIC_URL: "http:\/\/127\.0\.0\.1:\d+" is not https:\/\//m, logs);
    // Watch for a while: before the entrypoint waited, podman restarted the container about twice a second.
    for (let i = 0; i < 10; i++) {
      await sleep(1000);
      t.is(await d.inspect('{{.RestartCount}} {{.State.Status}}'), '0 running');
    }
    logs = await d.logs(PROXY_FILES);
    t.is(logs.match(/refused configuration/g)?.length, 1, logs);
    t.not((await engine.podman(['healthcheck', 'run', CONTAINER])).code, 0, 'the healthcheck fails: nothing was started');
  });
}
