// The six checks of advanced/proxy.md, run as an operator would paste them — the documented shell blocks, with only the
// public URL and the password filled in — against the whole image in proxy mode behind the nginx example. curl finds
// the test CA and the client address 127.0.0.2 (a machine that is not the proxy) in its own config file, so the
// commands stay exactly as printed. Check 6's printed output is compared with what the real Compose CLI renders.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import test from 'ava';
import { createTestCA, TEST_DOMAIN, type TestCA } from '../harness/ca.ts';
import { startImage, type Image } from '../harness/image.ts';
import { findBinary, freePort, ROOT } from '../harness/process.ts';
import { missingProxy, startProxy, substitute, type RunningProxy } from '../harness/proxies.ts';
import { waitProxied } from './https-client.ts';

const run = promisify(execFile);
const DOC = path.join(ROOT, 'advanced/proxy.md');
const PASSWORD = 'doc checks password';

/** The shell blocks of the "The six checks" section, in order. */
function checkBlocks(): string[] {
  const doc = fs.readFileSync(DOC, 'utf8');
  const start = doc.indexOf('\n## The six checks');
  const end = doc.indexOf('\n## ', start + 1);
  if (start < 0) throw new Error('advanced/proxy.md has no "## The six checks" section');
  return [...doc.slice(start, end).matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]);
}

const needs = [
  missingProxy('nginx'),
  findBinary('curl') ? null : 'curl not found; apt-get install curl',
  findBinary('jq') ? null : 'jq not found; apt-get install jq',
];
const COMPOSE = findBinary('docker-compose');
if (!COMPOSE) needs.push('docker-compose not found; run bash .ci/install-proxies.sh');
const missing = needs.filter((x) => x !== null);

if (missing.length > 0) {
  test('what the documented checks need is installed', (t) => t.fail(missing.join('; ')));
} else {
  let ca: TestCA;
  let image: Image;
  let proxy: RunningProxy;
  let home: string;

  test.before(async () => {
    ca = await createTestCA();
    home = fs.mkdtempSync(path.join(os.tmpdir(), 'hse-doc-'));
    const ports = { https: await freePort(), http: await freePort() };
    image = await startImage({
      publicUrl: `https://${TEST_DOMAIN}:${ports.https}`,
      env: { HSE_TLS: 'off', HSE_TRUSTED_PROXIES: '127.0.0.1/32', HSE_CONSOLE_PASSWORD: PASSWORD },
    });
    proxy = await startProxy('nginx', { domain: TEST_DOMAIN, upstream: { host: '127.0.0.1', port: image.port }, ca, ports });
    await waitProxied(proxy.url, ca.caPem);
    // The operator's laptop: trusts the proxy's CA and is not the proxy.
    fs.writeFileSync(path.join(home, '.curlrc'), `cacert = "${ca.caFile}"\ninterface = 127.0.0.2\n`);
    // `docker compose` is the Compose CLI; here it is the standalone binary.
    fs.mkdirSync(path.join(home, 'bin'));
    fs.writeFileSync(
      path.join(home, 'bin/docker'),
      `#!/bin/sh\n[ "$1" = compose ] || { echo "only docker compose here" >&2; exit 1; }\nshift\nexec "${COMPOSE}" "$@"\n`,
      { mode: 0o755 },
    );
  });

  test.after.always(async () => {
    await proxy?.stop();
    await image?.stop();
    ca?.remove();
    if (home) fs.rmSync(home, { recursive: true, force: true });
  });

  test('checks 1 to 5, pasted as documented, pass through the proxy', async (t) => {
    let block = checkBlocks()[0];
    block = substitute(block, /^HSE=https:\/\/vpn\.example\.com/gm, `HSE=${proxy.url}`, 'proxy.md');
    block = substitute(block, /^PW='[^']*'/gm, `PW='${PASSWORD}'`, 'proxy.md');
    const { stdout } = await run('bash', ['-e', '-o', 'pipefail', '-c', block], {
      env: { PATH: process.env.PATH, HOME: home, CURL_HOME: home },
      cwd: home,
    }).catch((e) => {
      throw new Error(`the documented checks failed: ${e.stderr}\n${e.stdout}\n${image.logs()}\n${proxy.output()}`);
    });
    const lines = stdout.trim().split('\n');
    t.is(lines.length, 4, stdout);
    t.regex(lines[0], /^\{.*"publicKey":"mkey:[0-9a-f]{64}".*\}$/, 'check 1');
    t.is(lines[1], `302 ${proxy.url}/console/login`, 'check 2');
    t.regex(lines[2], /^set-cookie: __Secure-hse_session=[^;]+;.*\bsecure\b/i, 'check 3');
    t.is(lines[3], '"ip":"127.0.0.2"', 'checks 4 and 5: the client, not the proxy (127.0.0.1) or the forged 203.0.113.x');
  });

  test('check 6, pasted as documented, prints exactly the ports the document shows', async (t) => {
    const block = checkBlocks()[1];
    const command = block
      .split('\n')
      .filter((l) => l.trim() !== '' && !l.startsWith('#'))
      .join('\n');
    const shown = block
      .split('\n')
      .filter((l) => /^#\s+[[{]/.test(l))
      .map((l) => l.replace(/^#\s+/, ''))
      .join('');
    const { stdout } = await run('bash', ['-e', '-o', 'pipefail', '-c', command], {
      env: { PATH: `${path.join(home, 'bin')}:${process.env.PATH}`, HOME: home, HSE_PUBLIC_URL: 'https://vpn.example.com' },
      cwd: ROOT,
    });
    t.deepEqual(JSON.parse(stdout), JSON.parse(shown));
  });
}
