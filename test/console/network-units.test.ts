// The network pages' pure pieces: the Machines filter (read from anybody's query string), the time and device
// wording the pages use, password rules, that a rendered machine row escapes what a device reports about itself, and
// how Access controls lists a policy's tests against the errors of a check.
import test from 'ava';
import fc from 'fast-check';
import type { NodeView } from '../../shared/model.ts';
import { passwordProblem } from '../../services/console/src/accounts/password-rules.ts';
import { applyMachineFilter, isFiltered, machineFilterParams, readMachineFilter } from '../../services/console/src/network/machine-filter.ts';
import { ago, clientVersion, expiryState, osLabel, relative, shortKey } from '../../services/console/src/views/format.ts';
import { machinesLive } from '../../services/console/src/views/machines-page.ts';
import { outlineTests } from '../../services/console/src/acls/policy-tests.ts';
import type { RouteView } from '../../shared/admin-client.ts';

const NOW = Date.parse('2025-06-01T12:00:00Z');
const at = (ms: number) => new Date(NOW + ms).toISOString();
const DAY = 86_400_000;

function node(over: Partial<NodeView>): NodeView {
  return {
    id: 1,
    stableId: 'n1',
    userId: 1,
    machineKey: `mkey:${'a'.repeat(64)}`,
    nodeKey: `nodekey:${'b'.repeat(64)}`,
    discoKey: '',
    hostname: 'host',
    givenName: 'host',
    ipv4: '100.64.0.1',
    ipv6: 'fd7a:115c:a1e0::1',
    hostinfo: { OS: 'linux', IPNVersion: '1.102.3-t0-g0' },
    endpoints: [],
    homeDerp: 900,
    capVersion: 130,
    created: at(-DAY),
    lastSeen: null,
    expiry: null,
    keyExpiryDisabled: false,
    ephemeral: false,
    authKeyId: 1,
    registeredBy: 'authkey',
    tags: [],
    approvedRoutes: [],
    online: false,
    user: 'alice',
    fqdn: 'host.hse.internal',
    expired: false,
    ...over,
  };
}

test('the Machines filter takes any query string without throwing, and keeps only values it knows', (t) => {
  const value = fc.oneof(fc.string(), fc.array(fc.string(), { maxLength: 3 }), fc.constant(undefined));
  fc.assert(
    fc.property(fc.dictionary(fc.string({ maxLength: 10 }), value), (q) => {
      const f = readMachineFilter(q);
      return (
        ['', 'online', 'offline'].includes(f.status) && ['', 'soon', 'expired'].includes(f.expiry) && f.q.length <= 200 && f.owner === f.owner.toLowerCase()
      );
    }),
  );
  const f = readMachineFilter({ q: '  web  ', owner: 'Alice', status: 'online', expiry: 'bogus', routes: 'all', other: 'x' });
  t.deepEqual(f, { q: 'web', owner: 'alice', status: 'online', expiry: '', routes: '' });
  t.is(machineFilterParams(f).toString(), 'q=web&owner=alice&status=online');
  t.true(isFiltered(f));
  t.false(isFiltered(readMachineFilter({})));
  t.deepEqual(readMachineFilter({ status: ['online', 'offline'] }).status, '', 'a repeated value counts as none');
});

test('the Machines filter: owner, online state, expiring soon or expired, and words anywhere', (t) => {
  const nodes = [
    node({ id: 1, givenName: 'web', user: 'alice', online: true, expiry: at(3 * DAY), hostinfo: { OS: 'linux', Distro: 'debian' } }),
    node({ id: 2, givenName: 'db', user: 'bob', online: false, expiry: at(-DAY), ipv4: '100.64.0.9' }),
    node({ id: 3, givenName: 'nas', user: 'bob', online: true, expiry: at(90 * DAY), hostinfo: { OS: 'windows' } }),
    node({ id: 4, givenName: 'pi', user: 'carol', online: false, expiry: null }),
  ];
  const ids = (q: Record<string, string>) => applyMachineFilter(nodes, readMachineFilter(q), new Map(), NOW).map((n) => n.id);
  t.deepEqual(ids({}), [1, 2, 3, 4]);
  t.deepEqual(ids({ owner: 'bob' }), [2, 3]);
  t.deepEqual(ids({ status: 'online' }), [1, 3]);
  t.deepEqual(ids({ status: 'offline' }), [2, 4]);
  t.deepEqual(ids({ expiry: 'soon' }), [1]);
  t.deepEqual(ids({ expiry: 'expired' }), [2]);
  t.deepEqual(ids({ q: 'DEBIAN' }), [1]);
  t.deepEqual(ids({ q: '100.64.0.9' }), [2]);
  t.deepEqual(ids({ q: 'windows bob' }), [3]);
  t.deepEqual(ids({ q: 'windows alice' }), []);
  t.deepEqual(ids({ owner: 'bob', status: 'online' }), [3]);
});

test('the Machines filter: routes waiting for approval, machines serving routes, and tags in the search', (t) => {
  const nodes = [node({ id: 1, givenName: 'router', tags: ['tag:router'] }), node({ id: 2, givenName: 'exit' }), node({ id: 3, givenName: 'laptop' })];
  const route = (nodeId: number, prefix: string, approved: boolean): RouteView => ({
    nodeId,
    node: '',
    prefix,
    advertised: true,
    approved,
    active: approved,
    primary: approved && prefix !== 'exit',
    online: true,
  });
  const routes = new Map([
    [1, [route(1, '10.0.0.0/24', true), route(1, '10.1.0.0/24', false)]],
    [2, [route(2, 'exit', true)]],
  ]);
  const ids = (q: Record<string, string>) => applyMachineFilter(nodes, readMachineFilter(q), routes, NOW).map((n) => n.id);
  t.deepEqual(ids({ routes: 'pending' }), [1]);
  t.deepEqual(ids({ routes: 'serving' }), [1, 2]);
  t.deepEqual(ids({ q: 'tag:router' }), [1]);
  t.is(machineFilterParams(readMachineFilter({ routes: 'pending' })).toString(), 'routes=pending');
});

test("a policy's tests are listed with their lines; an error inside one fails it, an error elsewhere means none ran", (t) => {
  const text = `{
  // comment, trailing commas
  "acls": [{ "action": "accept", "src": ["*"], "dst": ["*:*"] }],
  "tests": [
    { "src": "alice@", "accept": ["tag:db:5432"] },
    {
      "src": "bob@",
      "deny": ["tag:db:5432"],
    },
  ],
  "sshTests": [{ "src": "alice@", "dst": ["tag:db"], "accept": ["root"] }],
}`;
  const none = outlineTests(text, []);
  t.false(none.unreadable);
  t.true(none.ran);
  t.deepEqual(
    none.entries.map((e) => [e.section, e.line, e.endLine, e.src, e.asserts.join(' · '), e.failures.length]),
    [
      ['tests', 5, 5, 'alice@', 'may reach tag:db:5432', 0],
      ['tests', 6, 9, 'bob@', 'may not reach tag:db:5432', 0],
      ['sshTests', 11, 11, 'alice@', 'may log in to tag:db as root', 0],
    ],
  );
  const failed = outlineTests(text, [{ line: 8, column: 16, message: 'test failed: bob@ can reach tag:db:5432' }]);
  t.true(failed.ran);
  t.deepEqual(
    failed.entries.map((e) => e.failures.length),
    [0, 1, 0],
  );
  const elsewhere = outlineTests(text, [{ line: 3, column: 42, message: 'bad' }]);
  t.false(elsewhere.ran, 'an error outside the tests: the engine did not run them');
  t.true(outlineTests('{ "tests": [', []).unreadable);
  t.deepEqual(outlineTests(null, []).entries, []);
});

test('times read as people say them, in both directions', (t) => {
  t.is(ago(at(-10_000), NOW), 'just now');
  t.is(ago(at(-5 * 60_000), NOW), '5 min ago');
  t.is(ago(at(-3 * 3_600_000), NOW), '3 h ago');
  t.is(ago(at(-DAY), NOW), '1 day ago');
  t.is(ago(at(-3 * DAY), NOW), '3 days ago');
  t.is(ago(null, NOW), 'never');
  t.is(relative(at(DAY), NOW), 'in 1 day');
  t.is(relative(at(180 * DAY), NOW), 'in 6 months');
  t.is(relative(at(-2 * 3_600_000), NOW), '2 h ago');
  t.is(expiryState(null, NOW), 'never');
  t.is(expiryState(at(-1), NOW), 'expired');
  t.is(expiryState(at(6 * DAY), NOW), 'soon');
  t.is(expiryState(at(8 * DAY), NOW), 'later');
  t.is(expiryState('not a time', NOW), 'never');
});

test('what a device reports reads as OS and version; missing or odd values never throw', (t) => {
  t.is(osLabel({ OS: 'linux', Distro: 'debian', DistroVersion: '12' }), 'Linux · Debian 12');
  t.is(osLabel({ OS: 'windows', OSVersion: '10.0.22631' }), 'Windows 10.0.22631');
  t.is(osLabel({ OS: 'macOS', OSVersion: '14.5' }), 'macOS 14.5');
  t.is(osLabel(null), '');
  t.is(osLabel({ OS: 42 }), '');
  t.is(clientVersion({ IPNVersion: '1.102.3-t1234-gabcd' }), '1.102.3');
  t.is(clientVersion({}), '');
  t.is(shortKey(`nodekey:${'0123456789abcdef'.repeat(4)}`), 'nodekey:01234567…cdef');
  fc.assert(
    fc.property(
      fc.jsonValue(),
      (h) => typeof osLabel(h as Record<string, unknown>) === 'string' && typeof clientVersion(h as Record<string, unknown>) === 'string',
    ),
  );
});

test('a machine row escapes what the device chose to call itself', (t) => {
  const evil = node({ givenName: 'x', hostname: '<img src=x onerror=alert(1)>', hostinfo: { OS: '<script>alert(1)</script>', IPNVersion: '"><b>' } });
  const out = machinesLive(
    {
      nodes: [evil],
      shown: [evil],
      pending: [],
      users: [],
      routes: new Map(),
      viewer: { username: 'admin', role: 'admin', csrf: 't' },
      filter: readMachineFilter({}),
      publicOrigin: 'https://vpn.example.com',
    },
    NOW,
  ).value;
  t.false(out.includes('<script>'));
  t.false(out.includes('<b>'));
  t.true(out.includes('&lt;script&gt;'));
});

test('passwords: twelve characters or more, at most 1024', (t) => {
  t.truthy(passwordProblem('short'));
  t.is(passwordProblem('twelve chars'), null);
  t.truthy(passwordProblem('x'.repeat(1025)));
});
