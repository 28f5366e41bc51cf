// DNS settings with the official Tailscale client (v1.102.3) through the router: an operator sets nameservers, split
// DNS, search domains and extra records with `hse dns set`, and a running client shows them in `tailscale dns status`
// and answers from them in `tailscale dns query` — the extra record from its own host table, the split-DNS domain by
// asking the test's own DNS server on loopback (which records every question, so the answer cannot have come from
// elsewhere). A refused setting leaves the previous one in force; a change reaches the client without a restart. And a
// feature this server does not offer (HTTPS certificates for `tailscale serve`) is refused in words the user sees.
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import test from 'ava';
import { startDnsServer, type DnsServer } from '../harness/dns-server.ts';
import { startImage, type Image } from '../harness/image.ts';
import { NODE, ROOT } from '../harness/process.ts';
import { haveTailscale, TsNode } from '../harness/tailscale.ts';

const exec = promisify(execFile);

if (!haveTailscale()) {
  test('official Tailscale client is installed', (t) => t.fail('tailscaled/tailscale not found; run .ci/run or go install them (see README)'));
} else {
  let image: Image;
  let node: TsNode;
  let split: DnsServer;

  /** `hse` with `input` on standard input; resolves with the exit code and both outputs (never rejects). */
  function hse(args: string[], input?: string): Promise<{ code: number; stdout: string; stderr: string }> {
    return new Promise((resolve) => {
      const p = execFile(NODE, [path.join(ROOT, 'bin/hse.ts'), ...args], { env: { ...image.env, PATH: process.env.PATH } }, (e, stdout, stderr) =>
        resolve({ code: e ? ((e as { code?: number }).code ?? 1) : 0, stdout, stderr }),
      );
      p.stdin!.end(input ?? '');
    });
  }

  async function dnsStatus(): Promise<string> {
    return (await node.cli(['dns', 'status'])).stdout;
  }

  /** `tailscale dns query`; the CLI exits non-zero for some answers, so its output is read either way. */
  async function query(name: string): Promise<string> {
    return node.cli(['dns', 'query', name, 'A']).then(
      (r) => r.stdout,
      (e: { stdout?: string; stderr?: string }) => `${e.stdout ?? ''}${e.stderr ?? ''}`,
    );
  }

  async function until<T>(what: string, get: () => Promise<T>, ok: (v: T) => boolean, ms = 20_000): Promise<T> {
    const deadline = Date.now() + ms;
    let last: T = await get();
    while (!ok(last)) {
      if (Date.now() > deadline)
        throw new Error(`timed out waiting for ${what}; last: ${String(last).slice(0, 3000)}\n--- tailscaled ---\n${node.output().slice(-4000)}`);
      await new Promise((r) => setTimeout(r, 200));
      last = await get();
    }
    return last;
  }

  test.before(async () => {
    image = await startImage({});
    split = await startDnsServer({ 'db.corp.test': ['10.9.8.7'] });
    await hse(['users', 'create', 'alice']);
    const key = JSON.parse((await hse(['keys', 'create', '--user', 'alice', '--reusable', '--json'])).stdout).key as string;
    node = new TsNode({ name: 'resolver', env: { TS_DEBUG_USE_DERP_HTTP: '1' } });
    await node.start();
    await node.up(image.url, [`--auth-key=${key}`]);
    // --accept-dns: the client takes the routes and search domains (userspace networking leaves the OS alone).
    await node.cli(['set', '--accept-dns=true']);
    await node.waitFor((s) => s.BackendState === 'Running', 'running');
  });

  test.after.always(async () => {
    await node?.destroy();
    await split?.stop();
    await image?.stop();
  });

  const SETTINGS = () => ({
    magicDNS: true,
    overrideLocalDNS: true,
    nameservers: ['9.9.9.9', '2606:4700:4700::1111'],
    splitDNS: { 'corp.test': [split.addr] },
    searchDomains: ['corp.test', 'example.org'],
    extraRecords: [{ name: 'grafana.hse.internal', type: 'A', value: '100.64.0.7' }],
  });

  test.serial('with no settings, the client gets MagicDNS and nothing else', async (t) => {
    const status = await dnsStatus();
    t.regex(status, /MagicDNS: enabled tailnet-wide \(suffix = hse\.internal\)/, status);
    t.regex(status, /Resolvers \(in preference order\):\s*\n\s*\(no resolvers configured/, status);
    t.regex(status, /Search Domains:\s*\n\s*- hse\.internal\s*\n/, status);
  });

  test.serial('tailscale dns status shows the nameservers, split domains and search domains set with hse dns set', async (t) => {
    const set = await hse(['dns', 'set', '-'], JSON.stringify(SETTINGS()));
    t.is(set.code, 0, set.stderr);
    t.regex(set.stderr, /DNS settings saved/);
    t.deepEqual(JSON.parse(set.stdout), SETTINGS(), 'the saved settings are printed back');
    // The client was running all along: the change arrives on its open map stream.
    const status = await until('the new resolvers in dns status', dnsStatus, (s) => s.includes('9.9.9.9'));
    t.regex(status, /Resolvers \(in preference order\):\s*\n\s*- 9\.9\.9\.9\s*\n\s*- 2606:4700:4700::1111/, status);
    t.regex(status, new RegExp(`Split DNS Routes:\\s*\\n\\s*- corp\\.test\\.?\\s+-> ${split.addr.replace(/\./g, '\\.')}`), status);
    t.regex(status, /Search Domains:\s*\n\s*- corp\.test\s*\n\s*- example\.org\s*\n\s*- hse\.internal/, status);
    const all = (await node.cli(['dns', 'status', '--all'])).stdout;
    t.regex(all, /grafana\.hse\.internal\.? +\[?A\]? *-> 100\.64\.0\.7|grafana\.hse\.internal.*100\.64\.0\.7/, all);
    t.notRegex(all, /Certificate Domains:\s*\n\s*- /, 'no certificate domains are sent');
  });

  test.serial('tailscale dns query answers the extra record from the client itself', async (t) => {
    const out = await query('grafana.hse.internal');
    t.regex(out, /RCodeSuccess/, out);
    t.regex(out, /grafana\.hse\.internal\.\s+\d+\s+ClassINET\s+TypeA\s+100\.64\.0\.7/, out);
    t.false(split.asked.includes('grafana.hse.internal'), 'the split-DNS server was not asked');
  });

  test.serial("a split-DNS domain is answered by that domain's own nameserver", async (t) => {
    const before = split.asked.length;
    const out = await query('db.corp.test');
    t.regex(out, /db\.corp\.test\.\s+\d+\s+ClassINET\s+TypeA\s+10\.9\.8\.7/, out);
    t.true(split.asked.slice(before).includes('db.corp.test'), `asked: ${JSON.stringify(split.asked)}`);
    const missing = await query('nothing.corp.test');
    t.regex(missing, /RCodeNameError/, missing);
    t.true(split.asked.includes('nothing.corp.test'));
  });

  test.serial('a refused DNS setting names the field and leaves the previous settings in force', async (t) => {
    const cases: [unknown, RegExp][] = [
      [{ ...SETTINGS(), splitDNS: { 'printers.hse.internal': ['10.0.0.1'] } }, /splitDNS: "printers\.hse\.internal" is the tailnet's own domain/],
      [{ ...SETTINGS(), nameservers: ['10.0.0.300'] }, /nameservers: "10\.0\.0\.300" is not an IPv4 or IPv6 address/],
      [
        { ...SETTINGS(), nameservers: ['https://doh.example.net/dns-query'] },
        /nameservers: "https:\/\/doh\.example\.net\/dns-query" is a DNS-over-HTTPS URL the Tailscale client cannot use/,
      ],
      [
        { ...SETTINGS(), extraRecords: [{ name: 'mail.example.org', type: 'MX', value: '10.0.0.5' }] },
        /extraRecords "mail\.example\.org": type "MX" is not supported/,
      ],
    ];
    for (const [doc, message] of cases) {
      const r = await hse(['dns', 'set', '-'], JSON.stringify(doc));
      t.is(r.code, 1);
      t.regex(r.stderr, message);
    }
    const notJson = await hse(['dns', 'set', '-'], '{"magicDNS": tru');
    t.is(notJson.code, 1);
    t.regex(notJson.stderr, /standard input is not JSON/);
    t.deepEqual(JSON.parse((await hse(['dns', 'get'])).stdout), SETTINGS());
    t.regex(await dnsStatus(), /- corp\.test\.?\s+-> 127\.0\.0\.1/, 'the client keeps the previous settings');
  });

  test.serial('a change reaches the running client without a restart, and every change is in the activity log', async (t) => {
    const changed = { ...SETTINGS(), extraRecords: [{ name: 'grafana.hse.internal', type: 'A', value: '100.64.0.8' }], searchDomains: [] };
    const started = Date.now();
    t.is((await hse(['dns', 'set', '-'], JSON.stringify(changed))).code, 0);
    const out = await until(
      'the new address',
      () => query('grafana.hse.internal'),
      (s) => s.includes('100.64.0.8'),
    );
    t.log(`new record answered ${Date.now() - started} ms after hse dns set returned`);
    t.notRegex(out, /100\.64\.0\.7/);
    const status = await dnsStatus();
    t.notRegex(status, /- example\.org/, status);

    const { stdout } = await exec('redis-cli', ['-s', image.redis!.socket, 'XREVRANGE', 'hse:activity', '+', '-', 'COUNT', '20']);
    t.regex(stdout, /dns\.change/);
    t.regex(stdout, /"searchDomains":\{"from":\["corp\.test","example\.org"\],"to":\[\]\}/);
    t.regex(stdout, /\bcli\b/);
  });

  test.serial('tailscale serve over HTTPS is refused with the reason: certificates are not available on this server', async (t) => {
    const r = await node.cli(['serve', '--bg', '--yes', '3000'], 30_000).then(
      () => ({ code: 0, out: '' }),
      (e: { code?: number; stdout?: string; stderr?: string }) => ({ code: e.code ?? 1, out: `${e.stdout ?? ''}${e.stderr ?? ''}` }),
    );
    t.not(r.code, 0);
    t.regex(r.out, /HTTPS certificates, Serve over HTTPS and Funnel are not available on this server \(hse\)/, r.out);
    t.is((await node.status()).BackendState, 'Running', 'the client is unharmed');
  });
}
