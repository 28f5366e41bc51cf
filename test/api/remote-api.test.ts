// The remote API through the router, driven by the official Go client for Tailscale's API (test/apiclient, pinned
// tailscale.com/client/tailscale/v2) with only its base URL pointed at hse, and an official Tailscale client (pinned)
// that joins with the auth key the API made. Behind a trusted "proxy" (the test itself, HSE_TRUSTED_PROXIES=127.0.0.1)
// so each test can speak from its own client address and the activity log's address can be checked.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import test from 'ava';
import { Redis } from 'ioredis';
import { K } from '../../shared/redis-keys.ts';
import { goTool } from '../harness/go-tools.ts';
import { startImage, type Image } from '../harness/image.ts';
import { NODE, ROOT } from '../harness/process.ts';
import { haveTailscale, TsNode } from '../harness/tailscale.ts';

const exec = promisify(execFile);

interface Device {
  id: string;
  nodeId: string;
  hostname: string;
  name: string;
  tags: string[];
  authorized: boolean;
  addresses: string[];
  AdvertisedRoutes?: string[];
  advertisedRoutes?: string[];
  enabledRoutes: string[];
  connectedToControl: boolean;
}

if (!haveTailscale()) {
  test('official Tailscale client is installed', (t) => t.fail('tailscaled/tailscale not found; run .ci/run or go install them (see README)'));
} else {
  let image: Image;
  let client: string;
  let adminKey: string;
  let readKey: string;
  const nodes: TsNode[] = [];
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hse-api-'));

  async function hse(...args: string[]): Promise<string> {
    const { stdout } = await exec(NODE, [path.join(ROOT, 'bin/hse.ts'), ...args], { env: { ...image.env, PATH: process.env.PATH } });
    return stdout;
  }

  /** Runs the Go client: its JSON, and whether it succeeded (an API error is {"error", "status"}). */
  async function api<T = Record<string, unknown>>(key: string, ...args: string[]): Promise<{ ok: boolean; out: T & { status?: number; error?: string } }> {
    try {
      const { stdout } = await exec(client, ['-base', image.url, '-key', key, ...args], { timeout: 90_000 });
      return { ok: true, out: JSON.parse(stdout) };
    } catch (e) {
      const err = e as { stdout?: string; stderr?: string; message: string };
      if (!err.stdout) throw new Error(`hse-apiclient ${args.join(' ')} failed: ${err.stderr ?? err.message}`);
      return { ok: false, out: JSON.parse(err.stdout) };
    }
  }

  async function activity(action: string): Promise<{ actor: string; ip: string; target: string }[]> {
    const r = new Redis(image.redis!.url);
    try {
      const rows = (await r.xrevrange(K.activity, '+', '-', 'COUNT', 500)) as [string, string[]][];
      return rows
        .map(([, f]) => Object.fromEntries(f.flatMap((v, i) => (i % 2 === 0 ? [[v, f[i + 1]]] : []))) as Record<string, string>)
        .filter((e) => e.action === action)
        .map((e) => ({ actor: e.actor, ip: e.ip, target: e.target }));
    } finally {
      r.disconnect();
    }
  }

  test.before(async () => {
    client = await goTool('apiclient');
    image = await startImage({ env: { HSE_TRUSTED_PROXIES: '127.0.0.1' } });
    adminKey = JSON.parse(await hse('apikeys', 'create', '--description', 'ci pipeline', '--json')).key;
    readKey = JSON.parse(await hse('apikeys', 'create', '--description', 'dashboard', '--read-only', '--expires', '30d', '--json')).key;
  });

  test.after.always(async () => {
    for (const n of nodes) await n.destroy();
    await image?.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  test.serial('the official Go client sets the policy file and reads it back with its comments', async (t) => {
    const policy = `// CI machines are tagged; everyone reaches everything.
{
  "tagOwners": { "tag:ci": [] },
  "grants": [{ "src": ["*"], "dst": ["*"], "ip": ["*"] }],
  "autoApprovers": { "routes": {} },
}
`;
    fs.writeFileSync(path.join(dir, 'policy.hujson'), policy);
    const set = await api<{ HuJSON: string; ETag: string }>(adminKey, 'set-policy', path.join(dir, 'policy.hujson'));
    t.true(set.ok, JSON.stringify(set.out));
    t.is(set.out.HuJSON, policy);
    const got = await api<{ HuJSON: string; ETag: string }>(adminKey, 'get-policy');
    t.is(got.out.HuJSON, policy);
    t.regex(got.out.ETag, /^"[0-9a-f]{32}"$/);
    const json = await api<{ tagOwners: Record<string, string[]> }>(adminKey, 'get-policy-json');
    t.deepEqual(json.out.tagOwners, { 'tag:ci': [] });
    // A write against an ETag that is no longer current is refused, and the policy stays.
    const stale = await api(adminKey, 'set-policy-stale', path.join(dir, 'policy.hujson'), '0123456789abcdef0123456789abcdef');
    t.false(stale.ok);
    t.is(stale.out.status, 412);
    const bad = path.join(dir, 'bad.hujson');
    fs.writeFileSync(bad, '{ "grants": [{ "src": ["nobody@"], "dst": ["*"], "ip": ["*"] }] }');
    const v = await api<{ valid: boolean; message: string }>(adminKey, 'validate-policy', bad);
    t.false(v.out.valid);
    t.regex(v.out.message, /nobody@/);
    t.true((await activity('policy.change')).some((e) => e.actor === 'api:ci pipeline'));
  });

  test.serial('a tagged pre-authorized key made through the API lets an official client join, and the API lists it', async (t) => {
    const key = await api<{ key: string; id: string; capabilities: { devices: { create: { tags: string[]; preauthorized: boolean } } } }>(
      adminKey,
      'create-key',
      'tag:ci',
    );
    t.true(key.ok, JSON.stringify(key.out));
    t.regex(key.out.key, /^hse-auth-/);
    t.deepEqual(key.out.capabilities.devices.create.tags, ['tag:ci']);
    const n = new TsNode({ name: 'runner', env: { TS_DEBUG_USE_DERP_HTTP: '1' } });
    nodes.push(n);
    await n.start();
    await n.up(image.url, [`--auth-key=${key.out.key}`, '--advertise-routes=10.201.0.0/24']);
    await n.waitFor((s) => s.BackendState === 'Running', 'runner running');
    const list = await api<Device[]>(readKey, 'devices');
    t.true(list.ok);
    const runner = list.out.find((d) => d.hostname === 'runner');
    t.truthy(runner, JSON.stringify(list.out));
    t.deepEqual(runner!.tags, ['tag:ci']);
    t.true(runner!.authorized);
    t.regex(runner!.nodeId, /^n[0-9a-f]{16}$/);
    t.is(runner!.name, 'runner.hse.internal');
    const byStable = await api<Device>(readKey, 'device', runner!.nodeId);
    t.is(byStable.out.id, runner!.id);
  });

  test.serial('approving an advertised route through the API enables it, logged with the key and the address', async (t) => {
    const runner = (await api<Device[]>(readKey, 'devices')).out.find((d) => d.hostname === 'runner')!;
    // The advertisement reaches the server with the client's next Hostinfo; wait for the API to show it.
    for (let i = 0; i < 80; i++) {
      const r = await api<{ advertisedRoutes: string[] }>(readKey, 'routes', runner.nodeId);
      if (r.out.advertisedRoutes?.includes('10.201.0.0/24')) break;
      await new Promise((res) => setTimeout(res, 250));
    }
    const r = await api<{ advertisedRoutes: string[]; enabledRoutes: string[] }>(adminKey, 'set-routes', runner.nodeId, '10.201.0.0/24');
    t.true(r.ok, JSON.stringify(r.out));
    t.deepEqual(r.out.advertisedRoutes, ['10.201.0.0/24']);
    t.deepEqual(r.out.enabledRoutes, ['10.201.0.0/24']);
    const logged = (await activity('route.approve')).find((e) => e.actor === 'api:ci pipeline');
    t.is(logged?.target, 'runner');
    t.is(logged?.ip, '127.0.0.1');
  });

  test.serial('setting DNS nameservers through the API changes what the console and the CLI show', async (t) => {
    const r = await api<string[]>(adminKey, 'set-nameservers', '1.1.1.1', '2606:4700:4700::1111');
    t.true(r.ok, JSON.stringify(r.out));
    t.deepEqual(r.out, ['1.1.1.1', '2606:4700:4700::1111']);
    t.deepEqual(JSON.parse(await hse('dns', 'get')).nameservers, ['1.1.1.1', '2606:4700:4700::1111']);
  });

  test.serial("the tailnet settings show hse's key lifetime; a change the API cannot make is refused with the setting to use", async (t) => {
    const s = await api<{ devicesKeyDurationDays: number; devicesApprovalOn: boolean }>(readKey, 'settings');
    t.true(s.ok, JSON.stringify(s.out));
    t.is(s.out.devicesKeyDurationDays, 180);
    const r = await fetch(`${image.url}/api/v2/tailnet/-/settings`, {
      method: 'PATCH',
      headers: { authorization: `Bearer ${adminKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ devicesKeyDurationDays: 30 }),
    });
    t.is(r.status, 400);
    t.regex(((await r.json()) as { message: string }).message, /HSE_NODE_KEY_EXPIRY/);
  });

  test.serial('a read-only key reads but cannot change anything (403)', async (t) => {
    t.true((await api(readKey, 'users')).ok);
    const r = await api(readKey, 'set-nameservers', '9.9.9.9');
    t.false(r.ok);
    t.is(r.out.status, 403);
    t.deepEqual(JSON.parse(await hse('dns', 'get')).nameservers, ['1.1.1.1', '2606:4700:4700::1111']);
  });

  test.serial('a revoked key and an expired key get 401', async (t) => {
    const made = JSON.parse(await hse('apikeys', 'create', '--description', 'short lived', '--json')) as { key: string; id: number };
    t.true((await api(made.key, 'users')).ok);
    await hse('apikeys', 'revoke', String(made.id));
    const revoked = await api(made.key, 'users');
    t.is(revoked.out.status, 401);
    // Expiry: the same key record with its expiry moved into the past, as time would.
    const other = JSON.parse(await hse('apikeys', 'create', '--description', 'expiring', '--json')) as { key: string; id: number };
    const r = new Redis(image.redis!.url);
    try {
      const rec = JSON.parse((await r.hget(K.apiKeys, String(other.id)))!);
      await r.hset(K.apiKeys, String(other.id), JSON.stringify({ ...rec, expiration: new Date(Date.now() - 1000).toISOString() }));
    } finally {
      r.disconnect();
    }
    t.is((await api(other.key, 'users')).out.status, 401);
  });

  test.serial('deleting a device through the API removes it', async (t) => {
    const runner = (await api<Device[]>(readKey, 'devices')).out.find((d) => d.hostname === 'runner')!;
    const r = await api(adminKey, 'delete-device', runner.id);
    t.true(r.ok, JSON.stringify(r.out));
    t.false((await api<Device[]>(readKey, 'devices')).out.some((d) => d.hostname === 'runner'));
    t.true((await activity('node.delete')).some((e) => e.actor === 'api:ci pipeline' && e.target === 'runner'));
  });

  test.serial("what hse does not serve is a 404 in Tailscale's error shape; a missing key is a 401", async (t) => {
    const auth = { authorization: `Bearer ${adminKey}` };
    const nf = await fetch(`${image.url}/api/v2/tailnet/-/webhooks`, { headers: auth });
    t.is(nf.status, 404);
    t.deepEqual(await nf.json(), { message: 'not found' });
    const other = await fetch(`${image.url}/api/v2/tailnet/example.com/devices`, { headers: auth });
    t.is(other.status, 404);
    const none = await fetch(`${image.url}/api/v2/tailnet/-/devices`);
    t.is(none.status, 401);
    t.regex(((await none.json()) as { message: string }).message, /API token invalid/);
  });

  test.serial("malformed requests get a 4xx in Tailscale's error shape, never a 500", async (t) => {
    const send = (method: string, p: string, body: string) =>
      fetch(`${image.url}/api/v2${p}`, { method, headers: { authorization: `Bearer ${adminKey}`, 'content-type': 'application/json' }, body });
    const cases: [string, string, string][] = [
      ['POST', '/tailnet/-/keys', '{"capabilities": 5}'],
      ['POST', '/tailnet/-/keys', '{"capabilities":{"devices":{"create":{"tags":"tag:ci"}}}}'],
      ['POST', '/tailnet/-/keys', '{"capabilities":{"devices":{"create":{"tags":["tag:nope"]}}}}'],
      ['POST', '/tailnet/-/keys', 'not json'],
      ['POST', '/tailnet/-/dns/nameservers', '{"dns": "1.1.1.1"}'],
      ['POST', '/tailnet/-/dns/nameservers', '{"dns": ["not an address"]}'],
      ['PATCH', '/tailnet/-/dns/split-dns', '{"example.com": 7}'],
      ['POST', '/tailnet/-/dns/configuration', '{"nameservers": [1]}'],
      ['POST', '/tailnet/-/acl', '{ "acls": ['],
      ['POST', '/tailnet/-/acl/preview?type=user', '{}'],
      ['POST', '/device/999999/name', '{"name": "x"}'],
      ['POST', '/device/nffffffffffffffff/tags', '{"tags": ["tag:ci"]}'],
      ['GET', '/tailnet/-/devices?fields=some', ''],
      ['DELETE', '/tailnet/-/keys/abc', ''],
      ['GET', '/users/%E0%A4%A', ''],
    ];
    for (const [method, p, body] of cases) {
      const r = await send(method, p, body || (undefined as unknown as string));
      t.true(r.status >= 400 && r.status < 500, `${method} ${p} ${body} answered ${r.status}`);
      t.is(typeof ((await r.json()) as { message?: unknown }).message, 'string', `${method} ${p}`);
    }
  });

  test.serial('failed authentications are limited per client address, and the address is all that is blocked', async (t) => {
    const from = (ip: string, key: string) =>
      fetch(`${image.url}/api/v2/tailnet/-/devices`, { headers: { authorization: `Bearer ${key}`, 'x-forwarded-for': ip } });
    const guess = 'hse-api-000000000000-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA';
    for (let i = 0; i < 10; i++) t.is((await from('198.51.100.7', guess)).status, 401);
    const limited = await from('198.51.100.7', guess);
    t.is(limited.status, 429);
    t.true(Number(limited.headers.get('retry-after')) > 0);
    // The blocked address cannot use even a good key meanwhile; another address can.
    t.is((await from('198.51.100.7', adminKey)).status, 429);
    t.is((await from('198.51.100.8', adminKey)).status, 200);
  });
}
