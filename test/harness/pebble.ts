// Pebble, Let's Encrypt's ACME test CA, and pebble-challtestsrv as its DNS server, for TLS-mode tests on loopback.
// Both are the pinned `go install` builds (.ci/install-tls.sh). Each startPebble() runs its own pair on free ports:
//
//   router ──ACME (https)──► pebble :api           (its API certificate comes from a throwaway test CA; the router
//                                                   trusts it through NODE_EXTRA_CA_CERTS = caFile)
//   pebble ──DNS──► challtestsrv :dns              (names point at 127.0.0.1 only once addA() says so)
//   pebble ──HTTP-01──► 127.0.0.1:<httpPort>       (the router's HSE_TLS_HTTP_PORT)
//   test   ──https──► pebble :management /roots/0  (the root that signs issued certificates: what clients trust)
//
// Determinism: no random validation sleeps (PEBBLE_VA_NOSLEEP), no random nonce rejections
// (PEBBLE_WFE_NONCEREJECT=0), no authorization reuse (PEBBLE_AUTHZREUSE=0, so a renewal really validates again).
// `validitySeconds` makes short-lived certificates, which is how a test sees a renewal.
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { createTestCA, type TestCA } from './ca.ts';
import { freePorts, GOBIN, HEAD_AND_TAIL, startProcess, type Proc } from './process.ts';

export const PEBBLE_VERSION = 'v2.10.1';
export const PEBBLE = path.join(GOBIN, 'pebble');
export const CHALLTESTSRV = path.join(GOBIN, 'pebble-challtestsrv');

/** A reason the tests cannot run, or null. */
export function missingPebble(): string | null {
  for (const bin of [PEBBLE, CHALLTESTSRV]) {
    if (!fs.existsSync(bin)) return `${bin} not found; run .ci/install-tls.sh (go install github.com/letsencrypt/pebble/v2/cmd/...@${PEBBLE_VERSION})`;
  }
  return null;
}

export interface PebbleOptions {
  /** Port Pebble's validator connects to for HTTP-01: the router's HSE_TLS_HTTP_PORT. */
  httpPort: number;
  /** Lifetime of issued certificates. Default 90 days. */
  validitySeconds?: number;
}

export interface Pebble {
  /** HSE_ACME_DIRECTORY_URL. */
  directoryUrl: string;
  /** CA file for Pebble's own API certificate: NODE_EXTRA_CA_CERTS for the router. */
  apiCaFile: string;
  /** The root that issued certificates chain to (PEM), for clients of the router. */
  rootPem(): Promise<string>;
  /** Points `host` at `addresses` in challtestsrv's DNS. */
  addA(host: string, addresses: string[]): Promise<void>;
  output(): string;
  stop(): Promise<void>;
}

function request(url: string, ca: string, body?: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = https.request(url, { method: body === undefined ? 'GET' : 'POST', ca, agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

export async function startPebble(opts: PebbleOptions): Promise<Pebble> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hse-pebble-'));
  let ca: TestCA | null = null;
  const procs: Proc[] = [];
  const options = (env: Record<string, string> = {}) => ({ env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...env }, keep: HEAD_AND_TAIL });
  const stopAll = async () => {
    for (const p of [...procs].reverse()) await p.stop('SIGTERM', 5000);
  };
  try {
    ca = await createTestCA();
    const [api, mgmt, dnsPort, dnsMgmt] = await freePorts(4);
    // challtestsrv: DNS and its management API only (no challenge servers of its own: the router answers HTTP-01).
    // No default addresses, so a name resolves only after addA().
    const chall = startProcess(
      'pebble-challtestsrv',
      CHALLTESTSRV,
      [
        '-http01',
        '',
        '-https01',
        '',
        '-doh',
        '',
        '-tlsalpn01',
        '',
        '-dnsserver',
        `127.0.0.1:${dnsPort}`,
        '-management',
        `127.0.0.1:${dnsMgmt}`,
        '-defaultIPv4',
        '',
        '-defaultIPv6',
        '',
      ],
      options(),
    );
    procs.push(chall);
    await chall.waitFor(/Starting management server/, 20_000);
    const validity = opts.validitySeconds ?? 90 * 86_400;
    const config = {
      pebble: {
        listenAddress: `127.0.0.1:${api}`,
        managementListenAddress: `127.0.0.1:${mgmt}`,
        certificate: ca.certFile,
        privateKey: ca.keyFile,
        httpPort: opts.httpPort,
        tlsPort: 1,
        ocspResponderURL: '',
        externalAccountBindingRequired: false,
        retryAfter: { authz: 1, order: 1 },
        keyAlgorithm: 'ecdsa',
        profiles: { default: { description: 'hse tests', validityPeriod: validity } },
      },
    };
    const configFile = path.join(dir, 'pebble.json');
    fs.writeFileSync(configFile, JSON.stringify(config, null, 2));
    const pebble = startProcess(
      'pebble',
      PEBBLE,
      ['-config', configFile, '-dnsserver', `127.0.0.1:${dnsPort}`],
      options({
        PEBBLE_VA_NOSLEEP: '1',
        PEBBLE_WFE_NONCEREJECT: '0',
        PEBBLE_AUTHZREUSE: '0',
      }),
    );
    procs.push(pebble);
    await pebble.waitFor(/ACME directory available/, 20_000);
    const caPem = ca.caPem;
    const caFile = ca.caFile;
    return {
      directoryUrl: `https://127.0.0.1:${api}/dir`,
      apiCaFile: caFile,
      async rootPem() {
        const r = await request(`https://127.0.0.1:${mgmt}/roots/0`, caPem);
        if (r.status !== 200) throw new Error(`pebble /roots/0 answered ${r.status}: ${r.body}`);
        return r.body;
      },
      async addA(host, addresses) {
        const status = await new Promise<number>((resolve, reject) => {
          const req = http.request(`http://127.0.0.1:${dnsMgmt}/add-a`, { method: 'POST' }, (res) => {
            res.resume();
            resolve(res.statusCode ?? 0);
          });
          req.on('error', reject);
          req.end(JSON.stringify({ host, addresses }));
        });
        if (status !== 200) throw new Error(`challtestsrv /add-a answered ${status}`);
      },
      output: () => procs.map((p) => `----- ${p.name} -----\n${p.output()}`).join('\n'),
      async stop() {
        await stopAll();
        ca?.remove();
        fs.rmSync(dir, { recursive: true, force: true });
      },
    };
  } catch (e) {
    await stopAll();
    ca?.remove();
    fs.rmSync(dir, { recursive: true, force: true });
    throw e;
  }
}
