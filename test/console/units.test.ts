// The console's small pure pieces, with property tests where the input is anybody's: CSV cells, HTML escaping, the
// post-sign-in redirect target, time and address filters, the rate-limit key, password hashes and CSRF tokens.
import test from 'ava';
import fc from 'fast-check';
import { csvCell } from '../../services/console/src/activity/csv.ts';
import { parseTime, readFilter } from '../../services/console/src/activity/filter.ts';
import { compareIds } from '../../services/console/src/activity/query.ts';
import { networkOf } from '../../services/console/src/auth/account-throttle.ts';
import { attemptedName } from '../../services/console/src/auth/login-routes.ts';
import { limitKey } from '../../services/console/src/auth/signin-limit.ts';
import { clientAddress } from '../../services/console/src/request/client-address.ts';
import { safeNext } from '../../services/console/src/request/public-url.ts';
import { tokensMatch } from '../../services/console/src/security/csrf.ts';
import { hashPassword, verifyPassword } from '../../services/console/src/security/password-hash.ts';
import { escapeHtml, html } from '../../services/console/src/views/html.ts';

/** Reads one CSV cell back the way a spreadsheet would (RFC 4180 quoting). */
function unquote(cell: string): string {
  return cell.startsWith('"') ? cell.slice(1, -1).replace(/""/g, '"') : cell;
}

test('CSV: a cell reads back as the value, with an apostrophe in front exactly when it could start a formula', (t) => {
  fc.assert(
    fc.property(fc.string({ unit: 'binary' }), (v) => {
      const back = unquote(csvCell(v));
      const risky = /^[=+\-@\t\r]/.test(v);
      return back === (risky ? `'${v}` : v) && !/^[=+\-@\t\r]/.test(back);
    }),
  );
  t.is(csvCell('=1+1'), "'=1+1");
  t.is(csvCell('a,b'), '"a,b"');
  t.is(csvCell('say "hi"'), '"say ""hi"""');
});

test('HTML: interpolated text never carries markup', (t) => {
  fc.assert(fc.property(fc.string(), (v) => !/[<>"']/.test(html`${v}`.value)));
  t.is(html`<p>${'<b>&'}</p>`.value, '<p>&lt;b&gt;&amp;</p>');
  t.is(html`<p>${html`<b>ok</b>`}</p>`.value, '<p><b>ok</b></p>');
  t.is(escapeHtml(`"'`), '&quot;&#39;');
});

test('after sign-in the console only ever sends you to a console path', (t) => {
  fc.assert(
    fc.property(fc.string(), (v) => {
      const n = safeNext(v);
      return n === '/console' || (n.startsWith('/console/') && !n.includes('//') && !n.includes('\\'));
    }),
  );
  t.is(safeNext('/console/logs?action=console.signin'), '/console/logs?action=console.signin');
  for (const evil of [
    'https://evil.example',
    '//evil.example',
    '/console//evil.example',
    '/console/\\evil',
    '/consolex',
    'javascript:alert(1)',
    '/console/login',
  ])
    t.is(safeNext(evil), '/console', evil);
});

test('time filters: dates, minutes and ISO times are UTC; a bare end date covers its whole day; junk is reported', (t) => {
  t.is(parseTime('2025-01-31', false), Date.UTC(2025, 0, 31));
  t.is(parseTime('2025-01-31', true), Date.UTC(2025, 1, 1) - 1);
  t.is(parseTime('2025-01-31T14:05', false), Date.UTC(2025, 0, 31, 14, 5));
  t.is(parseTime('2025-01-31T14:05', true), Date.UTC(2025, 0, 31, 14, 5, 59, 999));
  t.is(parseTime('2025-01-31T14:05:06+02:00', false), Date.UTC(2025, 0, 31, 12, 5, 6));
  t.is(parseTime('1700000000000', false), 1_700_000_000_000);
  t.is(parseTime('', false), undefined);
  t.true(Number.isNaN(parseTime('yesterday', false)));
  const f = readFilter({ from: 'soon', address: '300.1.1.1' });
  t.is(f.errors.length, 2);
  t.false(f.active);
});

test('address filter matches single addresses and ranges, IPv4 and IPv6', (t) => {
  const entry = (ip: string) => ({ id: '1-0', time: '', action: 'a', actor: 'b', ip, target: '', details: {} });
  const cidr = readFilter({ address: '10.0.0.0/8' });
  t.true(cidr.test(entry('10.9.8.7')));
  t.false(cidr.test(entry('11.0.0.1')));
  t.false(cidr.test(entry('2001:db8::1')));
  t.false(cidr.test(entry('')));
  t.true(readFilter({ address: '2001:db8::/32' }).test(entry('2001:db8:0:0::5')));
  t.true(readFilter({ address: '::1' }).test(entry('0:0:0:0:0:0:0:1')));
});

test('stream ids compare as numbers, not text', (t) => {
  t.is(compareIds('999-0', '1000-0'), -1);
  t.is(compareIds('1000-10', '1000-9'), 1);
  t.is(compareIds('5-5', '5-5'), 0);
});

test('rate-limit budget: one per IPv4 address, one per IPv6 /64', (t) => {
  t.is(limitKey('203.0.113.7'), '203.0.113.7');
  t.is(limitKey('::ffff:203.0.113.7'), '203.0.113.7');
  t.is(limitKey('2001:db8:1:2:aaaa::1'), limitKey('2001:db8:1:2:bbbb::2'));
  t.not(limitKey('2001:db8:1:2::1'), limitKey('2001:db8:1:3::1'));
  t.is(limitKey(''), 'unknown');
});

test('account lock: one network per IPv4 /24 and per IPv6 /48, so a /48 brings no fresh networks', (t) => {
  t.is(networkOf('203.0.113.7'), '203.0.113.0/24');
  t.is(networkOf('::ffff:203.0.113.200'), '203.0.113.0/24');
  t.not(networkOf('203.0.113.7'), networkOf('203.0.114.7'));
  t.is(networkOf('2001:db8:1:ffff::1'), networkOf('2001:db8:1:2:bbbb::2'));
  t.is(networkOf('2001:db8:1::1'), '2001:db8:1::/48');
  t.not(networkOf('2001:db8:1::1'), networkOf('2001:db8:2::1'));
  t.is(networkOf(''), 'unknown');
});

test('the client address is read from the router header only, normalised, and junk is ignored', (t) => {
  t.is(clientAddress({ 'x-hse-client-ip': '::ffff:192.0.2.1', 'x-forwarded-for': '6.6.6.6' }), '192.0.2.1');
  t.is(clientAddress({ 'x-forwarded-for': '6.6.6.6' }), '');
  t.is(clientAddress({ 'x-hse-client-ip': 'not an address' }), '');
});

test('attempted user names are stored without control characters and bounded', (t) => {
  t.is(attemptedName('ad\u0000min\r\n'), 'admin');
  t.is(attemptedName('x'.repeat(500)).length, 64);
});

test('passwords: argon2id PHC strings that verify the right password only; a malformed hash never matches', async (t) => {
  const h = await hashPassword('s3cret pass');
  t.regex(h, /^\$argon2id\$v=19\$m=19456,t=2,p=1\$[A-Za-z0-9+/]+\$[A-Za-z0-9+/]+$/);
  t.true(await verifyPassword('s3cret pass', h));
  t.false(await verifyPassword('s3cret pasS', h));
  t.not(await hashPassword('s3cret pass'), h, 'salted');
  t.false(await verifyPassword('x', 'plaintext'));
  t.false(await verifyPassword('x', '$argon2id$v=19$m=0,t=0,p=0$AAAAAAAAAAAAAAAAAAAAAA$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA'));
});

test('CSRF tokens compare equal only when identical; empty never matches', (t) => {
  t.true(tokensMatch('abc', 'abc'));
  t.false(tokensMatch('abc', 'abd'));
  t.false(tokensMatch('', ''));
  t.false(tokensMatch('abc', ''));
});
