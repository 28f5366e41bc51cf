// The cleaning that keeps one node from breaking its peers' maps (services/coordination/src/tailcfg/hostinfo.ts), as
// properties: whatever a client sends, what is kept has the JSON type tailcfg gives each field (so a Go client can
// decode it), cleaning twice changes nothing, and a Hostinfo as the official client sends it passes through whole.
import test from 'ava';
import fc from 'fast-check';
import { isCapVersion } from '../../services/coordination/src/tailcfg/capver.ts';
import { cleanEndpoints, cleanHostinfo, isAddrPort } from '../../services/coordination/src/tailcfg/hostinfo.ts';

const STRINGS = [
  'IPNVersion',
  'FrontendLogID',
  'BackendLogID',
  'OS',
  'OSVersion',
  'Env',
  'Distro',
  'DistroVersion',
  'DistroCodeName',
  'App',
  'Package',
  'DeviceModel',
  'PushDeviceToken',
  'Hostname',
  'Machine',
  'GoArch',
  'GoArchVar',
  'GoVersion',
  'Cloud',
  'ServicesHash',
  'ExitNodeID',
];
const BOOLS = ['ShieldsUp', 'ShareeNode', 'NoLogsNoSupport', 'RemoteConfig', 'WireIngress', 'IngressEnabled', 'AllowsUpdate', 'PeerRelay'];
const OPT_BOOLS = ['Container', 'Desktop', 'Userspace', 'UserspaceRouter', 'AppConnector', 'StateEncrypted'];
const STRING_LISTS = ['RequestTags', 'WoLMACs', 'sshHostKeys', 'RoutableIPs'];
const KNOWN = new Set([...STRINGS, ...BOOLS, ...OPT_BOOLS, ...STRING_LISTS, 'NetInfo', 'Location', 'Services']);

/** Throws unless `h` is something Go's json.Unmarshal into tailcfg.Hostinfo would accept. */
function assertDecodable(h: Record<string, unknown>): void {
  for (const [k, v] of Object.entries(h)) {
    if (!KNOWN.has(k)) throw new Error(`unknown field ${k} kept`);
    if (STRINGS.includes(k) && typeof v !== 'string') throw new Error(`${k} is not a string`);
    if (BOOLS.includes(k) && typeof v !== 'boolean') throw new Error(`${k} is not a bool`);
    if (OPT_BOOLS.includes(k) && typeof v !== 'boolean' && v !== null) throw new Error(`${k} is not an opt.Bool`);
    if (STRING_LISTS.includes(k) && !(Array.isArray(v) && v.every((x) => typeof x === 'string'))) throw new Error(`${k} is not a list of strings`);
  }
  const ni = h.NetInfo as Record<string, unknown> | undefined;
  if (ni !== undefined) {
    if (typeof ni !== 'object' || ni === null || Array.isArray(ni)) throw new Error('NetInfo is not an object');
    if ('PreferredDERP' in ni && !Number.isInteger(ni.PreferredDERP)) throw new Error('PreferredDERP is not an int');
    if ('DERPLatency' in ni && !Object.values(ni.DERPLatency as object).every((x) => typeof x === 'number')) throw new Error('DERPLatency');
  }
  const services = h.Services as unknown[] | undefined;
  if (services !== undefined) {
    for (const s of services as Record<string, unknown>[]) {
      if ('Port' in s && !(Number.isInteger(s.Port) && (s.Port as number) >= 0 && (s.Port as number) <= 65535)) throw new Error('Service.Port is not a uint16');
      if ('Proto' in s && typeof s.Proto !== 'string') throw new Error('Service.Proto');
    }
  }
}

const hostinfoLike = fc.oneof(
  fc.anything({ maxDepth: 3 }),
  fc.dictionary(fc.constantFrom(...KNOWN, 'Unknown', 'TPM'), fc.anything({ maxDepth: 3 })),
  fc.record({ NetInfo: fc.dictionary(fc.constantFrom('PreferredDERP', 'WorkingUDP', 'DERPLatency', 'LinkType', 'x'), fc.anything({ maxDepth: 2 })) }),
  fc.record({ Services: fc.array(fc.dictionary(fc.constantFrom('Proto', 'Port', 'Description'), fc.anything({ maxDepth: 1 }))) }),
);

test('whatever a client sends as Hostinfo, what is kept is decodable by a Go client, and cleaning is idempotent', (t) => {
  fc.assert(
    fc.property(hostinfoLike, (v) => {
      const h = cleanHostinfo(v);
      if (h === null) return;
      assertDecodable(h);
      t.deepEqual(cleanHostinfo(h), h);
    }),
    { numRuns: 3_000 },
  );
  t.pass();
});

test('a Hostinfo as the official client sends it passes through whole', (t) => {
  const real = {
    IPNVersion: '1.102.3-t0123456789-g0123456789',
    BackendLogID: 'abc',
    OS: 'linux',
    OSVersion: 'Debian 12.10 (bookworm); kernel=6.1.0',
    Distro: 'debian',
    DistroVersion: '12.10',
    DistroCodeName: 'bookworm',
    Hostname: 'alpha',
    Machine: 'x86_64',
    GoArch: 'amd64',
    GoArchVar: 'v1',
    GoVersion: 'go1.25.3',
    Userspace: true,
    UserspaceRouter: true,
    NoLogsNoSupport: true,
    Container: false,
    RoutableIPs: ['10.0.0.0/24', 'fd00::/64'],
    Services: [{ Proto: 'tcp', Port: 22, Description: 'sshd' }],
    sshHostKeys: ['ssh-ed25519 AAAA'],
    NetInfo: {
      MappingVariesByDestIP: null,
      WorkingIPv6: false,
      OSHasIPv6: true,
      WorkingUDP: true,
      WorkingICMPv4: false,
      HavePortMap: false,
      UPnP: false,
      PMP: false,
      PCP: false,
      PreferredDERP: 900,
      LinkType: 'wired',
      DERPLatency: { '900-v4': 0.0012 },
      FirewallMode: 'ipt-default',
    },
  };
  t.deepEqual(cleanHostinfo(real), real);
});

test('endpoints: ip:port and [ipv6]:port kept, anything else dropped; capability versions are small whole numbers', (t) => {
  t.deepEqual(
    cleanEndpoints([
      '192.0.2.1:41641',
      '[2001:db8::1]:41641',
      '[::1]:1',
      '1.2.3.4:99999',
      'host:80',
      '01.2.3.4:1',
      '1.2.3.4',
      '[::1]',
      42,
      null,
      '1.2.3.4:65535',
    ]),
    ['192.0.2.1:41641', '[2001:db8::1]:41641', '[::1]:1', '1.2.3.4:65535'],
  );
  fc.assert(fc.property(fc.anything(), (v) => cleanEndpoints(v).every(isAddrPort)));
  t.true(isCapVersion(142));
  for (const v of [142.5, -1, 1e21, '142', null, NaN]) t.false(isCapVersion(v), String(v));
});
