// A policy an operator gets wrong is refused with every problem at once, each at the line and column of the value it
// is about, in words that say what to change.
import test from 'ava';
import { compilePolicy } from '../../services/coordination/src/policy/index.ts';
import { at, errors, node, snapshot } from './tailnet.ts';

const snap = snapshot([node(1, 'alice'), node(2, 'bob'), node(3, ['tag:db'])]);

test('comments and trailing commas are accepted (HuJSON)', (t) => {
  const text = `{
  // who may reach the database
  "tagOwners": { "tag:db": ["alice@",], },
  /* a block comment */
  "acls": [ { "action": "accept", "src": ["bob@"], "dst": ["tag:db:5432"], }, ],
}`;
  t.deepEqual(errors(text, snap), []);
});

test('a syntax error names its line and column', (t) => {
  const text = `{
  "acls": [
    { "action": "accept" "src": ["bob@"], "dst": ["tag:db:5432"] }
  ]
}`;
  t.deepEqual(errors(text, snap), [`${at(text, '"src"')}: expected a comma between the entries`]);
});

test('an unclosed string is reported where it starts to go wrong', (t) => {
  const text = '{\n  "groups": { "group:eng": ["alice@] }\n}\n';
  const e = errors(text, snap);
  t.true(e.length > 0);
  t.regex(e[0], /^line 2, column \d+: /);
});

test('an unknown top-level key is refused, naming it, at the key', (t) => {
  const text = `{
  "acls": [],
  "tagowners": { "tag:db": ["alice@"] },
  "acl": []
}`;
  t.deepEqual(errors(text, snap), [
    `${at(text, '"acl"')}: unknown key "acl" in the policy; expected one of groups, tagOwners, hosts, acls, grants, tests, autoApprovers, ssh, sshTests, nodeAttrs, randomizeClientPort`,
  ]);
});

test('keys match case-insensitively, as in older Tailscale policies ("ACLs", "TagOwners")', (t) => {
  const text = '{ "TagOwners": { "tag:db": ["alice@"] }, "ACLs": [ { "Action": "accept", "Users": ["bob@"], "Ports": ["tag:db:5432"] } ] }';
  const r = compilePolicy(text, snap, { strict: true });
  t.true(r.ok);
  if (r.ok) t.true(r.policy.mayReach(2, 3, 6, 5432));
});

test('an unknown field in a rule is refused (a typo must not silently change access)', (t) => {
  const text = '{ "acls": [ { "action": "accept", "src": ["bob@"], "dts": ["alice@:22"] } ] }';
  t.deepEqual(errors(text, snap), [
    `${at(text, '{ "action"')}: acls[0] has no "dst" (which devices and ports it opens)`,
    `${at(text, '"dts"')}: unknown key "dts" in acls[0]; expected one of action, src, dst, proto, users, ports`,
  ]);
});

test('a key given twice is refused, pointing at the second', (t) => {
  const text = '{\n  "groups": { "group:eng": ["alice@"] },\n  "groups": { "group:ops": ["bob@"] }\n}';
  t.deepEqual(errors(text, snap), [`${at(text, '"groups"', 2)}: "groups" appears twice in the policy (first on line 2)`]);
});

test('a group defined twice is refused', (t) => {
  const text = '{ "groups": {\n "group:eng": ["alice@"],\n "group:eng": ["bob@"] } }';
  t.deepEqual(errors(text, snap), [`${at(text, '"group:eng"', 2)}: group:eng is defined twice in groups (first on line 2)`]);
});

test('sections hse does not implement are refused with a sentence saying so', (t) => {
  const text = '{ "postures": { "posture:x": [] }, "ipsets": {} }';
  t.deepEqual(errors(text, snap), [
    `${at(text, '"postures"')}: device posture is not supported by hse; remove the postures section`,
    `${at(text, '"ipsets"')}: IP sets are not supported by hse yet; use hosts for named addresses and CIDRs`,
  ]);
});

test('every reference problem comes back at once, each at its own value', (t) => {
  const text = `{
  "tagOwners": { "tag:db": ["alice@"] },
  "acls": [
    { "action": "accept", "src": ["group:eng"], "dst": ["tag:web:443"] },
    { "action": "accept", "src": ["bob@"], "dst": ["printer:631"] }
  ]
}`;
  t.deepEqual(errors(text, snap), [
    `${at(text, '"group:eng"')}: group:eng is not defined in groups`,
    `${at(text, '"tag:web:443"')}: tag:web is not defined in tagOwners (every tag needs an entry there saying who may use it)`,
    `${at(text, '"printer:631"')}: printer is not defined in hosts; to name a user, write "printer@"`,
  ]);
});

test('a tag used anywhere needs a tagOwners entry (tests, ssh, nodeAttrs, autoApprovers)', (t) => {
  const text = `{
  "ssh": [ { "action": "accept", "src": ["alice@"], "dst": ["tag:srv"], "users": ["root"] } ],
  "nodeAttrs": [ { "target": ["tag:nas"], "attr": ["drive:share"] } ],
  "autoApprovers": { "routes": { "10.0.0.0/8": ["tag:router"] } }
}`;
  t.deepEqual(errors(text, snap), [
    `${at(text, '"tag:srv"')}: tag:srv is not defined in tagOwners (every tag needs an entry there saying who may use it)`,
    `${at(text, '"tag:nas"')}: tag:nas is not defined in tagOwners (every tag needs an entry there saying who may use it)`,
    `${at(text, '"tag:router"')}: tag:router is not defined in tagOwners (every tag needs an entry there saying who may use it)`,
  ]);
});

test('an unknown user is an error when saving (strict), a warning when reloading a policy already in force', (t) => {
  const text = '{ "acls": [ { "action": "accept", "src": ["dave@"], "dst": ["alice@:22"] } ] }';
  t.deepEqual(errors(text, snap), [`${at(text, '"dave@"')}: dave@ is not a user of this tailnet`]);
  const reload = compilePolicy(text, snap, { strict: false });
  t.true(reload.ok);
  t.deepEqual(
    reload.warnings.map((w) => `line ${w.line}, column ${w.column}: ${w.message}`),
    [`${at(text, '"dave@"')}: dave@ is not a user of this tailnet; it matches no device`],
  );
  if (reload.ok) t.deepEqual(reload.policy.filterFor(1), []);
});

test('autogroup:self as a source is refused', (t) => {
  const text = '{ "acls": [ { "action": "accept", "src": ["autogroup:self"], "dst": ["*:22"] } ] }';
  t.deepEqual(errors(text, snap), [
    `${at(text, '"autogroup:self"')}: autogroup:self cannot be a source; it is only a destination (the devices of the user who connects)`,
  ]);
});

test('autogroup:self needs user-like sources: a tag source is refused', (t) => {
  const text = '{ "tagOwners": { "tag:db": ["alice@"] }, "acls": [ { "action": "accept", "src": ["tag:db"], "dst": ["autogroup:self:*"] } ] }';
  t.deepEqual(errors(text, snap), [
    `${at(text, '"autogroup:self:*"')}: autogroup:self needs sources that are users, groups or autogroup:member (a device's own user is who it reaches), not tag:db`,
  ]);
});

test('SSH check mode is refused with the reason and what to use instead', (t) => {
  const text = '{ "ssh": [ { "action": "check", "src": ["autogroup:member"], "dst": ["autogroup:self"], "users": ["autogroup:nonroot"] } ] }';
  t.deepEqual(errors(text, snap), [`${at(text, '"check"')}: check mode needs a recent browser sign-in, which hse does not offer yet; use accept`]);
});

test('ACL action other than accept is refused', (t) => {
  const text = '{ "acls": [ { "action": "deny", "src": ["bob@"], "dst": ["alice@:22"] } ] }';
  t.deepEqual(errors(text, snap), [`${at(text, '"deny"')}: action "deny" is not supported; rules only accept (everything not accepted is denied)`]);
});

test('bad ports, protocols and grant ip entries are refused at the value', (t) => {
  const text = `{
  "acls": [
    { "action": "accept", "src": ["bob@"], "dst": ["alice@:ssh"] },
    { "action": "accept", "src": ["bob@"], "dst": ["alice@:0"] },
    { "action": "accept", "src": ["bob@"], "dst": ["alice@:443-80"] },
    { "action": "accept", "src": ["bob@"], "proto": "icmp", "dst": ["alice@:22"] },
    { "action": "accept", "src": ["bob@"], "proto": "smtp", "dst": ["alice@:*"] },
    { "action": "accept", "src": ["bob@"], "dst": ["alice@"] }
  ],
  "grants": [ { "src": ["bob@"], "dst": ["alice@"], "ip": ["icmp", "tcp:0", "tcp:1:2"] } ]
}`;
  t.deepEqual(errors(text, snap), [
    `${at(text, '"alice@:ssh"')}: alice@:ssh: "ssh" is not a port, a range "first-last" or "*"`,
    `${at(text, '"alice@:0"')}: alice@:0: port 0 is outside 1-65535 (write "*" for every port)`,
    `${at(text, '"alice@:443-80"')}: alice@:443-80: the range 443-80 runs backwards`,
    `${at(text, '"alice@:22"', 1)}: alice@:22: icmp has no ports; write "alice@:*"`,
    `${at(text, '"smtp"')}: "smtp" is not a protocol: use a name (tcp, udp, icmp, sctp, gre, esp, …) or a number 1-255`,
    `${at(text, '"alice@"]')}: alice@ has no ports: write it as "alice@:*" for every port, or "alice@:22" for one`,
    `${at(text, '"icmp"', 2)}: "icmp" needs ports after the protocol: write "icmp:*"`,
    `${at(text, '"tcp:0"')}: port 0 is outside 1-65535 (write "*" for every port)`,
    `${at(text, '"tcp:1:2"')}: "tcp:1:2" has more than one colon; write "protocol:ports"`,
  ]);
});

test('a CIDR with host bits set is refused, naming the network it probably meant', (t) => {
  const text = '{ "hosts": { "lan": "10.0.0.1/8" } }';
  t.deepEqual(errors(text, snap), [`${at(text, '"10.0.0.1/8"')}: 10.0.0.1/8 has bits set after the first 8; the network is 10.0.0.0/8`]);
});

test('"every address" as a CIDR destination is refused in favour of * or autogroup:internet', (t) => {
  const text = '{ "grants": [ { "src": ["bob@"], "dst": ["0.0.0.0/0"], "ip": ["*"] } ] }';
  t.deepEqual(errors(text, snap), [
    `${at(text, '"0.0.0.0/0"')}: 0.0.0.0/0: to allow every address, use "*" (everything) or "autogroup:internet" (through exit nodes)`,
  ]);
});

test('grant capabilities: the {domain}/{path} form, and only known tailscale.com names', (t) => {
  const text = `{ "grants": [ { "src": ["bob@"], "dst": ["alice@"], "app": {
    "https://example.com/cap/x": [{}],
    "nocap": [{}],
    "tailscale.com/cap/funnel": [{}],
    "example.com/cap/ok": [{}]
  } } ] }`;
  t.deepEqual(errors(text, snap), [
    `${at(text, '"https://example.com/cap/x"')}: https://example.com/cap/x: write capability names without a scheme, as {domain}/{path}`,
    `${at(text, '"nocap"')}: nocap: a capability name has the form {domain}/{path}`,
    `${at(text, '"tailscale.com/cap/funnel"')}: tailscale.com/cap/funnel: capabilities under tailscale.com are Tailscale's own; only tailscale.com/cap/drive, tailscale.com/cap/relay, tailscale.com/cap/webui, tailscale.com/cap/kubernetes, tailscale.com/cap/tsidp, tailscale.com/cap/secrets, tailscale.com/cap/file-sharing can be granted`,
  ]);
});

test('groups cannot nest; members are users or identity-provider groups', (t) => {
  const text = '{ "groups": { "group:a": ["alice@"], "group:b": ["group:a", "tag:db", "idp:"] } }';
  t.deepEqual(errors(text, snap), [
    `${at(text, '"group:a"', 2)}: group:a: a group cannot contain another group; list its users instead`,
    `${at(text, '"tag:db"')}: tag:db cannot be a group member; members are users ("alice@") or identity-provider groups ("idp:engineering")`,
    `${at(text, '"idp:"')}: "idp:" needs the identity provider's group name after it`,
  ]);
});

test('SSH rules: tags cannot log in to user-owned devices; a user destination allows only that user', (t) => {
  const text = `{ "tagOwners": { "tag:db": ["alice@"] }, "ssh": [
    { "action": "accept", "src": ["tag:db"], "dst": ["autogroup:member"], "users": ["root"] },
    { "action": "accept", "src": ["bob@"], "dst": ["alice@"], "users": ["root"] },
    { "action": "accept", "src": ["bob@"], "dst": ["10.0.0.1"], "users": ["*"] }
  ] }`;
  t.deepEqual(errors(text, snap), [
    `${at(text, '"tag:db"', 2)}: tag:db cannot log in to user-owned devices (autogroup:member); tagged devices may only reach tagged devices`,
    `${at(text, '"alice@"', 2)}: alice@ as an SSH destination allows only alice@ as the source, not bob@; use autogroup:self for "each user's own devices"`,
    `${at(text, '"10.0.0.1"')}: 10.0.0.1: addresses and host names cannot be an SSH destination`,
    `${at(text, '"*"')}: "*" is not a local user; name the users, or use "autogroup:nonroot" for every user but root`,
  ]);
});

test('autogroup:internet only as a destination; unsupported autogroups say why', (t) => {
  const text = '{ "acls": [ { "action": "accept", "src": ["autogroup:internet", "autogroup:admin"], "dst": ["*:*"] } ] }';
  t.deepEqual(errors(text, snap), [
    `${at(text, '"autogroup:internet"')}: autogroup:internet is only a destination of acls and grants (use of exit nodes)`,
    `${at(text, '"autogroup:admin"')}: hse has no user roles yet, so autogroup:admin is not supported`,
  ]);
});

test('a tag name must start with a letter', (t) => {
  const text = '{ "tagOwners": { "tag:1db": ["alice@"] } }';
  t.deepEqual(errors(text, snap), [
    `${at(text, '"tag:1db"')}: tag:1db: a tag name starts with a letter after "tag:" and has only letters, digits, "-" and "_"`,
  ]);
});

test('an empty policy, or one of only comments, is no policy: allow-all', (t) => {
  for (const text of [null, '', '  \n', '// nothing yet\n/* later */']) {
    const r = compilePolicy(text, snap);
    t.true(r.ok);
    if (r.ok) t.true(r.policy.allowAll);
  }
});

test('an empty src or dst list is accepted with a warning (the rule matches nothing), as Tailscale accepts it', (t) => {
  const text = '{ "acls": [ { "action": "accept", "src": [], "dst": ["alice@:22"] } ], "grants": [ { "src": ["bob@"], "dst": [], "ip": ["*"] } ] }';
  const r = compilePolicy(text, snap, { strict: true });
  t.true(r.ok);
  t.deepEqual(
    r.warnings.map((w) => `line ${w.line}, column ${w.column}: ${w.message}`),
    [`${at(text, '[]')}: acls[0].src is empty; the rule would let nobody in`, `${at(text, '[]', 2)}: grants[0].dst is empty; the grant would give nothing`],
  );
  if (r.ok) t.deepEqual(r.policy.filterFor(1), []);
});

test('an SSH rule with an empty action, or users missing, is refused', (t) => {
  const text = '{ "ssh": [ { "action": "", "src": ["alice@"], "dst": ["autogroup:self"], "users": [] } ] }';
  t.deepEqual(errors(text, snap), [
    `${at(text, '""')}: "" is not an SSH action; use accept`,
    `${at(text, '[]')}: ssh[0].users is empty; name the local users, e.g. ["autogroup:nonroot"]`,
  ]);
});

test('user:*@domain: a domain with no user is an error when saving, like an unknown user', (t) => {
  const text = '{ "acls": [ { "action": "accept", "src": ["user:*@nowhere.example"], "dst": ["alice@:22"] } ] }';
  t.deepEqual(errors(text, snap), [`${at(text, '"user:*@nowhere.example"')}: no user of this tailnet has an address at nowhere.example`]);
  const bad = '{ "acls": [ { "action": "accept", "src": ["user:bob@example.org"], "dst": ["alice@:22"] } ] }';
  t.deepEqual(errors(bad, snap), [
    `${at(bad, '"user:bob@example.org"')}: user:bob@example.org: write "user:*@<domain>" for every user with an address in that domain`,
  ]);
});

test("the funnel attribute is refused: it needs Tailscale's public relays", (t) => {
  const text = '{ "nodeAttrs": [ { "target": ["*"], "attr": ["funnel"] } ] }';
  t.deepEqual(errors(text, snap), [
    `${at(text, '"funnel"')}: Funnel (public ingress through Tailscale's relays) is not available with hse; remove the funnel attribute`,
  ]);
});

test('a byte-order mark before the policy is ignored, and positions still count from the start of the text', (t) => {
  const text = '\ufeff{\n  "acl": []\n}';
  t.deepEqual(errors(text, snap), [
    `line 2, column 3: unknown key "acl" in the policy; expected one of groups, tagOwners, hosts, acls, grants, tests, autoApprovers, ssh, sshTests, nodeAttrs, randomizeClientPort`,
  ]);
});
