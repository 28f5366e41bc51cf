// Map stream encoding: u32 little-endian length + zstd frame of JSON, and the Node shape clients parse.
import test from 'ava';
import fc from 'fast-check';
import { parseConfig } from '../../shared/config.ts';
import { defaultDnsSettings } from '../../shared/dns-settings.ts';
import type { NodeRecord } from '../../shared/model.ts';
import { decodeMapFrames, encodeJsonFrame, encodeMapFrame, STORE_BELOW } from '../../services/coordination/src/control/map-frame.ts';
import { buildDerpMap } from '../../services/coordination/src/map/derp-map.ts';
import { fullMapHead, type MapContext, profilesFor, toTailNode } from '../../services/coordination/src/map/map-builder.ts';
import { allowAllPolicy } from '../../services/coordination/src/policy/index.ts';
import { buildDnsConfig } from '../../services/coordination/src/map/dns-config.ts';

const cfg = parseConfig({ HSE_PUBLIC_URL: 'https://vpn.example.com', HSE_TLS: 'off', HSE_DATA_DIR: '/tmp/hse-unit' });

const node = (id: number, over: Partial<NodeRecord> = {}): NodeRecord => ({
  id,
  stableId: `n${id}`,
  userId: 1,
  machineKey: `mkey:${'1'.repeat(64)}`,
  nodeKey: `nodekey:${id.toString(16).padStart(64, '0')}`,
  discoKey: `discokey:${'2'.repeat(64)}`,
  hostname: `host${id}`,
  givenName: `host${id}`,
  ipv4: `100.64.0.${id}`,
  ipv6: `fd7a:115c:a1e0::${id}`,
  hostinfo: { OS: 'linux' },
  endpoints: ['127.0.0.1:41641'],
  homeDerp: 900,
  capVersion: 130,
  created: '2026-01-01T00:00:00.000Z',
  lastSeen: '2026-01-02T00:00:00.000Z',
  expiry: null,
  ephemeral: false,
  authKeyId: 1,
  registeredBy: 'authkey',
  tags: [],
  approvedRoutes: [],
  ...over,
});

const ctx: MapContext = {
  cfg,
  derpMap: buildDerpMap(cfg),
  dnsConfig: buildDnsConfig(defaultDnsSettings(), cfg.baseDomain),
  users: new Map([[1, { id: 1, name: 'alice', displayName: 'Alice', created: '2026-01-01T00:00:00.000Z' }]]),
  online: new Set([1]),
};

test('frames round-trip, compressed and not, whatever the JSON', (t) => {
  fc.assert(
    fc.property(fc.array(fc.record({ KeepAlive: fc.boolean(), Domain: fc.string() }), { minLength: 1, maxLength: 5 }), fc.boolean(), (msgs, z) => {
      const buf = Buffer.concat(msgs.map((m) => encodeMapFrame(m, z)));
      const { messages, rest } = decodeMapFrames(buf, z);
      return rest.length === 0 && JSON.stringify(messages) === JSON.stringify(msgs);
    }),
  );
  const one = encodeMapFrame({ KeepAlive: true }, true);
  t.is(one.readUInt32LE(0), one.length - 4);
  t.deepEqual([...one.subarray(4, 8)], [0x28, 0xb5, 0x2f, 0xfd], 'zstd frame magic');
});

test('the first map carries Node, DERPMap, allow-all filter, profiles and the MagicDNS domain', (t) => {
  const self = node(1);
  const peer = node(2);
  const policy = allowAllPolicy({ nodes: [self, peer], users: [{ id: 1, name: 'alice', email: null, idpGroups: [] }] });
  const m = { ...fullMapHead(ctx, toTailNode(ctx, self, undefined, {}), policy, self, profilesFor(ctx, self, [peer])), Peers: [toTailNode(ctx, peer)] };
  t.is(m.Node!.Name, 'host1.hse.internal.');
  t.deepEqual(m.Node!.Addresses, ['100.64.0.1/32', 'fd7a:115c:a1e0::1/128']);
  t.true(m.Node!.MachineAuthorized);
  t.true(m.Node!.Online);
  t.is(m.Node!.LastSeen, undefined, 'no LastSeen for an online node');
  t.is(m.Peers![0].Online, false);
  t.is(m.Peers![0].LastSeen, '2026-01-02T00:00:00.000Z');
  t.deepEqual(m.PacketFilter, policy.filterFor(1));
  t.is(m.PacketFilter![0].SrcIPs[0], '*', 'no policy: everyone may reach this node');
  t.deepEqual(m.UserProfiles, [{ ID: 1, LoginName: 'alice', DisplayName: 'Alice' }]);
  t.is(m.Domain, 'hse.internal');
  t.deepEqual(m.DNSConfig, { Routes: { 'hse.internal.': [] }, Domains: ['hse.internal'], Proxied: true }, 'MagicDNS on, nothing else');
  const region = m.DERPMap!.Regions['900'];
  t.is(region.Nodes[0].HostName, 'vpn.example.com');
  t.is(region.Nodes[0].DERPPort, 443);
  t.is(region.Nodes[0].STUNPort, 3478);
});

test('an expired node is sent as expired and unauthorized', (t) => {
  const n = toTailNode(ctx, node(3, { expiry: '2020-01-01T00:00:00.000Z' }));
  t.true(n.Expired);
  t.false(n.MachineAuthorized);
});

test('a separate STUN host becomes a STUN-only node and the DERP node stops doing STUN', (t) => {
  const c = parseConfig({ HSE_PUBLIC_URL: 'https://vpn.example.com:8443', HSE_TLS: 'off', HSE_STUN_HOST: '203.0.113.7', HSE_DATA_DIR: '/tmp/x' });
  const nodes = buildDerpMap(c).Regions['900'].Nodes;
  t.is(nodes[0].DERPPort, 8443);
  t.is(nodes[0].STUNPort, -1);
  t.like(nodes[1], { STUNOnly: true, HostName: '203.0.113.7', IPv4: '203.0.113.7', STUNPort: 3478 });
});

test('public DERP mode serves the shipped map of Tailscale relays', (t) => {
  const c = parseConfig({ HSE_DERP_MODE: 'public', HSE_DATA_DIR: '/tmp/x' });
  const m = buildDerpMap(c);
  t.true(Object.keys(m.Regions).length >= 10);
  t.true(Object.values(m.Regions).every((r) => r.Nodes.every((n) => n.HostName.endsWith('.tailscale.com'))));
});

test('a delta sent to many streams in a row is compressed once; any other message gets its own frame', (t) => {
  const delta = JSON.stringify({ PeersChangedPatch: [{ NodeID: 7, Online: true }] });
  const first = encodeJsonFrame(delta, true);
  t.is(encodeJsonFrame(delta, true), first, 'the same text reuses the frame');
  t.not(encodeJsonFrame(delta, false), first, 'uncompressed streams get their own');
  const other = encodeJsonFrame(JSON.stringify({ PeersChangedPatch: [{ NodeID: 8, Online: true }] }), true);
  t.not(other, first);
  t.deepEqual(decodeMapFrames(other, true).messages, [{ PeersChangedPatch: [{ NodeID: 8, Online: true }] }]);
  t.deepEqual(decodeMapFrames(encodeJsonFrame(delta, true), true).messages, [JSON.parse(delta)]);
});

test('small messages go out as stored zstd frames and large ones compressed; both decode to the same JSON', (t) => {
  for (const size of [20, 255, 256, 257, 1000, STORE_BELOW, STORE_BELOW + 1, 70_000]) {
    const json = JSON.stringify({ Domain: 'x'.repeat(size - 13) });
    t.is(json.length, size);
    const frame = encodeJsonFrame(json, true);
    const body = frame.subarray(4);
    t.deepEqual([...body.subarray(0, 4)], [0x28, 0xb5, 0x2f, 0xfd], `zstd magic at ${size} bytes`);
    // Stored: the frame is the JSON plus a 9- or 10-byte header; compressed: far smaller than the repetitive JSON.
    if (size <= STORE_BELOW) t.is(body.length, size + (size < 256 ? 9 : 10), `stored at ${size} bytes`);
    else t.true(body.length < size / 4, `compressed at ${size} bytes`);
    t.deepEqual(decodeMapFrames(frame, true).messages, [JSON.parse(json)]);
  }
});
