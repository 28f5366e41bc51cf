// DNS settings: what the check accepts and refuses (each refusal names its field), the DNSConfig a client gets from
// them, and the key-expiry rule and setting. Pure functions, so every case is cheap; the official client's view of
// the same settings is in test/e2e/dns.test.ts.
import test from 'ava';
import fc from 'fast-check';
import { ConfigError, parseConfig } from '../../shared/config.ts';
import { defaultDnsSettings, dnsSettingsChanges, resolverProblem, validateDnsSettings, type DnsSettings } from '../../shared/dns-settings.ts';
import { HseError } from '../../shared/errors.ts';
import { buildDnsConfig } from '../../services/coordination/src/map/dns-config.ts';
import { keyExpiryAt } from '../../services/coordination/src/state/key-expiry.ts';
import { formToSettings, settingsToForm } from '../../services/console/src/network/dns-form.ts';

const BASE = 'hse.internal';
const check = (raw: unknown) => validateDnsSettings(raw, BASE);

function refusal(t: import('ava').ExecutionContext, raw: unknown, message: RegExp): void {
  const e = t.throws(() => check(raw), { instanceOf: HseError });
  t.is(e?.status, 400);
  t.regex(e?.message ?? '', message);
}

test('an empty document is the default: MagicDNS on and nothing else', (t) => {
  t.deepEqual(check({}), defaultDnsSettings());
  t.deepEqual(buildDnsConfig(defaultDnsSettings(), BASE), { Routes: { 'hse.internal.': [] }, Domains: ['hse.internal'], Proxied: true });
});

test('resolver addresses: IPs, IP:port, [IPv6]:port and the DoH URLs the v1.102 client knows', (t) => {
  for (const ok of [
    '1.1.1.1',
    '2606:4700:4700::1111',
    '10.0.0.53:5353',
    '[fd00::53]:53',
    'https://dns.google/dns-query',
    'https://cloudflare-dns.com/dns-query',
    'https://dns.quad9.net/dns-query',
    'https://dns.nextdns.io/abc123',
    'https://dns.nextdns.io/abc123/my-device',
    'https://dns.controld.com/abcdef',
  ]) {
    t.is(resolverProblem(ok), null, ok);
  }
  const bad: [string, RegExp][] = [
    ['1.2.3', /not an IPv4 or IPv6 address/],
    ['01.2.3.4', /not an IPv4 or IPv6 address/],
    ['fd00::53:53x', /not an IPv4 or IPv6 address/],
    ['fd00::1%eth0', /not an IPv4 or IPv6 address/],
    ['fd00::53]:53', /not an IPv4 or IPv6 address/],
    ['1.1.1.1:0', /port outside 1 to 65535/],
    ['1.1.1.1:70000', /port outside 1 to 65535/],
    ['dns.example.com', /not an IPv4 or IPv6 address/],
    ['https://doh.example.net/dns-query', /DNS-over-HTTPS URL the Tailscale client cannot use/],
    ['https://dns.google/resolve', /DNS-over-HTTPS URL the Tailscale client cannot use/],
    ['https://dns.nextdns.io/', /DNS-over-HTTPS URL the Tailscale client cannot use/],
    ['tls://1.1.1.1', /does not support DNS-over-TLS/],
    ['http://100.64.0.1:8080/dns-query', /plain-HTTP DNS is not supported/],
    ['100.100.100.100', /device's own Tailscale resolver/],
  ];
  for (const [addr, message] of bad) t.regex(resolverProblem(addr) ?? 'accepted', message, addr);
});

test('every refusal names the field and what to write instead', (t) => {
  refusal(t, [], /must be a JSON object/);
  refusal(t, { nameserver: ['1.1.1.1'] }, /unknown field "nameserver"; DNS settings have magicDNS, overrideLocalDNS, nameservers/);
  refusal(t, { magicDNS: 'yes' }, /^magicDNS: must be true or false/);
  refusal(t, { nameservers: '1.1.1.1' }, /^nameservers: must be a list/);
  refusal(t, { nameservers: [53] }, /^nameservers: 53 is not a string/);
  refusal(t, { nameservers: ['1.1.1'] }, /^nameservers: "1\.1\.1" is not an IPv4 or IPv6 address/);
  refusal(t, { overrideLocalDNS: true }, /^overrideLocalDNS: needs at least one global nameserver/);
  refusal(t, { splitDNS: ['corp.example.com'] }, /^splitDNS: must be an object of domain -> list of nameservers/);
  refusal(t, { splitDNS: { 'hse.internal': ['10.0.0.1'] } }, /^splitDNS: "hse\.internal" is the tailnet's own domain \(HSE_BASE_DOMAIN hse\.internal\)/);
  refusal(t, { splitDNS: { 'Printers.HSE.internal.': ['10.0.0.1'] } }, /^splitDNS: "printers\.hse\.internal" is the tailnet's own domain/);
  refusal(t, { splitDNS: { 'corp example': ['10.0.0.1'] } }, /^splitDNS: "corp example" is not a DNS domain/);
  refusal(t, { splitDNS: { 'corp.example.com': [] } }, /^splitDNS "corp\.example\.com": give at least one nameserver/);
  refusal(t, { splitDNS: { 'corp.example.com': ['10.0.0.256'] } }, /^splitDNS "corp\.example\.com": "10\.0\.0\.256" is not an IPv4/);
  refusal(t, { splitDNS: { 'corp.example.com': ['10.0.0.1'], 'CORP.example.com.': ['10.0.0.2'] } }, /"corp\.example\.com" is listed twice/);
  refusal(t, { searchDomains: ['-bad-.example'] }, /^searchDomains: "-bad-\.example" is not a DNS domain/);
  refusal(
    t,
    { extraRecords: [{ name: 'mail.example.com', type: 'MX', value: '10.0.0.5' }] },
    /type "MX" is not supported; the Tailscale client answers only A and AAAA/,
  );
  refusal(t, { extraRecords: [{ name: 'a.example.com', type: 'A', value: 'fd00::1' }] }, /"fd00::1" is not an IPv4 address \(an A record needs one\)/);
  refusal(t, { extraRecords: [{ name: 'a.example.com', type: 'AAAA', value: '10.0.0.1' }] }, /"10\.0\.0\.1" is not an IPv6 address/);
  refusal(t, { extraRecords: [{ name: '*.example.com', value: '10.0.0.1' }] }, /^extraRecords: "\*\.example\.com" is not a DNS name/);
  refusal(t, { extraRecords: [{ name: 'a.example.com', value: '10.0.0.1', ttl: 60 }] }, /unknown field "ttl"/);
  refusal(t, { extraRecords: ['a.example.com 10.0.0.1'] }, /each record is an object/);
  refusal(t, { nameservers: Array.from({ length: 17 }, (_, i) => `10.0.0.${i + 1}`) }, /at most 16 nameservers/);
});

test('accepted settings come back normalised: lowercase, no trailing dots, no duplicates, inferred record types', (t) => {
  const s = check({
    overrideLocalDNS: true,
    nameservers: ['1.1.1.1', ' 1.1.1.1 ', 'HTTPS://DNS.GOOGLE/dns-query'],
    splitDNS: { 'Corp.Example.COM.': ['10.0.0.53', '10.0.0.53:5353'], internal: ['10.0.0.1'] },
    searchDomains: ['corp.example.com', 'Corp.Example.com.'],
    extraRecords: [
      { name: 'Grafana.HSE.internal.', value: '100.64.0.7' },
      { name: 'grafana.hse.internal', type: 'a', value: '100.64.0.7' },
      { name: 'v6.example.com', value: 'FD00::7' },
    ],
  });
  t.deepEqual(s, {
    magicDNS: true,
    overrideLocalDNS: true,
    nameservers: ['1.1.1.1', 'https://dns.google/dns-query'],
    splitDNS: { 'corp.example.com': ['10.0.0.53', '10.0.0.53:5353'], internal: ['10.0.0.1'] },
    searchDomains: ['corp.example.com'],
    extraRecords: [
      { name: 'grafana.hse.internal', type: 'A', value: '100.64.0.7' },
      { name: 'v6.example.com', type: 'AAAA', value: 'fd00::7' },
    ],
  });
  t.deepEqual(check(s), s, 'checking again changes nothing');
});

test('the DNSConfig: override = Resolvers, otherwise FallbackResolvers; split domains as routes; base domain first', (t) => {
  const s: DnsSettings = {
    magicDNS: true,
    overrideLocalDNS: true,
    nameservers: ['1.1.1.1'],
    splitDNS: { 'corp.example.com': ['10.0.0.53'] },
    searchDomains: ['corp.example.com', BASE],
    extraRecords: [{ name: 'grafana.hse.internal', type: 'A', value: '100.64.0.7' }],
  };
  t.deepEqual(buildDnsConfig(s, BASE), {
    Resolvers: [{ Addr: '1.1.1.1' }],
    Routes: { 'hse.internal.': [], 'corp.example.com.': [{ Addr: '10.0.0.53' }] },
    Domains: ['hse.internal', 'corp.example.com'],
    Proxied: true,
    ExtraRecords: [{ Name: 'grafana.hse.internal', Type: 'A', Value: '100.64.0.7' }],
  });
  const local = buildDnsConfig({ ...s, overrideLocalDNS: false }, BASE);
  t.deepEqual(local.FallbackResolvers, [{ Addr: '1.1.1.1' }]);
  t.is(local.Resolvers, undefined);
  const off = buildDnsConfig({ ...s, magicDNS: false, searchDomains: [] }, BASE);
  t.false(off.Proxied);
  t.deepEqual(off.Routes, { 'corp.example.com.': [{ Addr: '10.0.0.53' }] }, 'no MagicDNS route');
  t.is(off.Domains, undefined);
  for (const c of [buildDnsConfig(s, BASE), local, off]) {
    t.false('CertDomains' in c || 'Nameservers' in c, 'never CertDomains or the legacy Nameservers');
  }
});

test('whatever arrives, the check either accepts it or refuses it with a 400, and what it accepts it accepts again', (t) => {
  const addr = fc.oneof(fc.ipV4(), fc.ipV6(), fc.constantFrom('https://dns.google/dns-query', '1.1.1.1:53'), fc.string());
  const domain = fc.oneof(fc.domain(), fc.string(), fc.constant(BASE));
  const doc = fc.record(
    {
      magicDNS: fc.oneof(fc.boolean(), fc.anything()),
      overrideLocalDNS: fc.boolean(),
      nameservers: fc.oneof(fc.array(addr, { maxLength: 4 }), fc.anything()),
      splitDNS: fc.oneof(fc.dictionary(domain, fc.array(addr, { maxLength: 3 }), { maxKeys: 3 }), fc.anything()),
      searchDomains: fc.array(domain, { maxLength: 3 }),
      extraRecords: fc.array(
        fc.record(
          { name: domain, type: fc.constantFrom('A', 'AAAA', 'MX', undefined), value: fc.oneof(fc.ipV4(), fc.ipV6(), fc.string()) },
          { requiredKeys: ['name', 'value'] },
        ),
        { maxLength: 3 },
      ),
    },
    { requiredKeys: [] },
  );
  fc.assert(
    fc.property(fc.oneof(doc, fc.anything()), (raw) => {
      let s: DnsSettings;
      try {
        s = check(raw);
      } catch (e) {
        return e instanceof HseError && e.status === 400 && e.message.length > 0;
      }
      return JSON.stringify(check(s)) === JSON.stringify(s) && Object.keys(buildDnsConfig(s, BASE)).includes('Proxied');
    }),
    { numRuns: 2000 },
  );
  t.pass();
});

test('the activity log gets what changed, field by field', (t) => {
  const before = defaultDnsSettings();
  const after = { ...before, nameservers: ['1.1.1.1'], magicDNS: false };
  t.deepEqual(dnsSettingsChanges(before, after), { magicDNS: { from: true, to: false }, nameservers: { from: [], to: ['1.1.1.1'] } });
  t.deepEqual(dnsSettingsChanges(after, after), {});
});

test("the console form's text round-trips through the settings, and a line of the wrong shape is refused", (t) => {
  const s = check({
    overrideLocalDNS: true,
    nameservers: ['1.1.1.1', 'https://dns.google/dns-query'],
    splitDNS: { 'corp.example.com': ['10.0.0.53', '10.0.0.54'] },
    searchDomains: ['corp.example.com'],
    extraRecords: [{ name: 'grafana.hse.internal', type: 'A', value: '100.64.0.7' }],
  });
  t.deepEqual(check(formToSettings(settingsToForm(s))), s);
  const typed = formToSettings({
    magicDNS: true,
    overrideLocalDNS: false,
    nameservers: '1.1.1.1, 8.8.8.8\n\n  9.9.9.9  ',
    splitDNS: 'corp.example.com\t10.0.0.53,10.0.0.54\r\n',
    searchDomains: 'a.example b.example',
    extraRecords: 'grafana.hse.internal 100.64.0.7\nv6.example.com AAAA fd00::7',
  });
  t.deepEqual(typed.nameservers, ['1.1.1.1', '8.8.8.8', '9.9.9.9']);
  t.deepEqual(typed.splitDNS, { 'corp.example.com': ['10.0.0.53', '10.0.0.54'] });
  t.deepEqual(typed.searchDomains, ['a.example', 'b.example']);
  t.deepEqual(typed.extraRecords, [
    { name: 'grafana.hse.internal', value: '100.64.0.7' },
    { name: 'v6.example.com', type: 'AAAA', value: 'fd00::7' },
  ]);
  const blank = { magicDNS: true, overrideLocalDNS: false, nameservers: '', splitDNS: '', searchDomains: '', extraRecords: '' };
  t.throws(() => formToSettings({ ...blank, splitDNS: 'corp.example.com' }), {
    message: /Split DNS, entry 1 \("corp\.example\.com"\): write the domain followed by its nameservers/,
  });
  t.throws(() => formToSettings({ ...blank, extraRecords: 'a b c d' }), { message: /Extra records, entry 1/ });
});

test('key expiry: the tailnet lifetime from now, a sooner request wins, a later one is capped, disabled = never', (t) => {
  const now = Date.parse('2026-01-01T00:00:00Z');
  const cfg = { nodeKeyExpirySeconds: 180 * 86_400 };
  const in180 = '2026-06-30T00:00:00.000Z';
  t.is(keyExpiryAt(cfg, null, false, now), in180);
  t.is(keyExpiryAt(cfg, new Date('2026-02-01T00:00:00Z'), false, now), '2026-02-01T00:00:00.000Z');
  t.is(keyExpiryAt(cfg, new Date('2027-01-01T00:00:00Z'), false, now), in180);
  t.is(keyExpiryAt(cfg, new Date('2025-01-01T00:00:00Z'), false, now), in180, 'a past request is no request');
  t.is(keyExpiryAt(cfg, new Date('2026-02-01T00:00:00Z'), true, now), null);
  t.is(keyExpiryAt({ nodeKeyExpirySeconds: 0 }, null, false, now), null);
  t.is(keyExpiryAt({ nodeKeyExpirySeconds: 0 }, new Date('2026-02-01T00:00:00Z'), false, now), '2026-02-01T00:00:00.000Z');
});

test('HSE_NODE_KEY_EXPIRY: 180 days by default, durations in d/h/m/s or seconds, 0 = never; anything else names the variable', (t) => {
  const base = { HSE_DATA_DIR: '/tmp/hse-unit' };
  const parse = (v?: string) => parseConfig(v === undefined ? base : { ...base, HSE_NODE_KEY_EXPIRY: v }).nodeKeyExpirySeconds;
  t.is(parse(), 180 * 86_400);
  t.is(parse('90d'), 90 * 86_400);
  t.is(parse('12h'), 12 * 3600);
  t.is(parse('30m'), 1800);
  t.is(parse('3600'), 3600);
  t.is(parse('0'), 0);
  for (const bad of ['1 week', '1.5d', '-1', 'never', '10s', '3651d', '12H30M']) {
    const e = t.throws(() => parse(bad), { instanceOf: ConfigError });
    t.is(e?.variable, 'HSE_NODE_KEY_EXPIRY', bad);
  }
  t.regex(
    t.throws(() => parse('1 week'))?.message ?? '',
    /HSE_NODE_KEY_EXPIRY: "1 week" is not a duration \(write 180d, 12h, 30m, or plain seconds; 0 = keys never expire\)/,
  );
});
