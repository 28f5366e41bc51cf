// A throwaway certificate authority and one server certificate for proxy-mode tests, made with the openssl CLI.
//
// The test "domain" is the IP literal 127.0.0.1: the certificate carries IP SAN 127.0.0.1 (and DNS localhost), and
// the public URL is https://127.0.0.1:<proxy port>. Why not a name: nothing may edit /etc/hosts on CI, and a name
// such as vpn.localhost resolves to loopback only where the system resolver special-cases it (Go's resolver, used
// by tailscaled, does not everywhere). An IP literal reaches the proxy from curl, Node and the official Tailscale
// client alike; Go verifies it against the IP SAN, and the DERP map then carries the address itself, so no DNS is
// involved. Clients trust the CA through SSL_CERT_FILE (Go, curl) or `ca` (Node).
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

export const TEST_DOMAIN = '127.0.0.1';

export interface TestCA {
  dir: string;
  /** The CA certificate (PEM file): SSL_CERT_FILE for Go and curl. */
  caFile: string;
  caPem: string;
  /** Server certificate (leaf then CA, as proxies want a full chain) and its key, for TEST_DOMAIN. */
  certFile: string;
  keyFile: string;
  remove(): void;
}

async function openssl(args: string[], cwd: string): Promise<void> {
  try {
    await run('openssl', args, { cwd });
  } catch (e) {
    const err = e as { stderr?: string; message: string };
    throw new Error(`openssl ${args[0]} failed (is the openssl package installed?): ${err.stderr ?? err.message}`);
  }
}

/** Creates a CA valid for a week and a server certificate for 127.0.0.1 and localhost signed by it. */
export async function createTestCA(): Promise<TestCA> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hse-ca-'));
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  await openssl(
    [
      'req',
      '-x509',
      ...ec,
      '-keyout',
      'ca.key',
      '-out',
      'ca.pem',
      '-days',
      '7',
      '-subj',
      '/CN=hse throwaway test CA',
      '-addext',
      'basicConstraints=critical,CA:TRUE',
      '-addext',
      'keyUsage=critical,keyCertSign,cRLSign',
    ],
    dir,
  );
  await openssl(['req', ...ec, '-keyout', 'server.key', '-out', 'server.csr', '-subj', `/CN=${TEST_DOMAIN}`], dir);
  fs.writeFileSync(
    path.join(dir, 'server.ext'),
    `${[
      `subjectAltName=IP:${TEST_DOMAIN},DNS:localhost`,
      'basicConstraints=critical,CA:FALSE',
      'keyUsage=critical,digitalSignature',
      'extendedKeyUsage=serverAuth',
    ].join('\n')}\n`,
  );
  await openssl(
    ['x509', '-req', '-in', 'server.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'server.pem', '-days', '7', '-extfile', 'server.ext'],
    dir,
  );
  const caPem = fs.readFileSync(path.join(dir, 'ca.pem'), 'utf8');
  const chain = path.join(dir, 'fullchain.pem');
  fs.writeFileSync(chain, fs.readFileSync(path.join(dir, 'server.pem'), 'utf8') + caPem);
  for (const f of ['ca.key', 'server.key']) fs.chmodSync(path.join(dir, f), 0o600);
  // Proxies that drop privileges (nginx workers) read the key at start as root; the directory only needs to be
  // reachable for the files it names.
  fs.chmodSync(dir, 0o755);
  return {
    dir,
    caFile: path.join(dir, 'ca.pem'),
    caPem,
    certFile: chain,
    keyFile: path.join(dir, 'server.key'),
    remove: () => fs.rmSync(dir, { recursive: true, force: true }),
  };
}
