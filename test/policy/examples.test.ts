// Policies as operators write them, after the patterns in Tailscale's documentation (role-based access with groups and
// tags, a home network with a subnet router and an exit node, the same written as grants, SSH for admins and for each
// user's own devices), compiled against a small tailnet and checked for what each device is sent.
import test from 'ava';
import { compile, node, snapshot, v4, v6 } from './tailnet.ts';

const all = { First: 0, Last: 65535 };
const port = (p: number) => ({ First: p, Last: p });

test('role-based access: developers reach dev servers, ops reach production on ssh and https, everyone reaches monitoring', (t) => {
  const text = `{
  // Who is who.
  "groups": {
    "group:dev": ["alice@", "carol@"],
    "group:ops": ["bob@"],
  },
  // Servers are tagged by ops.
  "tagOwners": {
    "tag:dev": ["group:ops"],
    "tag:prod": ["group:ops"],
    "tag:monitoring": ["group:ops"],
  },
  "acls": [
    { "action": "accept", "src": ["group:dev"], "dst": ["tag:dev:*"] },
    { "action": "accept", "src": ["group:ops"], "dst": ["tag:prod:22,443", "tag:dev:22"] },
    { "action": "accept", "src": ["autogroup:member"], "dst": ["tag:monitoring:443"] },
    // The monitoring server scrapes every server's exporter.
    { "action": "accept", "src": ["tag:monitoring"], "dst": ["tag:dev:9100", "tag:prod:9100"] },
  ],
  "tests": [
    { "src": "alice@", "accept": ["tag:dev:8080", "tag:monitoring:443"], "deny": ["tag:prod:22", "tag:prod:443"] },
    { "src": "group:ops", "accept": ["tag:prod:22", "tag:prod:443", "tag:dev:22"], "deny": ["tag:dev:8080"] },
    { "src": "tag:monitoring", "accept": ["tag:prod:9100"], "deny": ["alice@:22"] },
  ],
}`;
  // alice 1, carol 2, bob 3; dev server 10, prod server 11, monitoring 12.
  const snap = snapshot([node(1, 'alice'), node(2, 'carol'), node(3, 'bob'), node(10, ['tag:dev']), node(11, ['tag:prod']), node(12, ['tag:monitoring'])]);
  const p = compile(t, text, snap);
  t.deepEqual(p.filterFor(11), [
    { SrcIPs: [v4(3), v6(3)], DstPorts: [22, 443].map((x) => ({ IP: v4(11), Ports: port(x) })).concat([22, 443].map((x) => ({ IP: v6(11), Ports: port(x) }))) },
    {
      SrcIPs: [v4(12), v6(12)],
      DstPorts: [
        { IP: v4(11), Ports: port(9100) },
        { IP: v6(11), Ports: port(9100) },
      ],
    },
  ]);
  t.deepEqual(p.filterFor(1), [], 'nobody may open connections to a laptop');
  t.deepEqual(p.peersOf(1), [10, 12]);
  t.deepEqual(p.peersOf(11), [3, 12]);
  t.deepEqual(p.peersOf(12), [1, 2, 3, 10, 11]);
  t.true(p.mayReach(2, 10, 6, 8080));
  t.false(p.mayReach(3, 10, 6, 8080));
  t.false(p.mayReach(10, 1, 6, 22), "return traffic is the client's business; new connections to laptops are refused");
});

test('a home network: own devices talk to each other, a subnet router for the LAN, an exit node, friends reach only the media server', (t) => {
  const text = `{
  "groups": { "group:family": ["alice@", "bob@"], "group:friends": ["carol@"] },
  "tagOwners": { "tag:router": ["alice@"], "tag:media": ["alice@"] },
  "hosts": { "home-lan": "192.168.1.0/24" },
  "acls": [
    // Each person's own devices reach each other.
    { "action": "accept", "src": ["autogroup:member"], "dst": ["autogroup:self:*"] },
    // The family reaches the home LAN, the media server, and may leave through the exit node.
    { "action": "accept", "src": ["group:family"], "dst": ["home-lan:*", "tag:media:*", "autogroup:internet:*"] },
    // Friends watch films.
    { "action": "accept", "src": ["group:friends"], "dst": ["tag:media:32400"] },
  ],
  "autoApprovers": {
    "routes": { "192.168.0.0/16": ["tag:router"] },
    "exitNode": ["tag:router"],
  },
}`;
  // alice 1, 2; bob 3; carol 4; router 20 (LAN + exit); media 21.
  const snap = snapshot([
    node(1, 'alice'),
    node(2, 'alice'),
    node(3, 'bob'),
    node(4, 'carol'),
    node(20, ['tag:router'], ['192.168.1.0/24', '0.0.0.0/0', '::/0']),
    node(21, ['tag:media']),
  ]);
  const p = compile(t, text, snap);
  t.deepEqual(p.routesFor(1, 20), ['192.168.1.0/24', '0.0.0.0/0', '::/0']);
  t.deepEqual(p.routesFor(4, 20), [], 'friends get neither the LAN nor the exit node');
  t.deepEqual(p.peersOf(4), [21]);
  t.deepEqual(p.peersOf(1), [2, 20, 21], 'bob is family, but no rule lets alice and bob reach each other');
  t.deepEqual(p.filterFor(21), [
    {
      SrcIPs: ['100.64.0.1-100.64.0.3', 'fd7a:115c:a1e0::1-fd7a:115c:a1e0::3'],
      DstPorts: [
        { IP: v4(21), Ports: all },
        { IP: v6(21), Ports: all },
      ],
    },
    {
      SrcIPs: [v4(4), v6(4)],
      DstPorts: [
        { IP: v4(21), Ports: port(32400) },
        { IP: v6(21), Ports: port(32400) },
      ],
    },
  ]);
  const router = p.filterFor(20);
  t.is(router.length, 1);
  t.deepEqual(router[0].DstPorts?.[0], { IP: '192.168.1.0/24', Ports: all });
  t.is(router[0].DstPorts?.length, 8, 'the LAN and the seven public ranges of autogroup:internet');
  t.is(p.autoApprover(20, '192.168.1.0/24'), 'autoApprovers.routes["192.168.0.0/16"] (line 14): tag:router');
  t.is(p.autoApprover(20, '0.0.0.0/0'), 'autoApprovers.exitNode (line 15): tag:router');
  t.is(p.autoApprover(1, '192.168.1.0/24'), null);
  t.true(p.mayReach(2, 1, 6, 5900));
  t.false(p.mayReach(3, 1, 6, 5900), 'bob is family but not alice');
});

test('the same access written as grants, with Taildrive shares for the family', (t) => {
  const text = `{
  "groups": { "group:family": ["alice@", "bob@"] },
  "tagOwners": { "tag:nas": ["alice@"] },
  "grants": [
    { "src": ["group:family"], "dst": ["tag:nas"], "ip": ["tcp:445", "tcp:443"],
      "app": { "tailscale.com/cap/drive": [{ "shares": ["photos"], "access": "rw" }] } },
    { "src": ["autogroup:member"], "dst": ["tag:nas"], "ip": ["icmp:*"] },
  ],
  "nodeAttrs": [ { "target": ["tag:nas"], "attr": ["drive:share"] }, { "target": ["group:family"], "attr": ["drive:access"] } ],
}`;
  const snap = snapshot([node(1, 'alice'), node(3, 'bob'), node(4, 'carol'), node(30, ['tag:nas'])]);
  const p = compile(t, text, snap);
  const family = ['100.64.0.1', '100.64.0.3', 'fd7a:115c:a1e0::1', 'fd7a:115c:a1e0::3'];
  t.deepEqual(p.filterFor(30), [
    {
      SrcIPs: family,
      DstPorts: [445, 443].map((x) => ({ IP: v4(30), Ports: port(x) })).concat([445, 443].map((x) => ({ IP: v6(30), Ports: port(x) }))),
      IPProto: [6],
    },
    { SrcIPs: family, CapGrant: [{ Dsts: [`${v4(30)}/32`, `${v6(30)}/128`], CapMap: { 'tailscale.com/cap/drive': [{ shares: ['photos'], access: 'rw' }] } }] },
    {
      SrcIPs: ['100.64.0.1', '100.64.0.3-100.64.0.4', 'fd7a:115c:a1e0::1', 'fd7a:115c:a1e0::3-fd7a:115c:a1e0::4'],
      DstPorts: [
        { IP: v4(30), Ports: all },
        { IP: v6(30), Ports: all },
      ],
      IPProto: [1],
    },
  ]);
  t.deepEqual(p.filterFor(3), [
    { SrcIPs: [v4(30), v6(30)], CapGrant: [{ Dsts: [`${v4(3)}/32`, `${v6(3)}/128`], CapMap: { 'tailscale.com/cap/drive-sharer': null } }] },
  ]);
  t.true('drive:share' in p.capMapFor(30));
  t.true('drive:access' in p.capMapFor(1));
  t.false('drive:access' in p.capMapFor(4));
  t.true(p.mayReach(4, 30, 1, 0), 'carol may ping the NAS');
  t.false(p.mayReach(4, 30, 6, 445));
});

test('Tailscale SSH: admins log in to servers as root, every member to their own devices as themselves', (t) => {
  const text = `{
  "groups": { "group:admins": ["bob@"] },
  "tagOwners": { "tag:server": ["group:admins"] },
  "acls": [
    { "action": "accept", "src": ["group:admins"], "dst": ["tag:server:22"] },
    { "action": "accept", "src": ["autogroup:member"], "dst": ["autogroup:self:22"] },
  ],
  "ssh": [
    { "action": "accept", "src": ["group:admins"], "dst": ["tag:server"], "users": ["root", "autogroup:nonroot"] },
    { "action": "accept", "src": ["autogroup:member"], "dst": ["autogroup:self"], "users": ["autogroup:nonroot"] },
  ],
  "sshTests": [
    { "src": "bob@", "dst": ["tag:server"], "accept": ["root", "deploy"] },
    { "src": "alice@", "dst": ["tag:server"], "deny": ["root", "alice"] },
    { "src": "alice@", "dst": ["autogroup:self"], "accept": ["alice"], "deny": ["root"] },
  ],
}`;
  const snap = snapshot([node(1, 'alice'), node(2, 'alice'), node(3, 'bob'), node(40, ['tag:server'])]);
  const p = compile(t, text, snap);
  t.deepEqual(
    p.sshPolicyFor(40)?.rules.map((r) => r.sshUsers),
    [{ '*': '=', root: 'root' }],
  );
  t.deepEqual(
    p.sshPolicyFor(2)?.rules[0].principals.map((x) => x.nodeIP),
    [v4(1), v6(1), v4(2), v6(2)],
  );
  for (const id of [1, 2, 3, 40]) t.true('https://tailscale.com/cap/ssh' in p.capMapFor(id), `node ${id} runs Tailscale SSH`);
  t.true(p.mayReach(3, 40, 6, 22));
  t.false(p.mayReach(1, 40, 6, 22));
});
