// What each device's packet filter holds: only the rules admitting traffic to it, with every selector resolved to
// addresses, in the shapes a Tailscale client reads (and Tailscale's own control plane sends).
import test from 'ava';
import { compile, node, policyText, snapshot, v4, v6 } from './tailnet.ts';

const all = { First: 0, Last: 65535 };
const port = (p: number) => ({ First: p, Last: p });

// alice: laptop 1, phone 2; bob: laptop 3; carol: laptop 4; tag:db: 5; tag:web: 6, 7 (7 also tag:db); router 8.
const snap = snapshot([
  node(1, 'alice'),
  node(2, 'alice'),
  node(3, 'bob'),
  node(4, 'carol'),
  node(5, ['tag:db']),
  node(6, ['tag:web']),
  node(7, ['tag:web', 'tag:db']),
  node(8, ['tag:router'], ['10.1.0.0/16', '192.168.5.0/24']),
]);
const owners = { 'tag:db': ['alice@'], 'tag:web': ['alice@'], 'tag:router': ['alice@'] };

test('a user reaches a tag on one port: only the tagged devices get the rule, naming their own addresses', (t) => {
  const p = compile(t, policyText({ tagOwners: owners, acls: [{ action: 'accept', src: ['bob@'], dst: ['tag:db:5432'] }] }), snap);
  const rule = { SrcIPs: [v4(3), v6(3)], DstPorts: [] as unknown[] };
  t.deepEqual(p.filterFor(5), [
    {
      ...rule,
      DstPorts: [
        { IP: v4(5), Ports: port(5432) },
        { IP: v6(5), Ports: port(5432) },
      ],
    },
  ]);
  t.deepEqual(p.filterFor(7), [
    {
      ...rule,
      DstPorts: [
        { IP: v4(7), Ports: port(5432) },
        { IP: v6(7), Ports: port(5432) },
      ],
    },
  ]);
  for (const id of [1, 2, 3, 4, 6, 8]) t.deepEqual(p.filterFor(id), [], `node ${id}`);
});

test("sources merge into ranges: a user's two adjacent devices are one range per family", (t) => {
  const p = compile(t, policyText({ tagOwners: owners, acls: [{ action: 'accept', src: ['alice@', 'bob@'], dst: ['tag:web:443'] }] }), snap);
  t.deepEqual(p.filterFor(6)[0].SrcIPs, ['100.64.0.1-100.64.0.3', 'fd7a:115c:a1e0::1-fd7a:115c:a1e0::3']);
});

test("groups, including identity-provider groups, resolve to their members' devices", (t) => {
  const p = compile(
    t,
    policyText({
      groups: { 'group:eng': ['idp:engineering'], 'group:ops': ['bob@example.org'] },
      tagOwners: owners,
      acls: [{ action: 'accept', src: ['group:eng', 'group:ops'], dst: ['tag:db:22'] }],
    }),
    snap,
  );
  // engineering = alice (1, 2) and carol (4); bob by his full address (3).
  t.deepEqual(p.filterFor(5)[0].SrcIPs, ['100.64.0.1-100.64.0.4', 'fd7a:115c:a1e0::1-fd7a:115c:a1e0::4']);
});

test("a tagged device is not its user's: alice@ and autogroup:member leave it out, autogroup:tagged takes it", (t) => {
  const p = compile(
    t,
    policyText({
      tagOwners: owners,
      acls: [
        { action: 'accept', src: ['alice@'], dst: ['bob@:22'] },
        { action: 'accept', src: ['autogroup:tagged'], dst: ['carol@:80'] },
      ],
    }),
    snap,
  );
  t.deepEqual(p.filterFor(3)[0].SrcIPs, ['100.64.0.1-100.64.0.2', 'fd7a:115c:a1e0::1-fd7a:115c:a1e0::2']);
  t.deepEqual(p.filterFor(4)[0].SrcIPs, ['100.64.0.5-100.64.0.8', 'fd7a:115c:a1e0::5-fd7a:115c:a1e0::8']);
});

test('"*" as a source is the tailnet ranges plus every approved subnet route; "*" as a destination is "*"', (t) => {
  const p = compile(t, policyText({ acls: [{ action: 'accept', src: ['*'], dst: ['*:*'] }] }), snap);
  const rule = {
    SrcIPs: ['10.1.0.0/16', '100.64.0.0-100.115.91.255', '100.115.94.0-100.127.255.255', '192.168.5.0/24', 'fd7a:115c:a1e0::/48'],
    DstPorts: [{ IP: '*', Ports: all }],
  };
  for (const id of [1, 4, 5, 8]) t.deepEqual(p.filterFor(id), [rule]);
});

test("autogroup:self: each user's devices reach only that user's devices; tagged devices get nothing", (t) => {
  const p = compile(t, policyText({ acls: [{ action: 'accept', src: ['autogroup:member'], dst: ['autogroup:self:*'] }] }), snap);
  const mine = [v4(1), v6(1)];
  t.deepEqual(p.filterFor(1), [
    {
      SrcIPs: ['100.64.0.1-100.64.0.2', 'fd7a:115c:a1e0::1-fd7a:115c:a1e0::2'],
      DstPorts: mine.map((ip) => ({ IP: ip, Ports: all })),
    },
  ]);
  t.deepEqual(p.filterFor(3), [{ SrcIPs: [v4(3), v6(3)], DstPorts: [v4(3), v6(3)].map((ip) => ({ IP: ip, Ports: all })) }]);
  t.deepEqual(p.filterFor(5), []);
  t.true(p.mayReach(2, 1, 6, 22));
  t.false(p.mayReach(3, 1, 6, 22));
});

test('autogroup:self with "*" as the source is still only the user\'s own devices', (t) => {
  const p = compile(t, policyText({ acls: [{ action: 'accept', src: ['*'], dst: ['autogroup:self:22'] }] }), snap);
  t.deepEqual(p.filterFor(4), [{ SrcIPs: [v4(4), v6(4)], DstPorts: [v4(4), v6(4)].map((ip) => ({ IP: ip, Ports: port(22) })) }]);
  t.deepEqual(p.filterFor(8), []);
});

test('ports: single, lists, ranges and * become one DstPorts entry per range and address', (t) => {
  const p = compile(t, policyText({ tagOwners: owners, acls: [{ action: 'accept', src: ['bob@'], dst: ['tag:db:22,80-90', 'tag:db:*'] }] }), snap);
  t.deepEqual(p.filterFor(5)[0].DstPorts, [
    { IP: v4(5), Ports: port(22) },
    { IP: v4(5), Ports: { First: 80, Last: 90 } },
    { IP: v4(5), Ports: all },
    { IP: v6(5), Ports: port(22) },
    { IP: v6(5), Ports: { First: 80, Last: 90 } },
    { IP: v6(5), Ports: all },
  ]);
});

test('proto on an ACL becomes IPProto; names and numbers mean the same', (t) => {
  const p = compile(
    t,
    policyText({
      tagOwners: owners,
      acls: [
        { action: 'accept', src: ['bob@'], proto: 'udp', dst: ['tag:db:53'] },
        { action: 'accept', src: ['bob@'], proto: '17', dst: ['tag:web:53'] },
        { action: 'accept', src: ['carol@'], proto: 'icmp', dst: ['tag:db:*'] },
      ],
    }),
    snap,
  );
  t.deepEqual(p.filterFor(5)[0].IPProto, [17]);
  t.deepEqual(p.filterFor(6)[0].IPProto, [17]);
  t.deepEqual(p.filterFor(5)[1].IPProto, [1]);
  t.true(p.mayReach(3, 5, 17, 53));
  t.false(p.mayReach(3, 5, 6, 53));
  t.true(p.mayReach(4, 5, 1, 0));
  t.false(p.mayReach(4, 5, 6, 22));
});

test('grant ip: one FilterRule per protocol; a bare port keeps the default protocols', (t) => {
  const p = compile(t, policyText({ tagOwners: owners, grants: [{ src: ['bob@'], dst: ['tag:web'], ip: ['tcp:80', 'udp:53', 'tcp:443', '8080'] }] }), snap);
  t.deepEqual(p.filterFor(6), [
    {
      SrcIPs: [v4(3), v6(3)],
      DstPorts: [80, 443].flatMap((x) => [v4(6)].map((ip) => ({ IP: ip, Ports: port(x) }))).concat([80, 443].map((x) => ({ IP: v6(6), Ports: port(x) }))),
      IPProto: [6],
    },
    {
      SrcIPs: [v4(3), v6(3)],
      DstPorts: [
        { IP: v4(6), Ports: port(53) },
        { IP: v6(6), Ports: port(53) },
      ],
      IPProto: [17],
    },
    {
      SrcIPs: [v4(3), v6(3)],
      DstPorts: [
        { IP: v4(6), Ports: port(8080) },
        { IP: v6(6), Ports: port(8080) },
      ],
    },
  ]);
  t.true(p.mayReach(3, 6, 17, 8080));
  t.false(p.mayReach(3, 6, 17, 80));
});

test('grant ip "*" and "icmp:*"', (t) => {
  const p = compile(
    t,
    policyText({
      tagOwners: owners,
      grants: [
        { src: ['bob@'], dst: ['tag:db'], ip: ['icmp:*'] },
        { src: ['carol@'], dst: ['tag:db'], ip: ['*'] },
      ],
    }),
    snap,
  );
  t.deepEqual(p.filterFor(5), [
    {
      SrcIPs: [v4(3), v6(3)],
      DstPorts: [
        { IP: v4(5), Ports: all },
        { IP: v6(5), Ports: all },
      ],
      IPProto: [1],
    },
    {
      SrcIPs: [v4(4), v6(4)],
      DstPorts: [
        { IP: v4(5), Ports: all },
        { IP: v6(5), Ports: all },
      ],
    },
  ]);
});

test('hosts and CIDRs as sources stand for themselves', (t) => {
  const p = compile(
    t,
    policyText({
      hosts: { office: '198.51.100.0/24', printer: '203.0.113.7' },
      tagOwners: owners,
      acls: [{ action: 'accept', src: ['office', 'printer', '2001:db8::/32'], dst: ['tag:db:22'] }],
    }),
    snap,
  );
  t.deepEqual(p.filterFor(5)[0].SrcIPs, ['198.51.100.0/24', '203.0.113.7', '2001:db8::/32']);
});

test('an IPv6 address as a destination covers the device holding it', (t) => {
  const p = compile(t, policyText({ acls: [{ action: 'accept', src: ['bob@'], dst: [`[${v6(4)}]:22`, `${v4(1)}:80`] }] }), snap);
  t.deepEqual(p.filterFor(4), [{ SrcIPs: [v4(3), v6(3)], DstPorts: [{ IP: v6(4), Ports: port(22) }] }]);
  t.deepEqual(p.filterFor(1), [{ SrcIPs: [v4(3), v6(3)], DstPorts: [{ IP: v4(1), Ports: port(80) }] }]);
  t.true(p.mayReach(3, 4, 6, 22, 6));
  t.false(p.mayReach(3, 4, 6, 22, 4));
});

test('a CIDR destination goes to the subnet routers whose routes overlap it, as written', (t) => {
  const p = compile(
    t,
    policyText({
      hosts: { lan: '10.1.2.0/24' },
      acls: [
        { action: 'accept', src: ['bob@'], dst: ['lan:443'] },
        { action: 'accept', src: ['carol@'], dst: ['10.0.0.0/8:22'] },
        { action: 'accept', src: ['carol@'], dst: ['172.16.0.0/12:22'] },
      ],
    }),
    snap,
  );
  t.deepEqual(p.filterFor(8), [
    { SrcIPs: [v4(3), v6(3)], DstPorts: [{ IP: '10.1.2.0/24', Ports: port(443) }] },
    { SrcIPs: [v4(4), v6(4)], DstPorts: [{ IP: '10.0.0.0/8', Ports: port(22) }] },
  ]);
  for (const id of [1, 3, 4, 5]) t.deepEqual(p.filterFor(id), []);
});

test('autogroup:internet goes to exit nodes as the public address ranges', (t) => {
  const s = snapshot([node(1, 'alice'), node(9, ['tag:exit'], ['0.0.0.0/0', '::/0']), node(5, ['tag:db'])]);
  const p = compile(
    t,
    policyText({ tagOwners: { 'tag:exit': ['alice@'], 'tag:db': ['alice@'] }, acls: [{ action: 'accept', src: ['alice@'], dst: ['autogroup:internet:*'] }] }),
    s,
  );
  const f = p.filterFor(9);
  t.is(f.length, 1);
  t.deepEqual(
    f[0].DstPorts?.map((d) => d.IP),
    [
      '0.0.0.0-9.255.255.255',
      '11.0.0.0-100.63.255.255',
      '100.128.0.0-169.253.255.255',
      '169.255.0.0-172.15.255.255',
      '172.32.0.0-192.167.255.255',
      '192.169.0.0-255.255.255.255',
      '2000::/3',
    ],
  );
  t.deepEqual(p.filterFor(5), []);
});

test("rules from several ACLs and grants to one device keep the policy's order", (t) => {
  const p = compile(
    t,
    policyText({
      tagOwners: owners,
      acls: [
        { action: 'accept', src: ['bob@'], dst: ['tag:db:1'] },
        { action: 'accept', src: ['carol@'], dst: ['tag:web:2'] },
        { action: 'accept', src: ['alice@'], dst: ['tag:db:3'] },
      ],
      grants: [{ src: ['carol@'], dst: ['tag:db'], ip: ['4'] }],
    }),
    snap,
  );
  t.deepEqual(
    p.filterFor(7).map((r) => r.DstPorts?.[0].Ports.First),
    [1, 2, 3, 4],
  );
});

test('app capabilities become CapGrant rules on the destination, naming its addresses', (t) => {
  const p = compile(
    t,
    policyText({ tagOwners: owners, grants: [{ src: ['bob@'], dst: ['tag:web'], app: { 'example.com/cap/admin': [{ role: 'owner' }] } }] }),
    snap,
  );
  t.deepEqual(p.filterFor(6), [
    { SrcIPs: [v4(3), v6(3)], CapGrant: [{ Dsts: [`${v4(6)}/32`, `${v6(6)}/128`], CapMap: { 'example.com/cap/admin': [{ role: 'owner' }] } }] },
  ]);
  t.deepEqual(p.filterFor(3), []);
  t.false(p.mayReach(3, 6, 6, 443), 'a capability is not network access');
});

test('Taildrive: the drive capability on the sharer, its companion drive-sharer on the accessor', (t) => {
  const p = compile(
    t,
    policyText({ tagOwners: owners, grants: [{ src: ['bob@'], dst: ['tag:db'], app: { 'tailscale.com/cap/drive': [{ shares: ['*'], access: 'rw' }] } }] }),
    snap,
  );
  t.deepEqual(p.filterFor(5), [
    { SrcIPs: [v4(3), v6(3)], CapGrant: [{ Dsts: [`${v4(5)}/32`, `${v6(5)}/128`], CapMap: { 'tailscale.com/cap/drive': [{ shares: ['*'], access: 'rw' }] } }] },
  ]);
  t.deepEqual(p.filterFor(3), [
    {
      SrcIPs: ['100.64.0.5', '100.64.0.7', 'fd7a:115c:a1e0::5', 'fd7a:115c:a1e0::7'],
      CapGrant: [{ Dsts: [`${v4(3)}/32`, `${v6(3)}/128`], CapMap: { 'tailscale.com/cap/drive-sharer': null } }],
    },
  ]);
});

test("hse's file-sharing grant: file-send on the receiver, file-sharing-target on the sender", (t) => {
  const p = compile(t, policyText({ grants: [{ src: ['bob@'], dst: ['carol@'], app: { 'tailscale.com/cap/file-sharing': [] } }] }), snap);
  t.deepEqual(p.filterFor(4), [
    { SrcIPs: [v4(3), v6(3)], CapGrant: [{ Dsts: [`${v4(4)}/32`, `${v6(4)}/128`], CapMap: { 'https://tailscale.com/cap/file-send': null } }] },
  ]);
  t.deepEqual(p.filterFor(3), [
    { SrcIPs: [v4(4), v6(4)], CapGrant: [{ Dsts: [`${v4(3)}/32`, `${v6(3)}/128`], CapMap: { 'https://tailscale.com/cap/file-sharing-target': null } }] },
  ]);
});

test('a group with nobody in it yet opens nothing (no rule with empty sources)', (t) => {
  const p = compile(
    t,
    policyText({ groups: { 'group:new': [] }, tagOwners: owners, acls: [{ action: 'accept', src: ['group:new'], dst: ['tag:db:22'] }] }),
    snap,
  );
  t.deepEqual(p.filterFor(5), []);
  t.deepEqual(p.peersOf(5), []);
});

test('autogroup:danger-all as a source is "*" in SrcIPs: every address, inside the tailnet or not', (t) => {
  const p = compile(t, policyText({ tagOwners: owners, acls: [{ action: 'accept', src: ['autogroup:danger-all'], dst: ['tag:web:80'] }] }), snap);
  t.deepEqual(p.filterFor(6)[0].SrcIPs, ['*']);
});

test('a policy without acls or grants leaves the network open, as Tailscale does; an empty acls list closes it', (t) => {
  const open = compile(t, policyText({ tagOwners: owners, ssh: [{ action: 'accept', src: ['bob@'], dst: ['tag:db'], users: ['root'] }] }), snap);
  t.deepEqual(open.filterFor(1), [
    {
      SrcIPs: ['10.1.0.0/16', '100.64.0.0-100.115.91.255', '100.115.94.0-100.127.255.255', '192.168.5.0/24', 'fd7a:115c:a1e0::/48'],
      DstPorts: [{ IP: '*', Ports: all }],
    },
  ]);
  t.true(open.mayReach(4, 5, 6, 22));
  t.is(open.reachersOf(1)[0].origin, 'the default rule (the policy has no acls or grants)');
  t.not(open.sshPolicyFor(5), null, 'the rest of the policy still applies');
  const closed = compile(t, policyText({ tagOwners: owners, acls: [] }), snap);
  t.deepEqual(closed.filterFor(1), []);
  t.deepEqual(closed.peersOf(1), []);
});

test('no policy: every node gets the allow-all filter and every other node as a peer', (t) => {
  const p = compile(t, '', snap);
  t.true(p.allowAll);
  t.deepEqual(p.filterFor(5), [{ SrcIPs: ['*'], DstPorts: [{ IP: '*', Ports: all }] }]);
  t.deepEqual(p.peersOf(5), [1, 2, 3, 4, 6, 7, 8]);
  t.deepEqual(p.routesFor(1, 8), ['10.1.0.0/16', '192.168.5.0/24']);
  t.true(p.mayReach(5, 1, 47, 0));
});
