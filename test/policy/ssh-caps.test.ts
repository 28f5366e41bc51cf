// Tailscale SSH policies, node capabilities (nodeAttrs, Taildrop, SSH), auto-approvers and tag ownership.
import test from 'ava';
import { at, compile, node, policyText, snapshot, v4, v6 } from './tailnet.ts';

const owners = { 'tag:srv': ['group:admins'], 'tag:router': ['alice@', 'tag:ci'], 'tag:ci': ['alice@'], 'tag:exit': ['autogroup:member'] };
const ACCEPT = { accept: true, allowAgentForwarding: true, allowLocalPortForwarding: true, allowRemotePortForwarding: true };
const snap = snapshot([node(1, 'alice'), node(2, 'alice'), node(3, 'bob'), node(4, 'carol'), node(5, ['tag:srv']), node(6, ['tag:ci'])]);

test('ssh: a group may log in to tagged servers as root and any non-root user', (t) => {
  const p = compile(
    t,
    policyText({
      groups: { 'group:admins': ['bob@'] },
      tagOwners: owners,
      acls: [],
      ssh: [{ action: 'accept', src: ['group:admins'], dst: ['tag:srv'], users: ['root', 'autogroup:nonroot'] }],
    }),
    snap,
  );
  t.deepEqual(p.sshPolicyFor(5), { rules: [{ principals: [{ nodeIP: v4(3) }, { nodeIP: v6(3) }], sshUsers: { '*': '=', root: 'root' }, action: ACCEPT }] });
  t.is(p.sshPolicyFor(3), null);
  t.false(p.mayReach(3, 5, 6, 22), 'an ssh rule is not network access (an ACL opens port 22)');
});

test('ssh: named local users map to themselves and root is closed unless listed', (t) => {
  const p = compile(
    t,
    policyText({
      groups: { 'group:admins': [] },
      tagOwners: owners,
      ssh: [{ action: 'accept', src: ['alice@'], dst: ['tag:srv'], users: ['ubuntu', 'deploy'] }],
    }),
    snap,
  );
  t.deepEqual(p.sshPolicyFor(5)?.rules[0].sshUsers, { ubuntu: 'ubuntu', deploy: 'deploy', root: '' });
});

test("ssh: autogroup:self gives each user's devices a rule whose principals are that user's devices", (t) => {
  const p = compile(t, policyText({ ssh: [{ action: 'accept', src: ['autogroup:member'], dst: ['autogroup:self'], users: ['autogroup:nonroot'] }] }), snap);
  const alice = [1, 2].flatMap((i) => [{ nodeIP: v4(i) }, { nodeIP: v6(i) }]);
  t.deepEqual(p.sshPolicyFor(1), { rules: [{ principals: alice, sshUsers: { '*': '=', root: '' }, action: ACCEPT }] });
  t.deepEqual(p.sshPolicyFor(3)?.rules[0].principals, [{ nodeIP: v4(3) }, { nodeIP: v6(3) }]);
  t.is(p.sshPolicyFor(5), null);
});

test('ssh: localpart:*@domain lets each source user log in as the local part of their address', (t) => {
  const p = compile(
    t,
    policyText({
      groups: { 'group:admins': [] },
      tagOwners: owners,
      ssh: [{ action: 'accept', src: ['autogroup:member'], dst: ['tag:srv'], users: ['localpart:*@example.com'] }],
    }),
    snap,
  );
  t.deepEqual(p.sshPolicyFor(5), {
    rules: [{ principals: [1, 2].flatMap((i) => [{ nodeIP: v4(i) }, { nodeIP: v6(i) }]), sshUsers: { alice: 'alice' }, action: ACCEPT }],
  });
});

test("ssh: acceptEnv is passed through; rules keep the policy's order", (t) => {
  const p = compile(
    t,
    policyText({
      groups: { 'group:admins': [] },
      tagOwners: owners,
      ssh: [
        { action: 'accept', src: ['bob@'], dst: ['tag:srv'], users: ['root'], acceptEnv: ['GIT_*'] },
        { action: 'accept', src: ['carol@'], dst: ['tag:srv'], users: ['carol'] },
      ],
    }),
    snap,
  );
  const rules = p.sshPolicyFor(5)!.rules;
  t.deepEqual(rules[0].acceptEnv, ['GIT_*']);
  t.deepEqual(rules[1].principals, [{ nodeIP: v4(4) }, { nodeIP: v6(4) }]);
});

test('capabilities: SSH targets get the SSH capability (tailscale set --ssh), others do not', (t) => {
  const p = compile(
    t,
    policyText({ groups: { 'group:admins': [] }, tagOwners: owners, ssh: [{ action: 'accept', src: ['bob@'], dst: ['tag:srv'], users: ['root'] }] }),
    snap,
  );
  t.true('https://tailscale.com/cap/ssh' in p.capMapFor(5));
  t.false('https://tailscale.com/cap/ssh' in p.capMapFor(3));
  t.true(p.needsSSHCapability(5));
  t.false(p.needsSSHCapability(3));
});

test('capabilities: Taildrop is on for every device unless turned off; nodeAttrs attributes and app values pass through', (t) => {
  const text = policyText({
    groups: { 'group:admins': [] },
    tagOwners: owners,
    nodeAttrs: [
      { target: ['autogroup:member'], attr: ['drive:share', 'drive:access'] },
      { target: ['tag:srv', 'carol@'], attr: ['nextdns:abc123'], app: { 'tailscale.com/app-connectors': [{ name: 'x' }] } },
      { target: ['*'], attr: ['randomize-client-port'] },
    ],
  });
  const p = compile(t, text, snap);
  t.deepEqual(p.capMapFor(1), { 'https://tailscale.com/cap/file-sharing': null, 'drive:share': null, 'drive:access': null, 'randomize-client-port': null });
  t.deepEqual(p.capMapFor(5), {
    'https://tailscale.com/cap/file-sharing': null,
    'nextdns:abc123': null,
    'tailscale.com/app-connectors': [{ name: 'x' }],
    'randomize-client-port': null,
  });
  t.deepEqual(p.capMapFor(4)['tailscale.com/app-connectors'], [{ name: 'x' }]);
  const off = compile(t, text, snap, { strict: true, taildrop: false });
  t.false('https://tailscale.com/cap/file-sharing' in off.capMapFor(1));
});

test('auto-approvers: routes cover sub-prefixes and match tags of tagged devices; exit routes go by exitNode', (t) => {
  const s = snapshot([node(1, 'alice'), node(3, 'bob'), node(6, ['tag:ci']), node(7, ['tag:router'])]);
  const text = `{
  "tagOwners": ${JSON.stringify(owners)},
  "groups": { "group:admins": ["bob@"] },
  "autoApprovers": {
    "routes": { "10.0.0.0/8": ["tag:router", "group:admins"], "0.0.0.0/0": ["alice@"] },
    "exitNode": ["tag:ci"]
  }
}`;
  const p = compile(t, text, s);
  t.is(p.autoApprover(7, '10.20.0.0/16'), 'autoApprovers.routes["10.0.0.0/8"] (line 5): tag:router');
  t.is(p.autoApprover(3, '10.20.0.0/16'), 'autoApprovers.routes["10.0.0.0/8"] (line 5): group:admins');
  t.is(p.autoApprover(1, '192.168.0.0/24'), 'autoApprovers.routes["0.0.0.0/0"] (line 5): alice@');
  t.is(p.autoApprover(6, '10.20.0.0/16'), null, 'a tagged device is its tags, not its user');
  t.is(p.autoApprover(1, '0.0.0.0/0'), null, 'exit routes are not approved by a routes entry');
  t.is(p.autoApprover(6, '::/0'), 'autoApprovers.exitNode (line 6): tag:ci');
  t.is(p.autoApprover(7, '11.0.0.0/8'), null);
});

test('tag ownership: users, groups and autogroup:member may own tags; tags may own tags; unknown tags never', (t) => {
  const p = compile(t, policyText({ groups: { 'group:admins': ['carol@'] }, tagOwners: owners }), snap);
  // Users: alice 1, bob 2, carol 3.
  t.true(p.mayOwnTag(3, 'tag:srv'));
  t.false(p.mayOwnTag(2, 'tag:srv'));
  t.true(p.mayOwnTag(1, 'tag:router'));
  t.true(p.mayOwnTag(2, 'tag:exit'));
  t.false(p.mayOwnTag(99, 'tag:exit'), 'a user who does not exist owns nothing');
  t.false(p.mayOwnTag(1, 'tag:nope'));
  t.true(p.tagsMayOwnTag(['tag:ci'], 'tag:router'));
  t.false(p.tagsMayOwnTag(['tag:srv'], 'tag:router'));
  t.false(compile(t, '', snap).mayOwnTag(1, 'tag:srv'), 'without a policy no tag is owned');
});

test('the machine page: who may reach a device, on what, in words', (t) => {
  const text = policyText({
    groups: { 'group:admins': ['bob@'] },
    tagOwners: owners,
    acls: [
      { action: 'accept', src: ['group:admins'], dst: ['tag:srv:22,443'] },
      { action: 'accept', src: ['carol@', 'alice@'], proto: 'tcp', dst: ['tag:srv:8000-8100'] },
      { action: 'accept', src: ['autogroup:member'], dst: ['autogroup:self:*'] },
    ],
    ssh: [{ action: 'accept', src: ['group:admins'], dst: ['tag:srv'], users: ['root'] }],
  });
  const p = compile(t, text, snap);
  t.deepEqual(
    p.reachersOf(5).map((r) => r.text),
    ['group:admins → tcp/udp 22, 443', 'carol@, alice@ → tcp 8000-8100', 'group:admins → ssh as root'],
  );
  t.deepEqual(
    p.reachersOf(1).map((r) => r.text),
    ["alice@'s own devices (autogroup:self) → tcp/udp every port"],
  );
  t.is(p.reachersOf(5)[0].origin, 'acls[0]');
  // The rule's line: the line of its opening brace, just above its "action".
  t.is(p.reachersOf(5)[0].line, Number(at(text, '"action"').split(' ')[1].replace(',', '')) - 1);
});
