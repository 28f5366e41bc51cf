// Who sees whom, and which routes each device is given: a device is in another's map only when one may reach the
// other (or serves a route it may use), and a route it may not use is not given to it.
import test from 'ava';
import { compile, node, policyText, snapshot } from './tailnet.ts';

const owners = { 'tag:db': ['alice@'], 'tag:router': ['alice@'], 'tag:exit': ['alice@'] };

test('peers: either direction of a rule makes two devices peers; a device in no rule sees nobody', (t) => {
  const snap = snapshot([node(1, 'alice'), node(3, 'bob'), node(4, 'carol')]);
  const p = compile(t, policyText({ acls: [{ action: 'accept', src: ['alice@'], dst: ['bob@:22'] }] }), snap);
  t.deepEqual(p.peersOf(1), [3]);
  t.deepEqual(p.peersOf(3), [1]);
  t.deepEqual(p.peersOf(4), []);
  t.true(p.isPeer(1, 3));
  t.true(p.isPeer(3, 1));
  t.false(p.isPeer(1, 4));
  t.false(p.isPeer(1, 1));
});

test("peers: autogroup:self makes a user's devices peers of each other only", (t) => {
  const snap = snapshot([node(1, 'alice'), node(2, 'alice'), node(3, 'bob'), node(4, 'bob'), node(5, ['tag:db'])]);
  const p = compile(t, policyText({ tagOwners: owners, acls: [{ action: 'accept', src: ['autogroup:member'], dst: ['autogroup:self:*'] }] }), snap);
  t.deepEqual(p.peersOf(1), [2]);
  t.deepEqual(p.peersOf(4), [3]);
  t.deepEqual(p.peersOf(5), []);
});

test('peers: a capability grant alone makes peers (the client needs to know the peer to apply it)', (t) => {
  const snap = snapshot([node(1, 'alice'), node(5, ['tag:db'])]);
  const p = compile(t, policyText({ tagOwners: owners, grants: [{ src: ['alice@'], dst: ['tag:db'], app: { 'example.com/cap/x': [] } }] }), snap);
  t.deepEqual(p.peersOf(1), [5]);
});

test('subnet routes: a viewer allowed into a subnet is given the route and sees the router; others are not', (t) => {
  const snap = snapshot([node(1, 'alice'), node(3, 'bob'), node(8, ['tag:router'], ['10.1.0.0/16', '192.168.5.0/24'])]);
  const p = compile(t, policyText({ tagOwners: owners, hosts: { lan: '10.1.0.0/16' }, acls: [{ action: 'accept', src: ['alice@'], dst: ['lan:*'] }] }), snap);
  t.deepEqual(p.routesFor(1, 8), ['10.1.0.0/16']);
  t.deepEqual(p.routesFor(3, 8), []);
  t.deepEqual(p.peersOf(1), [8]);
  t.deepEqual(p.peersOf(3), []);
  t.deepEqual(p.peersOf(8), [1]);
});

test('subnet routes: a rule into part of a route gives the whole route (the client routes by prefix)', (t) => {
  const snap = snapshot([node(1, 'alice'), node(8, ['tag:router'], ['10.0.0.0/8'])]);
  const p = compile(t, policyText({ tagOwners: owners, acls: [{ action: 'accept', src: ['alice@'], dst: ['10.33.1.0/24:22'] }] }), snap);
  t.deepEqual(p.routesFor(1, 8), ['10.0.0.0/8']);
});

test('subnet routes: devices the subnet may reach get the route too (for the replies), and see the router', (t) => {
  const snap = snapshot([node(1, 'alice'), node(5, ['tag:db']), node(8, ['tag:router'], ['192.168.5.0/24'])]);
  const p = compile(t, policyText({ tagOwners: owners, acls: [{ action: 'accept', src: ['192.168.5.0/24'], dst: ['tag:db:5432'] }] }), snap);
  t.deepEqual(p.filterFor(5), [
    {
      SrcIPs: ['192.168.5.0/24'],
      DstPorts: [
        { IP: '100.64.0.5', Ports: { First: 5432, Last: 5432 } },
        { IP: 'fd7a:115c:a1e0::5', Ports: { First: 5432, Last: 5432 } },
      ],
    },
  ]);
  t.deepEqual(p.routesFor(5, 8), ['192.168.5.0/24']);
  t.deepEqual(p.peersOf(5), [8]);
  t.deepEqual(p.routesFor(1, 8), []);
});

test('subnet to subnet: a router whose subnet may reach another subnet gets the other route', (t) => {
  const snap = snapshot([node(8, ['tag:router'], ['10.1.0.0/16']), node(9, ['tag:router'], ['10.2.0.0/16'])]);
  const p = compile(t, policyText({ tagOwners: owners, acls: [{ action: 'accept', src: ['10.1.0.0/16'], dst: ['10.2.0.0/16:*'] }] }), snap);
  t.deepEqual(p.routesFor(8, 9), ['10.2.0.0/16']);
  t.deepEqual(p.routesFor(9, 8), ['10.1.0.0/16']);
  t.deepEqual(p.filterFor(9), [{ SrcIPs: ['10.1.0.0/16'], DstPorts: [{ IP: '10.2.0.0/16', Ports: { First: 0, Last: 65535 } }] }]);
});

test('exit nodes: offered only with autogroup:internet (or "*") access; a router\'s subnets still follow their own rules', (t) => {
  const snap = snapshot([node(1, 'alice'), node(3, 'bob'), node(9, ['tag:exit'], ['0.0.0.0/0', '::/0', '10.9.0.0/16'])]);
  const p = compile(t, policyText({ tagOwners: owners, acls: [{ action: 'accept', src: ['alice@'], dst: ['autogroup:internet:*'] }] }), snap);
  t.deepEqual(p.routesFor(1, 9), ['0.0.0.0/0', '::/0']);
  t.deepEqual(p.routesFor(3, 9), []);
  t.deepEqual(p.peersOf(1), [9]);
  t.deepEqual(p.peersOf(3), []);
  const star = compile(t, policyText({ acls: [{ action: 'accept', src: ['bob@'], dst: ['*:*'] }] }), snap);
  t.deepEqual(star.routesFor(3, 9), ['0.0.0.0/0', '::/0', '10.9.0.0/16'], 'in the order they were approved');
  t.deepEqual(star.routesFor(1, 9), []);
});

test('exit nodes: a CIDR out on the internet does not make an exit node usable', (t) => {
  const snap = snapshot([node(1, 'alice'), node(9, ['tag:exit'], ['0.0.0.0/0', '::/0'])]);
  const p = compile(t, policyText({ tagOwners: owners, acls: [{ action: 'accept', src: ['alice@'], dst: ['8.8.8.0/24:53'] }] }), snap);
  t.deepEqual(p.routesFor(1, 9), []);
  t.deepEqual(p.filterFor(9), []);
  t.deepEqual(p.peersOf(1), []);
});

test('a router never gets its own routes, and unknown ids are an error, not a silent empty answer', (t) => {
  const snap = snapshot([node(8, ['tag:router'], ['10.1.0.0/16'])]);
  const p = compile(t, policyText({ tagOwners: owners, acls: [{ action: 'accept', src: ['*'], dst: ['*:*'] }] }), snap);
  t.deepEqual(p.routesFor(8, 8), []);
  t.throws(() => p.peersOf(99), { message: /node 99 is not in the compiled snapshot/ });
});

test('routers of the same prefix do not route it through each other; an exit node does not use another', (t) => {
  const snap = snapshot([
    node(8, ['tag:router'], ['10.1.0.0/16']),
    node(9, ['tag:router'], ['10.1.0.0/16', '10.2.0.0/16']),
    node(10, ['tag:exit'], ['0.0.0.0/0', '::/0']),
    node(11, ['tag:exit'], ['0.0.0.0/0', '::/0']),
  ]);
  const p = compile(t, policyText({ tagOwners: owners, acls: [{ action: 'accept', src: ['*'], dst: ['*:*'] }] }), snap);
  t.deepEqual(p.routesFor(8, 9), ['10.2.0.0/16']);
  t.deepEqual(p.routesFor(10, 11), []);
  t.deepEqual(p.routesFor(10, 9), ['10.1.0.0/16', '10.2.0.0/16']);
});

test('a capability granted into a subnet makes its route usable', (t) => {
  const snap = snapshot([node(1, 'alice'), node(8, ['tag:router'], ['10.1.0.0/16'])]);
  const p = compile(t, policyText({ tagOwners: owners, grants: [{ src: ['alice@'], dst: ['10.1.0.0/16'], app: { 'example.com/cap/x': [] } }] }), snap);
  t.deepEqual(p.routesFor(1, 8), ['10.1.0.0/16']);
  t.deepEqual(p.filterFor(8), [{ SrcIPs: ['100.64.0.1', 'fd7a:115c:a1e0::1'], CapGrant: [{ Dsts: ['10.1.0.0/16'], CapMap: { 'example.com/cap/x': [] } }] }]);
});
