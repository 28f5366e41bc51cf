// The official Tailscale client against the image in TLS mode, no proxy in front: two nodes log in with the
// https:// login URL pointing straight at the router's HTTPS port, trusting only the throwaway test CA
// (SSL_CERT_FILE), reach Running, see each other, and ping through our relay, also reached over the router's TLS
// (DERP over HTTP/1.1 with Upgrade: DERP, since the DERP map carries the public URL's host and port).
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import test from 'ava';
import { createTestCA, TEST_DOMAIN, type TestCA } from '../harness/ca.ts';
import { NODE, ROOT } from '../harness/process.ts';
import { haveTailscale, TsNode, type TsStatus } from '../harness/tailscale.ts';
import { startTlsImage, type TlsImage } from './tls-image.ts';

const exec = promisify(execFile);

let ca: TestCA | undefined;
let img: TlsImage | undefined;
const nodes: TsNode[] = [];

if (!haveTailscale()) {
  test('official Tailscale client is installed', (t) => t.fail('tailscaled/tailscale not found; run .ci/run or go install them (see README)'));
} else {
  test.before(async () => {
    ca = await createTestCA();
    img = await startTlsImage({
      host: TEST_DOMAIN,
      services: ['coordination', 'relay', 'console'],
      env: { HSE_TLS_CERT_FILE: ca.certFile, HSE_TLS_KEY_FILE: ca.keyFile, HSE_CONSOLE_PASSWORD: 'tls tailscale test password' },
    });
    await img.image.procs.router!.waitFor(/certificate in use/);
  });

  test.after.always(async () => {
    for (const n of nodes) await n.destroy();
    await img?.image.stop();
    ca?.remove();
  });

  async function hse(...args: string[]): Promise<string> {
    const { stdout } = await exec(NODE, [path.join(ROOT, 'bin/hse.ts'), ...args], { env: { ...img!.image.env, PATH: process.env.PATH } });
    return stdout;
  }

  const running = (x: TsStatus) => x.BackendState === 'Running';

  /** `tailscale ping` output; relay-only clients end it with "direct connection not established" and status 1. */
  async function pingViaRelay(n: TsNode, ip: string): Promise<string> {
    try {
      return (await n.cli(['ping', '--c=5', '--timeout=10s', ip], 60_000)).stdout;
    } catch (e) {
      const err = e as { stdout?: string; stderr?: string };
      if (err.stderr?.includes('direct connection not established') && err.stdout) return err.stdout;
      throw e;
    }
  }

  test.serial('two official clients join with the https:// login URL directly and ping each other via DERP(hse)', async (t) => {
    await hse('users', 'create', 'tlsuser');
    const key = (JSON.parse(await hse('keys', 'create', '--user', 'tlsuser', '--reusable', '--json')) as { key: string }).key;
    const names = ['tls-a', 'tls-b'];
    for (const name of names) {
      const n = new TsNode({ name, env: { SSL_CERT_FILE: ca!.caFile } });
      nodes.push(n);
      await n.start();
    }
    const [a, b] = nodes;
    const login = img!.publicUrl;
    t.regex(login, /^https:\/\/127\.0\.0\.1:\d+$/);
    await Promise.all([a.up(login, [`--auth-key=${key}`]), b.up(login, [`--auth-key=${key}`])]);
    const sa = await a.waitFor((x) => running(x) && a.peers(x).some((p) => p.HostName === names[1] && p.Online), `${names[0]} to see ${names[1]} online`);
    await b.waitFor((x) => running(x) && b.peers(x).some((p) => p.HostName === names[0] && p.Online), `${names[1]} to see ${names[0]} online`);
    const peer = a.peers(sa).find((p) => p.HostName === names[1])!;
    const stdout = await pingViaRelay(a, peer.TailscaleIPs[0]);
    t.regex(stdout, new RegExp(`pong from ${names[1]}`));
    t.regex(stdout, /via DERP\(hse\)/);
  });
}
