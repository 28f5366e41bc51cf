// The proxy-mode checks for one kind of reverse proxy, registered into the calling test file: the whole image in
// proxy mode (HSE_PUBLIC_URL=https://127.0.0.1:<proxy port>, HSE_TLS=off, HSE_TRUSTED_PROXIES=127.0.0.1/32) behind
// the real proxy started from its example in advanced/proxy/, and a client that speaks HTTPS to the proxy only.
//   1  GET /key answers 200 with JSON;
//   2  GET /console redirects to the sign-in page on the public https URL;
//   3  the console's cookies carry Secure;
//   4  a sign-in from 127.0.0.2 (not the proxy's 127.0.0.1) is logged with 127.0.0.2;
//   5  the forged X-Forwarded-For and X-Real-IP that same request carried are ignored;
//   (6, the published ports of the compose overlay, does not depend on the proxy: compose.test.ts.)
// Then, with the official Tailscale client: two nodes join with the https:// login URL through the proxy, reach
// Running, see each other and ping through our relay, also reached through the proxy.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import test from 'ava';
import { createTestCA, TEST_DOMAIN, type TestCA } from '../harness/ca.ts';
import { startImage } from '../harness/image.ts';
import { APPS, startSupervisedImage } from '../reliability/lib/supervised-image.ts';
import { freePort, NODE, ROOT } from '../harness/process.ts';
import { missingProxy, startProxy, type ProxyKind, type RunningProxy } from '../harness/proxies.ts';
import { haveTailscale, type TsNode, type TsStatus } from '../harness/tailscale.ts';
import { HttpsClient, waitProxied } from './https-client.ts';
import { joinTwoAndPing, pingViaRelay } from './two-clients.ts';

const exec = promisify(execFile);

export const PASSWORD = 'proxy mode test password';
/** Addresses a client could claim in headers; none of them may show up anywhere. */
const FORGED_XFF = '203.0.113.7';
const FORGED_REAL_IP = '203.0.113.8';
/** Tailscale v1.102's capability version, as its client sends it to /key. */
const CAPVER = 142;

/** What these checks need of the image, whichever way it was started. */
interface ProxiedImage {
  port: number;
  env: Record<string, string>;
  logs(): string;
  stop(): Promise<void>;
}

interface Setup {
  ca: TestCA;
  image: ProxiedImage;
  proxy: RunningProxy;
}

/**
 * The image as the container runs it: the real pm2 with ecosystem.config.js and the embedded Redis, rather than
 * the test harness's separate processes and test Redis.
 */
async function startUnderPm2(publicUrl: string, env: Record<string, string>): Promise<ProxiedImage> {
  const sup = await startSupervisedImage({ HSE_PUBLIC_URL: publicUrl, ...env });
  try {
    const files = (await Promise.all(APPS.map(async (n) => (await sup.app(n)).pm2_env))).flatMap((e) => [e.pm_out_log_path, e.pm_err_log_path]);
    return {
      port: sup.port,
      env: sup.env,
      logs: () => files.map((f) => (fs.existsSync(f) ? fs.readFileSync(f, 'utf8') : '')).join('\n'),
      stop: () => sup.destroy(),
    };
  } catch (e) {
    await sup.destroy();
    throw e;
  }
}

export interface BehindProxyOptions {
  /** Run the image under pm2 with its embedded Redis, as the container does (default: the harness's processes). */
  supervised?: boolean;
}

export function behindProxy(kind: ProxyKind, opts: BehindProxyOptions = {}): void {
  const missing = missingProxy(kind);
  if (missing) {
    test(`${kind} is installed`, (t) => t.fail(missing));
    return;
  }
  let s: Setup | undefined;
  const nodes: TsNode[] = [];

  test.before(async () => {
    const ca = await createTestCA();
    const ports = { https: await freePort(), http: await freePort() };
    const publicUrl = `https://${TEST_DOMAIN}:${ports.https}`;
    const env = { HSE_TLS: 'off', HSE_TRUSTED_PROXIES: '127.0.0.1/32', HSE_CONSOLE_PASSWORD: PASSWORD };
    const image = opts.supervised ? await startUnderPm2(publicUrl, env) : await startImage({ publicUrl, env });
    try {
      const proxy = await startProxy(kind, { domain: TEST_DOMAIN, upstream: { host: '127.0.0.1', port: image.port }, ca, ports });
      s = { ca, image, proxy };
      await waitProxied(proxy.url, ca.caPem);
    } catch (e) {
      await s?.proxy.stop();
      await image.stop();
      ca.remove();
      s = undefined;
      throw e;
    }
  });

  test.after.always(async () => {
    for (const n of nodes) await n.destroy();
    await s?.proxy.stop();
    await s?.image.stop();
    s?.ca.remove();
  });

  const client = (localAddress?: string) => new HttpsClient(s!.proxy.url, s!.ca.caPem, localAddress);
  /** What the processes and the proxy printed, for a failing assertion. */
  const logs = () => `${s!.image.logs()}\n----- ${kind} -----\n${s!.proxy.output()}`;

  test.serial(`${kind} 1: GET /key answers 200 with the server's key as JSON`, async (t) => {
    const r = await client().request(`/key?v=${CAPVER}`);
    t.is(r.status, 200, logs());
    t.regex(String(r.headers['content-type']), /^application\/json/);
    const body = JSON.parse(r.body) as { publicKey: string };
    t.regex(body.publicKey, /^mkey:[0-9a-f]{64}$/);
  });

  test.serial(`${kind} 2: GET /console redirects to the sign-in page at the public https URL`, async (t) => {
    const r = await client().request('/console');
    t.true([302, 303].includes(r.status), `status ${r.status}`);
    t.is(r.headers.location, `${s!.proxy.url}/console/login`);
  });

  test.serial(`${kind} 3: the console's cookies carry Secure`, async (t) => {
    const c = client();
    const r = await c.signIn('admin', PASSWORD);
    t.is(r.status, 303, r.body.slice(0, 500));
    t.true(r.cookies.length > 0, 'sign-in set no cookie');
    for (const line of r.cookies) t.regex(line, /;\s*secure(;|$)/i, line);
    t.true(
      [...c.jar.keys()].some((k) => k.startsWith('__Secure-')),
      [...c.jar.keys()].join(', '),
    );
  });

  // 4 and 5 read the same sign-in: made from 127.0.0.2 with forged address headers.
  let signedInEntries: { ip: string; action: string; actor: string }[] | null = null;
  async function entriesAfterForgedSignIn(): Promise<{ ip: string; action: string; actor: string }[]> {
    if (signedInEntries) return signedInEntries;
    const c = client('127.0.0.2');
    const r = await c.signIn('admin', PASSWORD, { 'x-forwarded-for': FORGED_XFF, 'x-real-ip': FORGED_REAL_IP });
    if (r.status !== 303) throw new Error(`sign-in from 127.0.0.2 answered ${r.status}: ${r.body.slice(0, 300)}`);
    const list = await c.request('/console/api/logs?action=console.signin&limit=500');
    if (list.status !== 200) throw new Error(`/console/api/logs answered ${list.status}: ${list.body.slice(0, 300)}`);
    signedInEntries = (JSON.parse(list.body) as { entries: { ip: string; action: string; actor: string }[] }).entries;
    return signedInEntries;
  }

  test.serial(`${kind} 4: a sign-in from 127.0.0.2 shows 127.0.0.2 in the activity log, not the proxy's address`, async (t) => {
    const entries = await entriesAfterForgedSignIn();
    // Newest first: the sign-in just made. Check 3 signed in from 127.0.0.1 (the same host as the proxy) before it.
    t.is(entries[0]?.ip, '127.0.0.2', JSON.stringify(entries));
    t.is(entries[0]?.actor, 'admin');
  });

  test.serial(`${kind} 5: forged X-Forwarded-For and X-Real-IP on that request are ignored`, async (t) => {
    const entries = await entriesAfterForgedSignIn();
    const text = JSON.stringify(entries);
    t.false(text.includes(FORGED_XFF), text);
    t.false(text.includes(FORGED_REAL_IP), text);
  });

  if (!haveTailscale()) {
    test(`${kind}: official Tailscale client is installed`, (t) => t.fail('tailscaled/tailscale not found; run .ci/run or go install them (see README)'));
    return;
  }

  async function hse(...args: string[]): Promise<string> {
    const { stdout } = await exec(NODE, [path.join(ROOT, 'bin/hse.ts'), ...args], { env: { ...s!.image.env, PATH: process.env.PATH } });
    return stdout;
  }

  const running = (x: TsStatus) => x.BackendState === 'Running';

  test.serial(`${kind}: two official clients join with the https:// login URL through the proxy and ping each other via the relay`, async (t) => {
    const names: [string, string] = [`${kind}-a`, `${kind}-b`];
    const stdout = await joinTwoAndPing({ user: 'proxyuser', loginUrl: s!.proxy.url, caFile: s!.ca.caFile, names, hse, nodes });
    t.regex(stdout, new RegExp(`pong from ${names[1]}`));
    t.regex(stdout, /via DERP\(hse\)/);
  });

  // Proxies cut a connection after 60 s by default (nginx proxy_read_timeout, Traefik's entrypoint readTimeout, which
  // is a deadline on the whole upgraded connection, not an idle timer). The examples raise it; here a real map stream
  // and relay connection are held well past that mark and must not have been cut and reopened.
  test.serial(`${kind}: the clients' map streams and relay connections outlive the proxy's default 60 s timeout`, async (t) => {
    if (nodes.length < 2) return t.fail('the join test did not bring the clients up');
    const a = nodes[0];
    const offline = () => (s!.image.logs().match(/node offline/g) ?? []).length;
    const relayClosed = () => (s!.image.logs().match(/relay client disconnected/g) ?? []).length;
    // The counts below are only worth something if the log is the image's: the clients' joins are in it.
    t.regex(s!.image.logs(), new RegExp(`node online.*${kind}-b`), 'the image log is readable here');
    const before = { offline: offline(), relay: relayClosed() };
    await new Promise((r) => setTimeout(r, 75_000));
    t.is(offline(), before.offline, `a map stream was cut while held through ${kind}:\n${logs()}`);
    t.is(relayClosed(), before.relay, `a relay connection was cut while held through ${kind}:\n${logs()}`);
    const sa = await a.status();
    t.true(running(sa) && a.peers(sa).some((p) => p.HostName === `${kind}-b` && p.Online), JSON.stringify(sa.Peer));
    const peer = a.peers(sa).find((p) => p.HostName === `${kind}-b`)!;
    t.regex(await pingViaRelay(a, peer.TailscaleIPs[0]), new RegExp(`pong from ${kind}-b`));
  });
}
