// Taildrive with the official client (v1.102.3) through the router. The policy's nodeAttrs give "drive:share" and
// "drive:access", and a grant of tailscale.com/cap/drive says who may read which shares. A device with drive:share
// shares a folder (`tailscale drive share`, listed by `tailscale drive list`); a device without it is refused by its own
// client. An allowed device of the same user lists the share and reads a file through its local Taildrive WebDAV
// server, http://100.100.100.100:8080/<tailnet>/<device>/<share>/ — the way a user mounts it. That server is not
// reachable from the host in userspace networking (tailscaled's proxies and `tailscale nc` dial 100.100.100.100 outside
// netstack), so this one device runs with a real TUN device inside a network namespace of the test's own
// (test/harness/netns.ts). A device of another user without the grant asks the sharer's PeerAPI directly (through its
// tailscaled's HTTP proxy) and is refused by the sharer until a grant names its user. Removing a grant takes the
// access away from running clients.
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import test from 'ava';
import { canUseNetns, createNetns, type Netns } from '../harness/netns.ts';
import { freePort, NODE } from '../harness/process.ts';
import { haveTailscale } from '../harness/tailscale.ts';
import { startTailnet, type Tailnet, tryCli, until } from '../harness/tailnet.ts';

const OPEN = { acls: [{ action: 'accept', src: ['*'], dst: ['*:*'] }] };
const ATTRS = {
  nodeAttrs: [
    { target: ['alice@'], attr: ['drive:share', 'drive:access'] },
    { target: ['bob@'], attr: ['drive:access'] },
  ],
};
const DRIVE = {
  ...OPEN,
  ...ATTRS,
  grants: [{ src: ['alice@'], dst: ['alice@'], app: { 'tailscale.com/cap/drive': [{ shares: ['docs'], access: 'ro' }] } }],
};
const NO_GRANT = { ...OPEN, ...ATTRS };
const CONTENT = 'quarterly numbers: 42\n'.repeat(500);

// An HTTP request made from inside the namespace (the reader's side), printed as JSON: status and body.
const HTTP_CLIENT = `
const http = require('node:http');
const [method, url] = process.argv.slice(1);
const req = http.request(url, { method, headers: method === 'PROPFIND' ? { Depth: '1' } : {} }, (res) => {
  let body = '';
  res.setEncoding('utf8');
  res.on('data', (d) => { body += d; });
  res.on('end', () => console.log(JSON.stringify({ status: res.statusCode, body })));
});
req.on('error', (e) => console.log(JSON.stringify({ status: 0, body: e.message })));
req.end();
`;

interface HttpResult {
  status: number;
  body: string;
}

if (!haveTailscale()) {
  test('official Tailscale client is installed', (t) => t.fail('tailscaled/tailscale not found; run .ci/run or go install them (see README)'));
} else if (!canUseNetns()) {
  test('a network namespace with a TUN device is available', (t) => t.fail('the Taildrive test needs root, ip(8) and /dev/net/tun (see .ci/run)'));
} else {
  let net: Tailnet;
  let ns: Netns;
  let proxyPort: number;
  const shared = fs.mkdtempSync(path.join(os.tmpdir(), 'hse-taildrive-'));

  /** A WebDAV request to the reader's local Taildrive server, from inside its namespace. */
  async function fromReader(method: string, urlPath: string): Promise<HttpResult> {
    const { stdout } = await ns.exec(NODE, ['-e', HTTP_CLIENT, method, `http://100.100.100.100:8080${urlPath}`], 60_000);
    return JSON.parse(stdout) as HttpResult;
  }

  /** A request through the stranger's tailscaled, whose HTTP proxy dials the absolute URL through the tailnet. */
  function fromStranger(method: string, url: string): Promise<HttpResult> {
    return new Promise((resolve) => {
      const req = http.request({ host: '127.0.0.1', port: proxyPort, method, path: url }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => {
          body += d;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      });
      req.on('error', (e) => resolve({ status: 0, body: e.message }));
      req.end();
    });
  }

  test.before(async () => {
    fs.writeFileSync(path.join(shared, 'report.txt'), CONTENT);
    const port = await freePort();
    proxyPort = await freePort();
    ns = await createNetns('drive');
    await ns.bridgeTcp(port);
    net = await startTailnet({
      port,
      users: { alice: ['files', 'reader'], bob: ['stranger'] },
      devices: {
        reader: { tun: { name: 'tsdrive0', wrap: ns.wrap }, upArgs: ['--netfilter-mode=off'] },
        stranger: { daemonArgs: [`--outbound-http-proxy-listen=127.0.0.1:${proxyPort}`] },
      },
      policy: JSON.stringify(DRIVE),
    });
  });

  test.after.always(async () => {
    await net?.stop();
    await ns?.destroy();
    fs.rmSync(shared, { recursive: true, force: true });
  });

  test.serial('tailscale drive share works on a device with drive:share and is refused on one without', async (t) => {
    const refused = await tryCli(net.node('stranger'), ['drive', 'share', 'docs', shared]);
    t.not(refused.code, 0);
    t.regex(refused.stderr, /taildrive sharing not enabled.*drive:share/);
    const ok = await tryCli(net.node('files'), ['drive', 'share', 'docs', shared]);
    t.is(ok.code, 0, ok.stderr);
    const list = await tryCli(net.node('files'), ['drive', 'list']);
    t.regex(list.stdout, new RegExp(`docs\\s+${shared.replaceAll('/', '\\/')}`));
  });

  test.serial('an allowed device of the same user lists the share and reads the file through its Taildrive server', async (t) => {
    const listing = await until(
      'the share at the reader',
      () => fromReader('PROPFIND', '/hse.internal/files/docs/'),
      (r) => r.status === 207 && r.body.includes('report.txt'),
      90_000,
    ).catch((e: Error) => {
      throw new Error(`${e.message}\n${net.logs().slice(-12_000)}`);
    });
    t.regex(listing.body, /\/hse\.internal\/files\/docs\/report\.txt/);
    // The tailnet's folder lists the devices sharing with this one: the sharer is there only when the reader's map
    // marks it a sharer (tailscale.com/cap/drive-sharer, which hse adds beside every drive grant), online, with a PeerAPI.
    const root = await fromReader('PROPFIND', '/hse.internal/');
    t.is(root.status, 207);
    t.regex(root.body, /<D:href>\/hse\.internal\/files\/<\/D:href>/);
    t.notRegex(root.body, /\/hse\.internal\/stranger\//);
    const file = await fromReader('GET', '/hse.internal/files/docs/report.txt');
    t.is(file.status, 200);
    t.is(file.body, CONTENT);
  });

  test.serial('a device of another user is refused by the sharer until a grant names its user', async (t) => {
    const s = await net.node('stranger').status();
    const files = Object.values(s.Peer ?? {}).find((p) => p.HostName === 'files') as unknown as { PeerAPIURL?: string[] };
    const base = files.PeerAPIURL?.find((u) => u.startsWith('http://100.'));
    t.truthy(base, 'the sharer advertises its PeerAPI');
    const url = `${base}/v0/drive/docs/report.txt`;
    const refused = await fromStranger('GET', url);
    t.is(refused.status, 403);
    t.regex(refused.body, /taildrive not permitted/);

    await net.setPolicy(
      JSON.stringify({
        ...DRIVE,
        grants: [...DRIVE.grants, { src: ['bob@'], dst: ['alice@'], app: { 'tailscale.com/cap/drive': [{ shares: ['*'], access: 'ro' }] } }],
      }),
    );
    const allowed = await until(
      'the stranger let in',
      () => fromStranger('GET', url),
      (r) => r.status === 200,
    );
    t.is(allowed.body, CONTENT);

    await net.setPolicy(JSON.stringify(DRIVE));
    const again = await until(
      'the stranger refused again',
      () => fromStranger('GET', url),
      (r) => r.status === 403,
    );
    t.regex(again.body, /taildrive not permitted/);
  });

  test.serial('removing the grant takes the share away from the running reader', async (t) => {
    await net.setPolicy(JSON.stringify(NO_GRANT));
    const gone = await until(
      'the share gone at the reader',
      () => fromReader('GET', '/hse.internal/files/docs/report.txt'),
      (r) => r.status !== 200,
      60_000,
    );
    t.not(gone.body, CONTENT);
    const root = await fromReader('PROPFIND', '/hse.internal/');
    t.notRegex(root.body, /\/hse\.internal\/files/);
  });

  test.serial('removing drive:share stops the running sharer from sharing', async (t) => {
    await net.setPolicy(JSON.stringify(OPEN));
    const refused = await until(
      'drive list refused on the sharer',
      () => tryCli(net.node('files'), ['drive', 'list']),
      (r) => r.code !== 0,
    );
    t.regex(refused.stderr, /taildrive sharing not enabled.*drive:share/);
    const again = await tryCli(net.node('files'), ['drive', 'share', 'more', shared]);
    t.not(again.code, 0);
  });
}
