// Client-address resolution (router/src/client-ip.ts) against a plain reference model, plus the named cases of
// issue 2. The model works on addresses as numbers and knows by construction which spellings are addresses and which
// are garbage, so it shares no parsing or matching code with the implementation.
import test from 'ava';
import fc from 'fast-check';
import { resolveClientAddress } from '../../router/src/client-ip.ts';
import { parseEntry, TrustedProxies } from '../../shared/trusted-proxies.ts';

// ---------- the model ----------

type Addr = { v: 4; n: number } | { v: 6; n: bigint };
interface Range {
  base: Addr;
  prefix: number;
}
/** One X-Forwarded-For entry: an address in some spelling, or garbage. */
type Entry = { addr: Addr; text: string } | { garbage: string };

const V6_MAX = (1n << 128n) - 1n;

function v4(a: number, b: number, c: number, d: number): Addr {
  return { v: 4, n: ((a << 24) >>> 0) + (b << 16) + (c << 8) + d };
}
function v6(n: bigint): Addr {
  return { v: 6, n };
}

function inRange(a: Addr, r: Range): boolean {
  if (a.v === 4 && r.base.v === 4) {
    if (r.prefix === 0) return true;
    const mask = (0xffffffff << (32 - r.prefix)) >>> 0;
    return (a.n & mask) >>> 0 === (r.base.n & mask) >>> 0;
  }
  if (a.v === 6 && r.base.v === 6) {
    const mask = r.prefix === 0 ? 0n : (V6_MAX >> BigInt(128 - r.prefix)) << BigInt(128 - r.prefix);
    return (a.n & mask) === (r.base.n & mask);
  }
  return false;
}

function dotted(n: number): string {
  return [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join('.');
}

function groups(n: bigint): number[] {
  const g: number[] = [];
  for (let i = 7; i >= 0; i--) g.push(Number((n >> BigInt(i * 16)) & 0xffffn));
  return g;
}

/** RFC 5952: lower-case hex, no leading zeros, the longest run (2+) of zero groups as "::", leftmost on a tie. */
function rfc5952(n: bigint): string {
  const g = groups(n);
  let bestStart = -1;
  let bestLen = 1;
  for (let i = 0; i < 8; ) {
    if (g[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && g[j] === 0) j++;
    if (j - i > bestLen) {
      bestStart = i;
      bestLen = j - i;
    }
    i = j;
  }
  const hex = g.map((x) => x.toString(16));
  if (bestStart === -1) return hex.join(':');
  return `${hex.slice(0, bestStart).join(':')}::${hex.slice(bestStart + bestLen).join(':')}`;
}

function canonical(a: Addr): string {
  return a.v === 4 ? dotted(a.n) : rfc5952(a.n);
}

/** The trusted-client-address rule (router/src/client-ip.ts), written as plainly as possible. */
function model(peer: Addr, lines: Entry[][], trusted: Range[]): string {
  const isTrusted = (a: Addr) => trusted.some((r) => inRange(a, r));
  if (!isTrusted(peer)) return canonical(peer);
  const entries = lines.flat();
  let client = peer;
  for (let i = entries.length - 1; i >= 0; i--) {
    const e = entries[i];
    if ('garbage' in e) break;
    client = e.addr;
    if (!isTrusted(e.addr)) break;
  }
  return canonical(client);
}

// ---------- generators ----------

// Small pools so that entries hit trusted ranges (and each other) often.
const v4Pool = fc.oneof(
  fc.constantFrom(v4(10, 0, 0, 1), v4(10, 0, 0, 2), v4(10, 0, 0, 7), v4(10, 0, 0, 200), v4(192, 168, 1, 1)),
  fc.constantFrom(v4(203, 0, 113, 9), v4(198, 51, 100, 7), v4(127, 0, 0, 1), v4(0, 0, 0, 0), v4(255, 255, 255, 255)),
  fc.integer({ min: 0, max: 0xffffffff }).map((n): Addr => ({ v: 4, n })),
);
const DOC = 0x20010db8n << 96n;
const v6Pool = fc.oneof(
  fc.constantFrom(v6(DOC + 1n), v6(DOC + 2n), v6(DOC + 0x100n), v6(DOC + (1n << 64n)), v6(1n), v6(0xfd00n << 112n)),
  fc
    .bigInt({ min: 0n, max: V6_MAX })
    .filter((n) => n >> 32n !== 0xffffn)
    .map(v6),
);
const addr = fc.oneof(v4Pool, v6Pool);

function fullV6(n: bigint, upper: boolean): string {
  const s = groups(n)
    .map((x) => x.toString(16).padStart(4, '0'))
    .join(':');
  return upper ? s.toUpperCase() : s;
}

/** Every way a proxy or a socket may write the same address. */
function spelling(a: Addr): fc.Arbitrary<string> {
  if (a.v === 4) {
    const d = dotted(a.n);
    const hi = (a.n >>> 16).toString(16);
    const lo = (a.n & 0xffff).toString(16);
    return fc.constantFrom(d, `::ffff:${d}`, `::FFFF:${d}`, `0:0:0:0:0:ffff:${d}`, `::ffff:${hi}:${lo}`, `[::ffff:${d}]`);
  }
  return fc.constantFrom(rfc5952(a.n), fullV6(a.n, false), fullV6(a.n, true), `[${rfc5952(a.n)}]`);
}

const GARBAGE = [
  '',
  'unknown',
  '_hidden',
  'example.com',
  '1.2.3',
  '1.2.3.4.5',
  '256.1.1.1',
  '01.2.3.4',
  '127.1',
  '0x7f.0.0.1',
  '1.2.3.4:8080',
  '[2001:db8::1]:443',
  'fe80::1%eth0',
  '2001:db8::g',
  '1::2::3',
  ':::1',
  '::ffff:256.1.1.1',
  'for=1.2.3.4',
  '1.2.3.4 5.6.7.8',
];

const ows = fc.constantFrom('', ' ', '  ', '\t');
const entry: fc.Arbitrary<Entry> = fc.oneof(
  { weight: 5, arbitrary: addr.chain((a) => spelling(a).map((text): Entry => ({ addr: a, text }))) },
  { weight: 1, arbitrary: fc.constantFrom(...GARBAGE).map((g): Entry => ({ garbage: g })) },
);
const lines = fc.array(fc.array(entry, { minLength: 1, maxLength: 4 }), { minLength: 0, maxLength: 3 });

const range: fc.Arbitrary<Range> = fc.oneof(
  fc.record({ base: v4Pool, prefix: fc.constantFrom(32, 32, 31, 30, 24, 8) }),
  fc.record({ base: v6Pool, prefix: fc.constantFrom(128, 128, 127, 120, 112) }),
);

/** The operator's spelling of a range: bare address for a single host, CIDR, or an IPv4 range written mapped. */
function rangeText(r: Range): fc.Arbitrary<string> {
  if (r.base.v === 4) {
    const d = dotted(r.base.n);
    const opts = [`${d}/${r.prefix}`, `::ffff:${d}/${96 + r.prefix}`];
    if (r.prefix === 32) opts.push(d, `::ffff:${d}`);
    return fc.constantFrom(...opts);
  }
  const c = rfc5952(r.base.n);
  return fc.constantFrom(...(r.prefix === 128 ? [`${c}/128`, c] : [`${c}/${r.prefix}`]));
}

const trustedList = fc
  .array(range, { maxLength: 4 })
  .chain((rs) => (rs.length === 0 ? fc.constant([] as string[]) : fc.tuple(...rs.map(rangeText))).map((texts) => ({ ranges: rs, texts })));

function trust(texts: string[]): TrustedProxies {
  return new TrustedProxies(texts.map(parseEntry));
}

function headerLines(ls: Entry[][], pads: string[]): string[] {
  let p = 0;
  const pad = () => pads[p++ % pads.length] ?? '';
  return ls.map((l) => l.map((e) => `${pad()}${'garbage' in e ? e.garbage : e.text}${pad()}`).join(','));
}

// ---------- properties ----------

test('matches the reference model for any peer, X-Forwarded-For lines and trusted list', (t) => {
  fc.assert(
    fc.property(
      addr.chain((a) => spelling(a).map((s) => ({ a, s }))),
      lines,
      trustedList,
      fc.array(ows, { minLength: 1, maxLength: 8 }),
      (peer, ls, tl, pads) => {
        const got = resolveClientAddress(peer.s.replace(/^\[|\]$/g, ''), headerLines(ls, pads), trust(tl.texts));
        return got === model(peer.a, ls, tl.ranges);
      },
    ),
    { numRuns: 3000 },
  );
  t.pass();
});

test('an untrusted peer is always the client, whatever it sends', (t) => {
  fc.assert(
    fc.property(addr, lines, trustedList, (peer, ls, tl) => {
      fc.pre(!tl.ranges.some((r) => inRange(peer, r)));
      return resolveClientAddress(canonical(peer), headerLines(ls, [' ']), trust(tl.texts)) === canonical(peer);
    }),
    { numRuns: 1000 },
  );
  t.pass();
});

test('the result is the peer or one of the forwarded addresses, never anything else', (t) => {
  fc.assert(
    fc.property(addr, lines, trustedList, (peer, ls, tl) => {
      const got = resolveClientAddress(canonical(peer), headerLines(ls, ['']), trust(tl.texts));
      const candidates = [peer, ...ls.flat().flatMap((e) => ('addr' in e ? [e.addr] : []))].map(canonical);
      return got !== null && candidates.includes(got);
    }),
    { numRuns: 1000 },
  );
  t.pass();
});

// ---------- named cases ----------

const r = (peer: string | undefined, xff: string[] | undefined, trusted: string[]) => resolveClientAddress(peer, xff, trust(trusted));

test('forged X-Forwarded-For from an untrusted peer is ignored', (t) => {
  t.is(r('198.51.100.7', ['1.2.3.4'], []), '198.51.100.7');
  t.is(r('198.51.100.7', ['1.2.3.4'], ['10.0.0.1']), '198.51.100.7');
  t.is(r('::ffff:198.51.100.7', ['10.0.0.1, 1.2.3.4'], ['10.0.0.1']), '198.51.100.7');
});

test('a chain through two trusted hops yields the address the outer proxy saw', (t) => {
  const proxies = ['10.0.0.1', '10.0.0.2'];
  t.is(r('10.0.0.2', ['203.0.113.9, 10.0.0.1'], proxies), '203.0.113.9');
  // The client prepended its own forgery; the outer proxy appended the real address after it.
  t.is(r('10.0.0.2', ['6.6.6.6, 203.0.113.9, 10.0.0.1'], proxies), '203.0.113.9');
  // The same chain split over several header lines.
  t.is(r('10.0.0.2', ['6.6.6.6', '203.0.113.9', '10.0.0.1'], proxies), '203.0.113.9');
});

test('every hop trusted: the leftmost address is the client', (t) => {
  t.is(r('10.0.0.2', ['10.0.0.7, 10.0.0.1'], ['10.0.0.0/24']), '10.0.0.7');
});

test('a trusted peer without X-Forwarded-For is itself the client', (t) => {
  t.is(r('10.0.0.1', undefined, ['10.0.0.1']), '10.0.0.1');
  t.is(r('10.0.0.1', [], ['10.0.0.1']), '10.0.0.1');
});

test('IPv6 and IPv4-mapped IPv6 are normalised on both sides', (t) => {
  // A dual-stack socket reports an IPv4 peer as ::ffff:a.b.c.d; an entry written either way matches it.
  t.is(r('::ffff:10.0.0.1', ['2001:db8::5'], ['10.0.0.1']), '2001:db8::5');
  t.is(r('10.0.0.1', ['2001:db8::5'], ['::ffff:10.0.0.1']), '2001:db8::5');
  t.is(r('10.0.0.1', ['::ffff:198.51.100.7'], ['10.0.0.1/32']), '198.51.100.7');
  t.is(r('2001:db8::1', ['2001:0DB8:0000:0000:0000:0000:0000:0042'], ['2001:db8::1/128']), '2001:db8::42');
  t.is(r('2001:db8::1', ['198.51.100.7, 2001:db8::2'], ['2001:db8::/120']), '198.51.100.7');
});

test('garbage stops the walk: the address to its right is the client', (t) => {
  t.is(r('10.0.0.1', ['unknown, 203.0.113.9'], ['10.0.0.1']), '203.0.113.9');
  t.is(r('10.0.0.1', ['203.0.113.9, unknown'], ['10.0.0.1']), '10.0.0.1');
  t.is(r('10.0.0.1', ['203.0.113.9, 1.2.3.4:80, 10.0.0.2'], ['10.0.0.0/30']), '10.0.0.2');
  t.is(r('10.0.0.1', ['fe80::1%eth0'], ['10.0.0.1']), '10.0.0.1');
  t.is(r('10.0.0.1', [''], ['10.0.0.1']), '10.0.0.1');
});

test('why /32 matters: a trusted subnet that also holds clients lets them forge their address', (t) => {
  // Proxy 10.0.0.1; client 10.0.0.7 sits in the same /24 and sends "X-Forwarded-For: 1.2.3.4" through the proxy,
  // which appends 10.0.0.7.
  const viaProxy = ['1.2.3.4, 10.0.0.7'];
  t.is(r('10.0.0.1', viaProxy, ['10.0.0.0/24']), '1.2.3.4', 'the whole /24 trusted: the forgery wins');
  t.is(r('10.0.0.1', viaProxy, ['10.0.0.1/32']), '10.0.0.7', 'only the proxy trusted: the real client');
  // The same client talking to the router directly.
  t.is(r('10.0.0.7', ['1.2.3.4'], ['10.0.0.0/24']), '1.2.3.4');
  t.is(r('10.0.0.7', ['1.2.3.4'], ['10.0.0.1']), '10.0.0.7');
});

test('a peer that is not an address means a dead socket', (t) => {
  t.is(r(undefined, ['1.2.3.4'], ['10.0.0.1']), null);
});
