// Tailscale SSH with the official client (v1.102.3) through the router. The policy's ssh rules decide which devices may
// run the SSH server (`tailscale set --ssh` is refused elsewhere with the client's own "not enabled on Tailnet") and
// who may log in as whom; `tailscale ssh` from an allowed device runs a command (OpenSSH's client through
// `tailscale nc`, the host key pinned from the map) and returns its output, a device without a rule is turned away,
// and removing the rule turns away the allowed device too, without restarting anything. Sessions run as tailscaled's
// own user, root here. At save, "check" rules are refused with the reason, and sshTests run like tests.
import test from 'ava';
import { haveTailscale } from '../harness/tailscale.ts';
import { startTailnet, type Tailnet, tryCli, until } from '../harness/tailnet.ts';

const BASE = {
  tagOwners: { 'tag:server': ['alice@'] },
  // Everyone reaches everyone on every port, port 22 included: only the ssh rules decide who logs in.
  acls: [{ action: 'accept', src: ['*'], dst: ['*:*'] }],
};
const WITH_SSH = {
  ...BASE,
  ssh: [
    { action: 'accept', src: ['alice@'], dst: ['tag:server'], users: ['root', 'autogroup:nonroot'] },
    // Tailscale's default shape (with accept: hse has no check mode): a user's devices reach each other.
    { action: 'accept', src: ['alice@'], dst: ['autogroup:self'], users: ['root'] },
  ],
  sshTests: [
    { src: 'alice@', dst: ['tag:server'], accept: ['root', 'ubuntu'] },
    { src: 'bob@', dst: ['tag:server'], deny: ['root'] },
  ],
};

if (!haveTailscale()) {
  test('official Tailscale client is installed', (t) => t.fail('tailscaled/tailscale not found; run .ci/run or go install them (see README)'));
} else {
  let net: Tailnet;

  /** `tailscale ssh root@server -- <command>` from `from`. */
  const ssh = (from: string, ...command: string[]) => sshTo(from, 'server', ...command);
  const sshTo = (from: string, to: string, ...command: string[]) => tryCli(net.node(from), ['ssh', `root@${to}`, '--', ...command], 90_000);

  /** Waits until `from` has `to`'s SSH host keys from the map (the target's Hostinfo carries them once SSH is on). */
  async function hostKeysAt(from: string, to: string): Promise<void> {
    await until(
      `${to}’s SSH host keys at ${from}`,
      async () => (await net.node(from).cli(['status', '--json'])).stdout,
      (s) =>
        Object.values((JSON.parse(s) as { Peer: Record<string, { HostName: string; sshHostKeys?: string[] }> }).Peer).some(
          (p) => p.HostName === to && (p.sshHostKeys?.length ?? 0) > 0,
        ),
    );
  }

  test.before(async () => {
    net = await startTailnet({
      users: { alice: ['laptop', 'workstation'], bob: ['desk'] },
      tagged: { server: { owner: 'alice', tags: ['tag:server'] } },
      policy: JSON.stringify(WITH_SSH),
    });
  });

  test.after.always(async () => {
    await net?.stop();
  });

  test.serial('tailscale set --ssh succeeds only on a device an ssh rule targets', async (t) => {
    const refused = await tryCli(net.node('desk'), ['set', '--ssh']);
    t.not(refused.code, 0);
    t.regex(refused.stderr, /not enabled on Tailnet/);
    const ok = await tryCli(net.node('server'), ['set', '--ssh']);
    t.is(ok.code, 0, ok.stderr);
  });

  test.serial('tailscale ssh from an allowed device runs a command and returns its output', async (t) => {
    // The laptop pins the server's host key from the map.
    await hostKeysAt('laptop', 'server');
    // The remote shell expands SSH_CONNECTION (the local side runs no shell): "<client ip> <port> <server ip> 22".
    const r = await ssh('laptop', 'echo', '"$SSH_CONNECTION"', '&&', 'id', '-u');
    t.is(r.code, 0, `${r.stdout}\n${r.stderr}\n${net.logs().slice(-6000)}`);
    const laptopIp = (await net.node('laptop').status()).Self.TailscaleIPs[0];
    const serverIp = (await net.node('server').status()).Self.TailscaleIPs[0];
    t.regex(r.stdout, new RegExp(`^${laptopIp.replaceAll('.', '\\.')} \\d+ ${serverIp.replaceAll('.', '\\.')} 22$`, 'm'));
    t.regex(r.stdout, /^0$/m, 'the session runs as root, tailscaled’s own user');
  });

  test.serial('a device without an ssh rule is refused', async (t) => {
    const r = await ssh('desk', 'id', '-u');
    t.not(r.code, 0);
    t.notRegex(r.stdout, /^0$/m);
    t.regex(r.stderr, /tailnet policy does not permit you to SSH to this node/);
  });

  test.serial('autogroup:self: a user’s device logs in to the same user’s other device, another user’s is refused', async (t) => {
    t.is((await tryCli(net.node('workstation'), ['set', '--ssh'])).code, 0);
    await hostKeysAt('laptop', 'workstation');
    await hostKeysAt('desk', 'workstation');
    const ok = await sshTo('laptop', 'workstation', 'id', '-u');
    t.is(ok.code, 0, ok.stderr);
    t.regex(ok.stdout, /^0$/m);
    const refused = await sshTo('desk', 'workstation', 'id', '-u');
    t.not(refused.code, 0);
    t.regex(refused.stderr, /tailnet policy does not permit you to SSH to this node/);
  });

  test.serial('a check rule is refused at save, with the reason', async (t) => {
    const check = { ...BASE, ssh: [{ action: 'check', src: ['alice@'], dst: ['tag:server'], users: ['root'] }] };
    const r = await net.hse(['policy', 'set', '-'], JSON.stringify(check, null, 2));
    t.not(r.code, 0);
    t.regex(`${r.stdout}${r.stderr}`, /check mode needs a recent browser sign-in.*use accept/);
    // Nothing changed: the rule in force still lets the laptop in.
    t.is((await ssh('laptop', 'true')).code, 0);
  });

  test.serial('sshTests run at save: a failing one refuses the policy and names the test', async (t) => {
    const failing = { ...WITH_SSH, sshTests: [{ src: 'bob@', dst: ['tag:server'], accept: ['root'] }] };
    const r = await net.hse(['policy', 'set', '-'], JSON.stringify(failing, null, 2));
    t.not(r.code, 0);
    t.regex(r.stderr, /SSH test failed: bob@ cannot log in to tag:server as root, but the test says accept/);
    const narrower = { ...WITH_SSH, ssh: [{ ...WITH_SSH.ssh[0], src: ['bob@'] }] };
    const r2 = await net.hse(['policy', 'set', '-'], JSON.stringify(narrower, null, 2));
    t.not(r2.code, 0, 'the test "alice@ may log in as root" fails once the rule names bob@');
    t.regex(r2.stderr, /SSH test failed: alice@ cannot log in to tag:server as root/);
    t.is((await ssh('laptop', 'true')).code, 0, 'the policy in force is unchanged');
  });

  test.serial('removing the ssh rules turns the allowed devices away without a restart', async (t) => {
    await net.setPolicy(JSON.stringify(BASE));
    for (const to of ['server', 'workstation']) {
      const r = await until(
        `the laptop refused by ${to}`,
        () => sshTo('laptop', to, 'id', '-u'),
        (x) => x.code !== 0,
      );
      t.regex(r.stderr, /tailnet policy does not permit you to SSH to this node/);
    }
    // The device is no longer an SSH destination: turning the server on again is refused too.
    await tryCli(net.node('server'), ['set', '--ssh=false']);
    const again = await tryCli(net.node('server'), ['set', '--ssh']);
    t.not(again.code, 0);
    t.regex(again.stderr, /not enabled on Tailnet/);
  });
}
