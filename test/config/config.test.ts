// shared/config.ts and shared/trusted-proxies.ts as functions: modes, defaults, what is refused or warned, and
// property tests for trusted-proxy entries against plain arithmetic.
import test from 'ava';
import fc from 'fast-check';
import { ConfigError, parseConfig } from '../../shared/config.ts';
import { familiesCoveredTogether, parseAddress, parseEntry } from '../../shared/trusted-proxies.ts';

function refused(env: Record<string, string>): ConfigError {
  try {
    parseConfig(env);
  } catch (e) {
    if (e instanceof ConfigError) return e;
    throw e;
  }
  throw new Error(`accepted: ${JSON.stringify(env)}`);
}

test('defaults: a local try-out on 127.0.0.1:8080, plain HTTP', (t) => {
  const c = parseConfig({}, '/srv/hse');
  t.is(c.publicOrigin, 'http://localhost:8080');
  t.false(c.proxyMode);
  t.false(c.tlsMode);
  t.is(c.httpPort, 8080);
  t.is(c.listenAddress, '127.0.0.1');
  t.is(c.headerTimeoutSeconds, 30);
  t.true(c.trustedProxies.empty);
  t.is(c.dataDir, '/srv/hse/data');
  t.is(c.runDir, '/srv/hse/data/run');
  t.deepEqual(c.warnings, []);
});

test('proxy mode = https public URL with HSE_TLS=off; TLS mode = https with TLS on', (t) => {
  const proxy = parseConfig({ HSE_PUBLIC_URL: 'https://vpn.example.com', HSE_TLS: 'off' });
  t.true(proxy.proxyMode);
  t.false(proxy.tlsMode);
  t.true(proxy.secure);
  const tls = parseConfig({ HSE_PUBLIC_URL: 'https://vpn.example.com' });
  t.false(tls.proxyMode);
  t.true(tls.tlsMode);
  const plain = parseConfig({ HSE_PUBLIC_URL: 'http://vpn.example.com:8080', HSE_TLS: 'off' });
  t.false(plain.proxyMode);
  t.false(plain.secure);
});

test('HSE_LISTEN_ADDRESS overrides HSE_PROXY_BIND for the router; IPv6 accepted with or without brackets', (t) => {
  t.is(parseConfig({ HSE_PROXY_BIND: '::1' }).listenAddress, '::1');
  t.is(parseConfig({ HSE_PROXY_BIND: '[::1]' }).listenAddress, '::1');
  t.is(parseConfig({ HSE_PROXY_BIND: '127.0.0.1', HSE_LISTEN_ADDRESS: '0.0.0.0' }).listenAddress, '0.0.0.0');
});

test('each refusal names its variable', (t) => {
  const cases: [Record<string, string>, string][] = [
    [{ HSE_TRUSTED_PROXIES: '0.0.0.0/0' }, 'HSE_TRUSTED_PROXIES'],
    [{ HSE_TRUSTED_PROXIES: '::/0' }, 'HSE_TRUSTED_PROXIES'],
    [{ HSE_TRUSTED_PROXIES: '0000::/0' }, 'HSE_TRUSTED_PROXIES'],
    [{ HSE_TRUSTED_PROXIES: '[::]/0' }, 'HSE_TRUSTED_PROXIES'],
    [{ HSE_TRUSTED_PROXIES: '::ffff:0.0.0.0/96' }, 'HSE_TRUSTED_PROXIES'],
    [{ HSE_TRUSTED_PROXIES: '::/64' }, 'HSE_TRUSTED_PROXIES'],
    [{ HSE_TRUSTED_PROXIES: '0.0.0.0/2,64.0.0.0/2,128.0.0.0/1' }, 'HSE_TRUSTED_PROXIES'],
    [{ HSE_TRUSTED_PROXIES: '10.0.0.1 garbage' }, 'HSE_TRUSTED_PROXIES'],
    [{ HSE_TRUSTED_PROXIES: '10.0.0.1/' }, 'HSE_TRUSTED_PROXIES'],
    [{ HSE_TRUSTED_PROXIES: '10.1' }, 'HSE_TRUSTED_PROXIES'],
    [{ HSE_TRUSTED_PROXIES: 'fe80::1%eth0' }, 'HSE_TRUSTED_PROXIES'],
    [{ HSE_HTTP_PORT: '-1' }, 'HSE_HTTP_PORT'],
    [{ HSE_HTTP_PORT: '80.5' }, 'HSE_HTTP_PORT'],
    [{ HSE_STUN_PORT: '70000' }, 'HSE_STUN_PORT'],
    [{ HSE_PROXY_BIND: '127.1' }, 'HSE_PROXY_BIND'],
    [{ HSE_LISTEN_ADDRESS: 'any' }, 'HSE_LISTEN_ADDRESS'],
    [{ HSE_PUBLIC_URL: 'https://' }, 'HSE_PUBLIC_URL'],
    [{ HSE_PUBLIC_URL: 'https://user:pw@vpn.example.com' }, 'HSE_PUBLIC_URL'],
    [{ HSE_PUBLIC_URL: 'https://vpn.example.com/?x=1' }, 'HSE_PUBLIC_URL'],
    [{ HSE_TLS: 'maybe' }, 'HSE_TLS'],
    [{ HSE_HEADER_TIMEOUT: '3601' }, 'HSE_HEADER_TIMEOUT'],
  ];
  for (const [env, variable] of cases) t.is(refused(env).variable, variable, JSON.stringify(env));
});

test('trusting everything is allowed with HSE_TRUSTED_PROXIES_ANY=1', (t) => {
  const c = parseConfig({ HSE_TRUSTED_PROXIES: '0.0.0.0/0 ::/0', HSE_TRUSTED_PROXIES_ANY: '1' });
  t.true(c.trustedProxiesAny);
  t.true(c.trustedProxies.has(parseAddress('203.0.113.9')!));
  t.true(c.trustedProxies.has(parseAddress('2001:db8::1')!));
});

test('an entry wider than one host is accepted with one warning; single hosts are not', (t) => {
  const c = parseConfig({ HSE_TRUSTED_PROXIES: '10.0.0.1, 10.0.0.2/32 ::1 2001:db8::/64 ::ffff:10.0.0.9' });
  t.is(c.warnings.length, 1);
  t.regex(c.warnings[0], /"2001:db8::\/64" is wider than one host/);
  t.is(c.trustedProxies.ranges.length, 5);
});

// ---------- properties ----------

const v4 = fc.tuple(fc.nat(255), fc.nat(255), fc.nat(255), fc.nat(255));
const dotted = (a: number[]) => a.join('.');
const toInt = (a: number[]) => ((a[0] << 24) >>> 0) + (a[1] << 16) + (a[2] << 8) + a[3];

test('an IPv4 CIDR: covers all iff /0, host bits = 32 - prefix, and the mapped spelling means the same', (t) => {
  fc.assert(
    fc.property(v4, fc.integer({ min: 0, max: 32 }), v4, (base, prefix, probe) => {
      const plain = parseEntry(`${dotted(base)}/${prefix}`);
      const mapped = parseEntry(`::ffff:${dotted(base)}/${96 + prefix}`);
      const mask = prefix === 0 ? 0 : (0xffffffff << (32 - prefix)) >>> 0;
      const inside = (toInt(probe) & mask) >>> 0 === (toInt(base) & mask) >>> 0;
      const addr = parseAddress(dotted(probe))!;
      const has = (r: ReturnType<typeof parseEntry>) => r.ranges.some(([a, b]) => a.kind() === addr.kind() && addr.match([a, b] as never));
      return (
        (plain.coversAll === 'IPv4') === (prefix === 0) &&
        plain.hostBits === 32 - prefix &&
        mapped.hostBits === 32 - prefix &&
        has(plain) === inside &&
        has(mapped) === inside
      );
    }),
    { numRuns: 2000 },
  );
  t.pass();
});

test('entries that together cover all of IPv4 are recognised however they are cut', (t) => {
  // Model: cut IPv4 into its 16 top-level /4 blocks; an entry of prefix p <= 4 covers 2^(4-p) consecutive blocks.
  const entry = fc.tuple(fc.integer({ min: 1, max: 4 }), fc.nat(15));
  fc.assert(
    fc.property(fc.array(entry, { maxLength: 12 }), (es) => {
      const blocks = new Set<number>();
      const texts = es.map(([p, i]) => {
        const span = 1 << (4 - p);
        const first = Math.floor(i / span) * span;
        for (let b = first; b < first + span; b++) blocks.add(b);
        return `${first << 4}.0.0.0/${p}`;
      });
      const covered = familiesCoveredTogether(texts.map(parseEntry)).includes('IPv4');
      return covered === (blocks.size === 16);
    }),
    { numRuns: 2000 },
  );
  t.pass();
});

test('an address that is not four-part decimal or valid IPv6 is garbage', (t) => {
  for (const g of ['', 'unknown', '10', '10.1', '0x0a.0.0.1', '010.0.0.1', '1.2.3.4.5', '1.2.3.256', 'fe80::1%lo', '::ffff:1.2.3', '1:2:3:4:5:6:7:8:9']) {
    t.is(parseAddress(g), null, g);
  }
  t.is(parseAddress('::ffff:10.0.0.1')!.toString(), '10.0.0.1');
  t.is(parseAddress('[2001:DB8::1]')!.toString(), '2001:db8::1');
});
