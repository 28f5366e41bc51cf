// The six checks of advanced/proxy.md, run as an operator would paste them — the documented shell blocks, with only the
// public URL and the password filled in (doc-checks.ts) — against the whole image in proxy mode behind the nginx
// example. curl finds the test CA and the client address 127.0.0.2 (a machine that is not the proxy) in its own config
// file, so the commands stay exactly as printed. Check 6's printed configuration is compared with what the real
// Compose CLI renders; its commands for a running container are run against the built image in test/image/.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import test from 'ava';
import { createTestCA, TEST_DOMAIN, type TestCA } from '../harness/ca.ts';
import { startImage, type Image } from '../harness/image.ts';
import { findBinary, freePort, ROOT } from '../harness/process.ts';
import { missingProxy, startProxy, type RunningProxy } from '../harness/proxies.ts';
import { blockWith, commandLines, operatorLaptop, runChecks1to5, type Laptop } from './doc-checks.ts';
import { waitProxied } from './https-client.ts';

const run = promisify(execFile);
const PASSWORD = 'doc checks password';

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
  let laptop: Laptop;
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
    laptop = operatorLaptop(ca.caFile);
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
    laptop?.remove();
    if (home) fs.rmSync(home, { recursive: true, force: true });
  });

  test('checks 1 to 5, pasted as documented, pass through the proxy', async (t) => {
    const out = await runChecks1to5(laptop, proxy.url, PASSWORD, () => `${image.logs()}\n${proxy.output()}`);
    t.regex(out.key, /^\{.*"publicKey":"mkey:[0-9a-f]{64}".*\}$/, 'check 1');
    t.is(out.redirect, `302 ${proxy.url}/console/login`, 'check 2');
    t.regex(out.cookie, /^set-cookie: __Secure-hse_session=[^;]+;.*\bsecure\b/i, 'check 3');
    t.is(out.ip, '"ip":"127.0.0.2"', 'checks 4 and 5: the client, not the proxy (127.0.0.1) or the forged 203.0.113.x');
  });

  test('check 6, pasted as documented, prints exactly the ports the document shows', async (t) => {
    const block = blockWith('The six checks', 'config --format json');
    const command = commandLines(block).join('\n');
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
