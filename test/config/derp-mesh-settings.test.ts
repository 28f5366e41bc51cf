// The relay-mesh and DERP-map settings (advanced/ha.md, "Relays"): what each accepts, what it refuses and why, the DERP
// map each layout gives clients, and the mesh key file refused at the relay's start like every operator-fixable problem.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import test from 'ava';
import { buildDerpMap } from '../../services/coordination/src/map/derp-map.ts';
import { ConfigError, parseConfig } from '../../shared/config.ts';
import { runProcess } from '../harness/process.ts';

const KEY = 'c0ffee'.padEnd(64, '1');
const base = { HSE_PUBLIC_URL: 'https://vpn.example.com', HSE_TLS: 'off', HSE_DATA_DIR: '/tmp/x' };
const cfg = (env: Record<string, string>) => parseConfig({ ...base, ...env });

function refused(t: import('ava').ExecutionContext, env: Record<string, string>, variable: string, reason: RegExp): void {
  const e = t.throws(() => cfg(env), { instanceOf: ConfigError });
  t.is(e?.variable, variable, e?.message);
  t.regex(e?.reason ?? '', reason);
}

test('by default: no mesh, and the map holds this image alone', (t) => {
  const c = cfg({});
  t.is(c.derpMeshKey, null);
  t.deepEqual(c.derpMeshWith, []);
  t.is(c.derpNodes, null);
  t.is(c.derpRegions, 'one');
});

test('mesh peers are written as for derper (host, host:port, host/dial-host) or as an instance URL', (t) => {
  const c = cfg({
    HSE_DERP_MESH_KEY: KEY,
    HSE_DERP_MESH_WITH:
      'derp1.example.com, derp2.example.com:8443 derp3.example.com/10.0.0.3,http://10.0.0.4:8080,https://hse-5.example.com/derp,[2001:db8::6]:443',
  });
  t.deepEqual(c.derpMeshKey, Buffer.from(KEY, 'hex'));
  t.deepEqual(
    c.derpMeshWith.map((p) => [p.url, p.dialHost]),
    [
      ['https://derp1.example.com/derp', null],
      ['https://derp2.example.com:8443/derp', null],
      ['https://derp3.example.com/derp', '10.0.0.3'],
      ['http://10.0.0.4:8080/derp', null],
      ['https://hse-5.example.com/derp', null],
      ['https://[2001:db8::6]/derp', null],
    ],
  );
});

test('mesh settings that cannot work are refused naming the variable', (t) => {
  refused(t, { HSE_DERP_MESH_KEY: 'abc' }, 'HSE_DERP_MESH_KEY', /64 hexadecimal digits .*openssl rand -hex 32/);
  refused(t, { HSE_DERP_MESH_KEY: '0'.repeat(64) }, 'HSE_DERP_MESH_KEY', /all zeros/);
  refused(t, { HSE_DERP_MESH_KEY: KEY, HSE_DERP_MESH_KEY_FILE: '/k' }, 'HSE_DERP_MESH_KEY', /not both/);
  refused(t, { HSE_DERP_MESH_WITH: 'derp2.example.com' }, 'HSE_DERP_MESH_WITH', /needs the mesh key/);
  refused(t, { HSE_DERP_MESH_KEY: KEY, HSE_DERP_MESH_WITH: 'a/b/c' }, 'HSE_DERP_MESH_WITH', /too many "\/"/);
  refused(t, { HSE_DERP_MESH_KEY: KEY, HSE_DERP_MESH_WITH: 'ftp://derp2.example.com' }, 'HSE_DERP_MESH_WITH', /http:\/\/ or https:\/\//);
  refused(t, { HSE_DERP_MESH_KEY: KEY, HSE_DERP_MESH_WITH: 'http://10.0.0.4:8080/console' }, 'HSE_DERP_MESH_WITH', /bare origin \(or end in \/derp\)/);
  refused(t, { HSE_DERP_MESH_KEY: KEY, HSE_DERP_MESH_WITH: 'derp2.example.com/bad!host' }, 'HSE_DERP_MESH_WITH', /not a host name or IP address to dial/);
  refused(t, { HSE_DERP_MODE: 'public', HSE_DERP_MESH_KEY: KEY }, 'HSE_DERP_MESH_KEY', /HSE_DERP_MODE=public/);
  t.notThrows(() => cfg({ HSE_DERP_MESH_KEY_FILE: '/run/secrets/mesh' }), 'a key file alone: accept mesh peers, dial none');
});

test('HSE_DERP_NODES: one region of several nodes, in the order given, each with its STUN', (t) => {
  const c = cfg({
    HSE_DERP_NODES:
      'https://derp-a.example.com, derp-b.example.com:8443?stun=3479 http://127.0.0.1:8081?stun=off https://derp-d.example.com?stun=203.0.113.9:3478',
  });
  const m = buildDerpMap(c);
  t.deepEqual(Object.keys(m.Regions), ['900']);
  const r = m.Regions['900'];
  t.is(r.RegionCode, 'hse');
  t.deepEqual(
    r.Nodes.map((n) => [n.Name, n.HostName, n.DERPPort, n.STUNPort, n.STUNOnly ?? false]),
    [
      ['900a', 'derp-a.example.com', 443, 3478, false],
      ['900b', 'derp-b.example.com', 8443, 3479, false],
      ['900c', '127.0.0.1', 8081, -1, false],
      ['900d', 'derp-d.example.com', 443, -1, false],
      ['900ds', '203.0.113.9', undefined, 3478, true],
    ],
  );
  t.like(r.Nodes[2], { IPv4: '127.0.0.1', IPv6: 'none' });
  t.true(m.omitDefaultRegions);
});

test('HSE_DERP_REGIONS=per-node: a region each, numbered up from HSE_DERP_REGION_ID', (t) => {
  const m = buildDerpMap(cfg({ HSE_DERP_NODES: 'derp-a.example.com derp-b.example.com', HSE_DERP_REGIONS: 'per-node', HSE_DERP_REGION_ID: '910' }));
  t.deepEqual(Object.keys(m.Regions), ['910', '911']);
  t.like(m.Regions['911'], { RegionID: 911, RegionCode: 'hse-2', RegionName: 'Self-hosted relay 2' });
  t.deepEqual(
    m.Regions['911'].Nodes.map((n) => [n.Name, n.RegionID, n.HostName]),
    [['911a', 911, 'derp-b.example.com']],
  );
});

test('DERP-map settings that cannot work are refused naming the variable', (t) => {
  refused(t, { HSE_DERP_REGIONS: 'many' }, 'HSE_DERP_REGIONS', /"one" .* "per-node"/);
  refused(t, { HSE_DERP_REGIONS: 'per-node' }, 'HSE_DERP_REGIONS', /needs the list of relays in HSE_DERP_NODES/);
  refused(
    t,
    { HSE_DERP_NODES: 'a.example.com b.example.com', HSE_DERP_REGIONS: 'per-node', HSE_DERP_REGION_ID: '999' },
    'HSE_DERP_REGION_ID',
    /no room for 2 regions/,
  );
  refused(t, { HSE_DERP_NODES: 'a.example.com https://A.example.com:443' }, 'HSE_DERP_NODES', /lists a\.example\.com:443 twice/);
  refused(t, { HSE_DERP_NODES: 'a.example.com?stun=nope' }, 'HSE_DERP_NODES', /stun=nope is not PORT, HOST:PORT or off/);
  refused(t, { HSE_DERP_NODES: 'a.example.com?x=1' }, 'HSE_DERP_NODES', /only query/);
  refused(t, { HSE_DERP_NODES: 'a.example.com', HSE_STUN_HOST: '203.0.113.7' }, 'HSE_STUN_HOST', /single-relay map only/);
  refused(t, { HSE_DERP_MODE: 'public', HSE_DERP_NODES: 'a.example.com' }, 'HSE_DERP_NODES', /HSE_DERP_MODE=public/);
});

test('a mesh key file that is missing or not a key stops the relay with one line naming the variable, exit 2', async (t) => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'hse-meshkey-'));
  t.teardown(() => fs.rmSync(dataDir, { recursive: true, force: true }));
  const file = path.join(dataDir, 'mesh.key');
  const env = { HSE_DATA_DIR: dataDir, HSE_DERP_VERIFY_CLIENTS: 'off', HSE_STUN_LISTEN: '127.0.0.1', HSE_STUN_PORT: '1', HSE_DERP_MESH_KEY_FILE: file };
  const missing = runProcess('services/relay/src/main.ts', env);
  t.is(await missing.exited(), 2);
  t.regex(missing.output().trim(), /^hse relay: cannot start: HSE_DERP_MESH_KEY_FILE: cannot read ".*mesh\.key" \(ENOENT\); check the path/);
  t.is(missing.output().trim().split('\n').length, 1, missing.output());
  fs.writeFileSync(file, 'not-a-key\n');
  const bad = runProcess('services/relay/src/main.ts', env);
  t.is(await bad.exited(), 2);
  t.regex(bad.output().trim(), /^hse relay: cannot start: HSE_DERP_MESH_KEY_FILE: ".*mesh\.key" must be 64 hexadecimal digits/);
});
