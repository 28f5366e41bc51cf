// The policy's own tests and sshTests: run when it is checked, by identity (a device that has nothing but the named
// identity) and against every existing device with that identity; a failing one refuses the policy at its line.
import test from 'ava';
import { compilePolicy } from '../../services/coordination/src/policy/index.ts';
import { at, errors, node, policyText, snapshot } from './tailnet.ts';

/** The line of a rule: the line of its opening brace, just above its first key. */
const ruleLine = (text: string, firstKey: string, occurrence = 1) => Number(at(text, firstKey, occurrence).match(/line (\d+)/)![1]) - 1;

const owners = { 'tag:db': ['alice@'], 'tag:web': ['alice@'], 'tag:ci': ['alice@'] };
const empty = snapshot([]);

test('tests pass against the policy alone, with no device in the tailnet yet', (t) => {
  const text = policyText({
    groups: { 'group:eng': ['alice@', 'idp:sales'] },
    tagOwners: owners,
    hosts: { printer: '192.168.1.20' },
    acls: [
      { action: 'accept', src: ['group:eng'], dst: ['tag:db:5432'] },
      { action: 'accept', src: ['tag:web'], proto: 'udp', dst: ['tag:db:53'] },
      { action: 'accept', src: ['autogroup:member'], dst: ['printer:631'] },
    ],
    tests: [
      { src: 'alice@', accept: ['tag:db:5432', 'printer:631'], deny: ['tag:db:22', 'tag:web:443'] },
      { src: 'group:eng', accept: ['tag:db:5432'] },
      { src: 'tag:web', proto: 'udp', accept: ['tag:db:53'], deny: ['printer:631'] },
      { src: 'tag:web', deny: ['tag:db:53'] },
    ],
  });
  t.deepEqual(errors(text, empty), []);
});

test('a failing accept refuses the policy at that entry, saying who cannot reach what', (t) => {
  const text = policyText({
    tagOwners: owners,
    acls: [{ action: 'accept', src: ['alice@'], dst: ['tag:db:5432'] }],
    tests: [{ src: 'bob@', accept: ['tag:db:5432'] }],
  });
  t.deepEqual(errors(text, empty), [`${at(text, '"tag:db:5432"', 2)}: test failed: bob@ cannot reach tag:db:5432, but the test says accept`]);
});

test('a failing deny names the rule that lets it through', (t) => {
  const text = policyText({
    tagOwners: owners,
    acls: [
      { action: 'accept', src: ['bob@'], dst: ['tag:web:80'] },
      { action: 'accept', src: ['autogroup:member'], dst: ['tag:db:*'] },
    ],
    tests: [{ src: 'bob@', deny: ['tag:db:5432'] }],
  });
  t.deepEqual(errors(text, empty), [
    `${at(text, '"tag:db:5432"')}: test failed: bob@ can reach tag:db:5432 through acls[1] (line ${ruleLine(text, '"action"', 2)}), but the test says deny`,
  ]);
});

test('deny also holds for existing devices: a device with an extra tag, or one a rule names by address', (t) => {
  const snap = snapshot([node(5, ['tag:web', 'tag:ci']), node(1, 'alice')]);
  const text = policyText({
    tagOwners: owners,
    acls: [
      { action: 'accept', src: ['tag:ci'], dst: ['tag:db:22'] },
      { action: 'accept', src: ['100.64.0.1'], dst: ['tag:db:5432'] },
    ],
    tests: [
      { src: 'tag:web', deny: ['tag:db:22'] },
      { src: 'alice@', deny: ['tag:db:5432'] },
    ],
  });
  t.deepEqual(errors(text, snap), [
    `${at(text, '"tag:db:22"', 2)}: test failed: tagged tag:web,tag:ci device 100.64.0.5 can reach tag:db:22 through acls[0] (line ${ruleLine(text, '"action"', 1)}), but the test says deny`,
    `${at(text, '"tag:db:5432"', 2)}: test failed: alice@'s device 100.64.0.1 can reach tag:db:5432 through acls[1] (line ${ruleLine(text, '"action"', 2)}), but the test says deny`,
  ]);
  // With no such devices, the same policy passes: the identities alone cannot reach.
  t.deepEqual(errors(text, empty), []);
});

test('accept asks about the identity, not about a device a rule happens to name by address', (t) => {
  const snap = snapshot([node(1, 'alice')]);
  const text = policyText({
    tagOwners: owners,
    acls: [{ action: 'accept', src: ['100.64.0.1'], dst: ['tag:db:22'] }],
    tests: [{ src: 'alice@', accept: ['tag:db:22'] }],
  });
  t.deepEqual(errors(text, snap), [`${at(text, '"tag:db:22"', 2)}: test failed: alice@ cannot reach tag:db:22, but the test says accept`]);
  const byAddress = policyText({
    tagOwners: owners,
    acls: [{ action: 'accept', src: ['100.64.0.1'], dst: ['tag:db:22'] }],
    tests: [{ src: '100.64.0.1', accept: ['tag:db:22'] }],
  });
  t.deepEqual(errors(byAddress, snap), []);
});

test('autogroup:self and autogroup:internet as test destinations', (t) => {
  const text = policyText({
    acls: [
      { action: 'accept', src: ['autogroup:member'], dst: ['autogroup:self:22'] },
      { action: 'accept', src: ['bob@'], dst: ['autogroup:internet:*'] },
    ],
    tests: [
      { src: 'alice@', accept: ['autogroup:self:22'], deny: ['autogroup:self:80', 'bob@:22', 'autogroup:internet:*'] },
      { src: 'bob@', accept: ['autogroup:internet:*'] },
    ],
  });
  t.deepEqual(errors(text, empty), []);
});

test('test entries that cannot be evaluated are refused: CIDRs, port ranges, icmp, unknown names', (t) => {
  const text = policyText({
    tagOwners: owners,
    acls: [{ action: 'accept', src: ['alice@'], dst: ['tag:db:*'] }],
    tests: [
      { src: 'alice@', accept: ['10.0.0.0/8:22', '100.64.0.9/32:22', 'tag:db:8000-8100', 'tag:db:*', 'autogroup:internet:443'] },
      { src: 'alice@', proto: 'icmp', accept: ['tag:db:1'] },
      { src: 'group:ghosts', accept: ['tag:db:22'] },
      { src: 'dave@', accept: ['tag:db:22'] },
    ],
  });
  t.deepEqual(errors(text, empty), [
    `${at(text, '"10.0.0.0/8:22"')}: 10.0.0.0/8:22: a test destination is one device or address, not a range`,
    `${at(text, '"100.64.0.9/32:22"')}: 100.64.0.9/32:22: a test destination is one device or address, not a range`,
    `${at(text, '"tag:db:8000-8100"')}: tag:db:8000-8100: a test destination has one port (1-65535), not "8000-8100"`,
    `${at(text, '"tag:db:*"', 2)}: tag:db:*: a test destination has one port (1-65535), not "*"`,
    `${at(text, '"autogroup:internet:443"')}: autogroup:internet:443: autogroup:internet is tested as a whole (may the source use exit nodes?): write autogroup:internet:*`,
    `${at(text, '"icmp"')}: a test's proto is tcp, udp or sctp, not icmp`,
    `${at(text, '"group:ghosts"')}: test source: group:ghosts is not defined in groups`,
    `${at(text, '"dave@"')}: test source: dave@ is not a user of this tailnet`,
  ]);
});

test('sshTests: accept and deny local users; autogroup:nonroot never admits root', (t) => {
  const text = policyText({
    tagOwners: owners,
    ssh: [
      { action: 'accept', src: ['alice@'], dst: ['tag:db'], users: ['autogroup:nonroot'] },
      { action: 'accept', src: ['autogroup:member'], dst: ['autogroup:self'], users: ['root'] },
    ],
    sshTests: [
      { src: 'alice@', dst: ['tag:db'], accept: ['postgres', 'alice'], deny: ['root'] },
      { src: 'bob@', dst: ['tag:db', 'alice@'], deny: ['root', 'bob'] },
      { src: 'bob@', dst: ['autogroup:self'], accept: ['root'] },
    ],
  });
  t.deepEqual(errors(text, empty), []);
});

test('sshTests: a failing assertion is refused at the user name', (t) => {
  const text = policyText({
    tagOwners: owners,
    ssh: [{ action: 'accept', src: ['alice@'], dst: ['tag:db'], users: ['ubuntu'] }],
    sshTests: [{ src: 'alice@', dst: ['tag:db'], accept: ['root'], deny: ['ubuntu'], check: ['ubuntu'] }],
  });
  t.deepEqual(errors(text, empty), [
    `${at(text, '"root"')}: SSH test failed: alice@ cannot log in to tag:db as root, but the test says accept`,
    `${at(text, '"ubuntu"', 2)}: SSH test failed: alice@ can log in to tag:db as ubuntu through ssh[0] (line ${ruleLine(text, '"action"')}), but the test says deny`,
    `${at(text, '"ubuntu"', 3)}: check mode needs a recent browser sign-in, which hse does not offer yet; there are no check rules to test`,
  ]);
});

test('a policy whose tests fail can still be loaded without running them (a stored policy at start)', (t) => {
  const text = policyText({ acls: [], tests: [{ src: 'alice@', accept: ['bob@:22'] }] });
  t.is(errors(text, empty).length, 1);
  t.deepEqual(errors(text, empty, { runTests: false }), []);
});

test("every assertion comes back with its outcome, for the console's list of test results", (t) => {
  const text = policyText({
    tagOwners: owners,
    acls: [{ action: 'accept', src: ['alice@'], dst: ['tag:db:5432'] }],
    ssh: [{ action: 'accept', src: ['alice@'], dst: ['tag:db'], users: ['postgres'] }],
    tests: [{ src: 'alice@', accept: ['tag:db:5432'], deny: ['tag:db:22'] }],
    sshTests: [{ src: 'alice@', dst: ['tag:db'], accept: ['postgres'], deny: ['root'] }],
  });
  const r = compilePolicy(text, empty, { strict: true });
  t.true(r.ok);
  const line = (needle: string, occurrence = 1) => Number(at(text, needle, occurrence).match(/line (\d+)/)![1]);
  t.deepEqual(
    r.tests.map((x) => [x.origin, x.line, x.assertion, x.passed, x.detail]),
    [
      ['tests[0]', line('"tag:db:5432"', 2), 'alice@ → tag:db:5432 accept', true, `allowed by acls[0] (line ${ruleLine(text, '"action"')})`],
      ['tests[0]', line('"tag:db:22"'), 'alice@ → tag:db:22 deny', true, 'no rule allows it'],
      ['sshTests[0]', line('"postgres"', 2), 'alice@ → tag:db as postgres accept', true, `allowed by ssh[0] (line ${ruleLine(text, '"action"', 2)})`],
      ['sshTests[0]', line('"root"'), 'alice@ → tag:db as root deny', true, 'no rule allows it'],
    ],
  );
});
