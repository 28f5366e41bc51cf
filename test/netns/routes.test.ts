// Subnet routers and exit nodes with the official Tailscale client (v1.102.3), each tailscaled in a network namespace
// of its own (test/harness/netlab.ts), all reaching the image on the host's loopback through netns.ts's bridge:
//
//   alice, bob ── (tailnet) ──► router-a  eth1 10.201.0.11 ─┐
//                               router-b  eth1 10.201.0.12 ─┴─ lan: bridge 10.201.0.2, TCP :8080 "lan saw <from>"
//                               exit      eth1 10.202.0.1 ──── isp: 10.202.0.2, 198.51.100.2 on lo, TCP :8080
//
// The clients' namespaces have no default route (the image is reached on their loopback), so 10.201.0.2 and
// 198.51.100.2 are reachable from them only through the tailnet (userspace networking dials a routed address through the tailnet, anything else from the
// namespace, where it fails at once); the listeners answer with the address the connection came from, so a test sees
// which router or exit node carried it. The exit node's "internet" address is one hop behind it: an exit node does
// not forward into networks it is attached to (tailscale ipn/ipnlocal shrinkDefaultRoute).
//
// The tests run in order and build on each other: router-a alone without a policy; then a policy with autoApprovers
// and router-b; then both routers for failover; then the exit node; then a policy that narrows what alice and bob get.
import { setTimeout as sleep } from 'node:timers/promises';
import test, { type ExecutionContext } from 'ava';
import { startImage, type Image } from '../harness/image.ts';
import { Lab, netlabMissing } from '../harness/netlab.ts';
import { NODE, type Proc } from '../harness/process.ts';
import { hseOut } from '../harness/hse-cli.ts';
import { haveTailscale, TsNode, type TsStatus, type TsStatusPeer } from '../harness/tailscale.ts';

const LAN = '10.201.0.0/24';
const LAN_HOST = '10.201.0.2';
const INTERNET_HOST = '198.51.100.2';
/** The listeners' port, inside namespaces of the lab's own (nothing else listens there). */
const PORT = 8080;
/** How a dial fails on a client that does not route the address through the tailnet: from its namespace, no route. */
const NOT_ROUTED = /network is unreachable/;
const ROUTER_LAN_ADDR: Record<string, string> = { 'router-a': '10.201.0.11', 'router-b': '10.201.0.12' };

/** Answers each connection with one line naming itself and the address the connection came from, then closes it. */
const LISTENER = `
const net = require('node:net');
const [label, addr, port] = process.argv.slice(1);
net.createServer((s) => s.end(label + ' saw ' + s.remoteAddress + '\\n')).listen(Number(port), addr, () => console.log('listening'));
`;

interface RouteView {
  node: string;
  prefix: string;
  advertised: boolean;
  approved: boolean;
  active: boolean;
  primary: boolean;
  online: boolean;
}

const missing = !haveTailscale() ? 'tailscaled/tailscale not found; run .ci/run or go install them (see README)' : netlabMissing();
if (missing) {
  test('subnet routers and exit nodes can be tested here', (t) => t.fail(missing));
} else {
  let image: Image;
  let lab: Lab;
  const nodes = new Map<string, TsNode>();
  const listeners: Proc[] = [];

  const hse = (...args: string[]): Promise<string> => hseOut(image, args);

  async function setPolicy(policy: unknown): Promise<void> {
    await hseOut(image, ['policy', 'set', '-'], JSON.stringify(policy));
  }

  const routes = async (): Promise<RouteView[]> => JSON.parse(await hse('routes', 'list', '--json')) as RouteView[];
  async function routeUntil(node: string, prefix: string, ok: (r: RouteView) => boolean, what: string, ms = 30_000): Promise<RouteView> {
    const deadline = Date.now() + ms;
    for (;;) {
      const r = await routeOf(node, prefix);
      if (r && ok(r)) return r;
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; last: ${JSON.stringify(r)}`);
      await sleep(250);
    }
  }

  const routeOf = async (node: string, prefix: string) => (await routes()).find((r) => r.node === node && r.prefix === prefix);

  async function key(user: string, tags?: string): Promise<string> {
    return JSON.parse(await hse('keys', 'create', '--user', user, '--reusable', '--json', ...(tags ? ['--tags', tags] : []))).key as string;
  }

  /** A tailscaled in a new namespace on the lab bridge, logged in with `authKey`. */
  /** A tailscaled in its namespace (made now unless the test made it already), logged in with `authKey`. */
  async function join(name: string, authKey: string, flags: string[], made = false): Promise<TsNode> {
    const ns = made ? lab.ns(name) : await lab.namespace(name, image.port);
    const n = new TsNode({ name, netns: { wrap: ns.wrap }, env: { TS_DEBUG_USE_DERP_HTTP: '1' } });
    nodes.set(name, n);
    await n.start();
    await n.up(image.url, [`--auth-key=${authKey}`, ...flags]);
    await n.waitFor((s) => s.BackendState === 'Running', 'running');
    return n;
  }

  const peer = (s: TsStatus, host: string): TsStatusPeer | undefined => Object.values(s.Peer ?? {}).find((p) => p.HostName === host);
  const primaryOf = (s: TsStatus, host: string): string[] => peer(s, host)?.PrimaryRoutes ?? [];

  /** Why the last `reach` failed, for the test's log. */
  let lastFailure = '';

  /** `tailscale nc addr port` on the client: the listener's line, or null when the connection failed. */
  async function reach(client: TsNode, addr: string, timeoutMs = 10_000): Promise<string | null> {
    const started = Date.now();
    try {
      const { stdout } = await client.cli(['nc', addr, String(PORT)], timeoutMs);
      if (stdout.trim() !== '') return stdout.trim();
      lastFailure = 'connected, but no answer';
    } catch (e) {
      const err = e as { killed?: boolean; stderr?: string; message: string };
      lastFailure = err.killed ? `no connection within ${timeoutMs} ms` : (err.stderr ?? err.message).trim();
    }
    lastFailure = `${client.name} → ${addr}: ${lastFailure} (${Date.now() - started} ms)`;
    return null;
  }

  /** Polls `reach` until the answer matches; throws with the last answer and the client's log. */
  async function reachUntil(client: TsNode, addr: string, want: RegExp, ms = 60_000): Promise<string> {
    const deadline = Date.now() + ms;
    let last: string | null = null;
    while (Date.now() < deadline) {
      last = await reach(client, addr);
      if (last && want.test(last)) return last;
      await sleep(500);
    }
    throw new Error(
      `${client.name} did not get ${want} from ${addr} within ${ms} ms; last answer: ${last}\n--- tailscaled ---\n${client.output().slice(-4000)}`,
    );
  }

  test.before(async () => {
    lab = Lab.create();
    image = await startImage({});
    await lab.namespace('lan');
    await lab.bridge('lan', 'br0', `${LAN_HOST}/24`);
    // The "internet" behind the exit node: one hop away, the address on the far side's loopback.
    await lab.namespace('isp');
    await lab.ip('isp', ['addr', 'add', `${INTERNET_HOST}/32`, 'dev', 'lo']);
    for (const [ns, label, addr] of [
      ['lan', 'lan', LAN_HOST],
      ['isp', 'internet', INTERNET_HOST],
    ]) {
      const p = lab.start(ns, `listener ${label}`, NODE, ['-e', LISTENER, label, addr, String(PORT)]);
      listeners.push(p);
      await p.waitFor(/listening/);
    }

    await hse('users', 'create', 'ops');
    await hse('users', 'create', 'alice');
    await hse('users', 'create', 'bob');
  });

  test.after.always(async () => {
    for (const n of nodes.values()) await n.destroy().catch(() => {});
    for (const p of listeners) await p.stop().catch(() => {});
    await image?.stop();
    await lab?.destroy();
  });

  test.serial('a subnet route is used only once approved, and no longer once unapproved', async (t) => {
    await lab.namespace('router-a', image.port);
    await lab.link('router-a', 'eth1', `${ROUTER_LAN_ADDR['router-a']}/24`, 'lan', 'veth-a', { bridge: 'br0' });
    const routerA = await join('router-a', await key('ops'), [`--advertise-routes=${LAN}`], true);
    const alice = await join('alice', await key('alice'), ['--accept-routes']);

    const pending = await routeOf('router-a', LAN);
    t.like(pending, { advertised: true, approved: false, active: false, primary: false }, JSON.stringify(pending));
    const s = await alice.waitFor((x) => peer(x, 'router-a')?.Online === true, 'router-a online');
    t.deepEqual(primaryOf(s, 'router-a'), [], 'only advertised: not offered to peers');
    t.false(peer(s, 'router-a')?.AllowedIPs?.includes(LAN) ?? false);
    t.is(await reach(alice, LAN_HOST), null, 'the LAN is not reachable through an unapproved route');
    t.regex(lastFailure, NOT_ROUTED, 'the client does not route the address through the tailnet');

    await hse('routes', 'approve', 'router-a', LAN);
    t.like(await routeOf('router-a', LAN), { advertised: true, approved: true, active: true, primary: true });
    await alice.waitFor((x) => primaryOf(x, 'router-a').includes(LAN), 'router-a primary for the LAN');
    const answer = await reachUntil(alice, LAN_HOST, /lan saw/);
    t.is(answer, `lan saw ${ROUTER_LAN_ADDR['router-a']}`, 'the connection came through router-a');
    // The router itself is told the route is approved and that it is primary.
    const self = (await routerA.status()).Self;
    t.deepEqual(self.PrimaryRoutes, [LAN], JSON.stringify(self));

    await hse('routes', 'unapprove', 'router-a', LAN);
    await alice.waitFor((x) => !peer(x, 'router-a')?.AllowedIPs?.includes(LAN), 'the route gone from router-a');
    t.deepEqual(primaryOf(await alice.status(), 'router-a'), []);
    t.is(await reach(alice, LAN_HOST), null, 'the LAN is no longer reachable');
    t.regex(lastFailure, NOT_ROUTED, 'the client does not route the address through the tailnet');
    t.like(await routeOf('router-a', LAN), { advertised: true, approved: false, active: false });
  });

  test.serial('an autoApprovers rule approves a router’s route at registration, with no operator step', async (t) => {
    await setPolicy({
      tagOwners: { 'tag:router': ['ops@'] },
      // A rule for a wider prefix covers the /24 the router advertises.
      autoApprovers: { routes: { '10.201.0.0/16': ['tag:router'] } },
      acls: [{ action: 'accept', src: ['*'], dst: ['*:*'] }],
    });
    await lab.namespace('router-b', image.port);
    await lab.link('router-b', 'eth1', `${ROUTER_LAN_ADDR['router-b']}/24`, 'lan', 'veth-b', { bridge: 'br0' });
    await join('router-b', await key('ops', 'tag:router'), [`--advertise-routes=${LAN}`], true);

    const r = await routeOf('router-b', LAN);
    t.like(r, { advertised: true, approved: true, active: true }, JSON.stringify(r));
    const alice = nodes.get('alice')!;
    await alice.waitFor((x) => primaryOf(x, 'router-b').includes(LAN), 'router-b primary for the LAN');
    t.is(await reachUntil(alice, LAN_HOST, /lan saw/), `lan saw ${ROUTER_LAN_ADDR['router-b']}`);
    t.regex(image.logs(), /route approved automatically.*router-b.*autoApprovers/, 'the log says it was automatic and by which rule');
    // router-a (not tagged) is not covered by the rule: its route stays unapproved.
    t.like(await routeOf('router-a', LAN), { approved: false });
  });

  test.serial('with two routers for the LAN, the client keeps reaching it when the primary stops, and the primary does not flap back', async (t) => {
    const alice = nodes.get('alice')!;
    await hse('routes', 'approve', 'router-a', LAN);
    // router-b stays primary: approving another router does not move the route.
    const both = (await routes()).filter((r) => r.prefix === LAN);
    t.deepEqual(both.map((r) => [r.node, r.active, r.primary]).sort(), [
      ['router-a', true, false],
      ['router-b', true, true],
    ]);
    const s = await alice.waitFor((x) => peer(x, 'router-a') !== undefined && primaryOf(x, 'router-b').includes(LAN), 'router-b primary');
    t.deepEqual(primaryOf(s, 'router-a'), [], 'the standby is not offered the route: AllowedIPs on the primary only');
    t.false(peer(s, 'router-a')?.AllowedIPs?.includes(LAN) ?? true);
    t.is(await reachUntil(alice, LAN_HOST, /lan saw/), `lan saw ${ROUTER_LAN_ADDR['router-b']}`);

    // Twice, so that each router is once the one that returns: the lower node id (router-a) coming back must not
    // take the route back any more than the higher one.
    await failover(t, 'router-b', 'router-a');
    await failover(t, 'router-a', 'router-b');
  });

  /** Stops the primary `from`: the client reaches the LAN through `to`; `from` returns and does not take it back. */
  async function failover(t: ExecutionContext, from: string, to: string): Promise<void> {
    const alice = nodes.get('alice')!;
    const primary = nodes.get(from)!;
    t.like(await routeOf(from, LAN), { primary: true, online: true });
    const stoppedAt = Date.now();
    await primary.stop();
    // The bound: another router takes over within 15 s of the primary going away.
    const took = await reachUntil(alice, LAN_HOST, new RegExp(ROUTER_LAN_ADDR[to].replace(/\./g, '\\.')), 15_000);
    t.log(`the client reached the LAN through ${to} ${Date.now() - stoppedAt} ms after ${from}'s tailscaled was stopped`);
    t.is(took, `lan saw ${ROUTER_LAN_ADDR[to]}`);
    t.like(await routeOf(to, LAN), { primary: true });
    t.like(await routeOf(from, LAN), { primary: false, online: false });

    await primary.start();
    await alice.waitFor((x) => peer(x, from)?.Online === true, `${from} back online`);
    // Back, it does not take the route back: watch for a while after it reconnected.
    for (let i = 0; i < 6; i++) {
      const now = await alice.status();
      t.deepEqual(primaryOf(now, to), [LAN]);
      t.deepEqual(primaryOf(now, from), []);
      await sleep(500);
    }
    t.like(await routeOf(to, LAN), { primary: true, online: true });
    t.like(await routeOf(from, LAN), { primary: false, online: true });
    t.is(await reach(alice, LAN_HOST), `lan saw ${ROUTER_LAN_ADDR[to]}`);
  }

  test.serial('an approved exit node is offered to the client, and its traffic to the internet leaves through it', async (t) => {
    const alice = nodes.get('alice')!;
    await lab.namespace('exit', image.port);
    await lab.link('exit', 'eth1', '10.202.0.1/30', 'isp', 'eth1', '10.202.0.2/30');
    await lab.ip('exit', ['route', 'add', `${INTERNET_HOST}/32`, 'via', '10.202.0.2']);
    const exit = await join('exit', await key('ops'), ['--advertise-exit-node'], true);
    const exitIp = (await exit.status()).Self.TailscaleIPs.find((a) => a.includes('.'))!;

    await alice.waitFor((x) => peer(x, 'exit')?.Online === true, 'the exit node online');
    const listBefore = await alice.cli(['exit-node', 'list']).then(
      (r) => r.stdout,
      (e: { stdout?: string; stderr?: string }) => `${e.stdout ?? ''}${e.stderr ?? ''}`,
    );
    t.notRegex(listBefore, /\bexit\b.*\d/, `advertised only: not offered (${listBefore})`);
    t.like(await routeOf('exit', 'exit'), { advertised: true, approved: false, active: false });

    await hse('routes', 'approve', 'exit', 'exit');
    await alice.waitFor((x) => peer(x, 'exit')?.ExitNodeOption === true, 'the exit node offered');
    const list = (await alice.cli(['exit-node', 'list'])).stdout;
    t.regex(list, new RegExp(`${exitIp.replace(/\./g, '\\.')}\\s+exit\\b`), list);
    // Exit routes are never primary: the peer carries both /0 routes, and no PrimaryRoutes.
    const p = peer(await alice.status(), 'exit')!;
    t.true(p.AllowedIPs?.includes('0.0.0.0/0') && p.AllowedIPs?.includes('::/0'), JSON.stringify(p.AllowedIPs));
    t.deepEqual(p.PrimaryRoutes ?? [], []);

    t.is(await reach(alice, INTERNET_HOST), null, 'without an exit node selected, the internet address is unreachable');
    t.regex(lastFailure, NOT_ROUTED, 'the client does not route the address through the tailnet');
    await alice.cli(['set', `--exit-node=${exitIp}`]);
    await alice.waitFor((x) => peer(x, 'exit')?.ExitNode === true, 'the exit node in use');
    t.is(await reachUntil(alice, INTERNET_HOST, /internet saw/), 'internet saw 10.202.0.1', 'the connection left through the exit node');
  });

  test.serial('a policy narrows routes per user: no autogroup:internet takes the exit node away, and a user not admitted to the LAN stays out', async (t) => {
    const alice = nodes.get('alice')!;
    const bob = await join('bob', await key('bob'), ['--accept-routes']);
    // Before the policy changes, bob is given the LAN like everyone (the rule is "*:*").
    await bob.waitFor((x) => primaryOf(x, 'router-b').includes(LAN), 'bob given the LAN');
    t.regex((await reachUntil(bob, LAN_HOST, /lan saw/)) ?? '', /lan saw/);

    await setPolicy({
      tagOwners: { 'tag:router': ['ops@'] },
      autoApprovers: { routes: { '10.201.0.0/16': ['tag:router'] } },
      acls: [
        // alice may use the LAN, and nothing on the internet.
        { action: 'accept', src: ['alice@'], dst: [`${LAN}:*`] },
        // bob may reach ops's machines themselves and the internet, not the LAN behind the routers.
        { action: 'accept', src: ['bob@'], dst: ['ops@:*', 'tag:router:*', 'autogroup:internet:*'] },
      ],
    });

    await alice.waitFor((x) => peer(x, 'exit')?.ExitNodeOption !== true, 'the exit node no longer offered to alice');
    const list = await alice.cli(['exit-node', 'list']).then(
      (r) => r.stdout,
      (e: { stdout?: string; stderr?: string }) => `${e.stdout ?? ''}${e.stderr ?? ''}`,
    );
    t.notRegex(list, /\bexit\b.*\d/, list);
    t.is(await reach(alice, INTERNET_HOST), null, 'alice cannot leave through the exit node any more');
    t.regex(lastFailure, NOT_ROUTED, 'the client does not route the address through the tailnet');
    t.regex((await reachUntil(alice, LAN_HOST, /lan saw/)) ?? '', /lan saw 10\.201\.0\.1[12]/, 'alice still reaches the LAN');

    const s = await bob.waitFor((x) => !peer(x, 'router-a')?.AllowedIPs?.includes(LAN), 'the LAN gone from bob');
    t.truthy(peer(s, 'router-a'), 'bob still sees the router itself');
    t.deepEqual(primaryOf(s, 'router-a'), []);
    t.deepEqual(primaryOf(s, 'router-b'), []);
    t.is(await reach(bob, LAN_HOST), null, 'bob cannot reach the LAN, though the route is approved');
    t.regex(lastFailure, NOT_ROUTED, 'the client does not route the address through the tailnet');
    t.like(await routeOf('router-b', LAN), { approved: true, active: true, primary: true });

    // autogroup:internet gives bob the exit node: offered, and the exit node's filter lets his traffic out.
    const exitIp = (await nodes.get('exit')!.status()).Self.TailscaleIPs.find((a) => a.includes('.'))!;
    await bob.waitFor((x) => peer(x, 'exit')?.ExitNodeOption === true, 'the exit node offered to bob');
    await bob.cli(['set', `--exit-node=${exitIp}`]);
    t.is(await reachUntil(bob, INTERNET_HOST, /internet saw/), 'internet saw 10.202.0.1');
  });

  test.serial('a router that stops advertising, or is deleted, hands the route to the other router', async (t) => {
    const alice = nodes.get('alice')!;
    const routerB = nodes.get('router-b')!;
    t.like(await routeOf('router-b', LAN), { primary: true });
    // The client drops the route from its prefs: the next Hostinfo has no RoutableIPs at all.
    await routerB.cli(['set', '--advertise-routes=']);
    await alice.waitFor((x) => primaryOf(x, 'router-a').includes(LAN) && primaryOf(x, 'router-b').length === 0, 'router-a primary again');
    t.like(await routeOf('router-b', LAN), { advertised: false, approved: true, active: false, primary: false });
    t.is(await reachUntil(alice, LAN_HOST, /lan saw/), `lan saw ${ROUTER_LAN_ADDR['router-a']}`);

    // Advertising again does not take the route back; deleting router-a then moves it to router-b.
    await routerB.cli(['set', `--advertise-routes=${LAN}`]);
    await routeUntil('router-b', LAN, (r) => r.advertised && r.active, 'router-b advertising again');
    t.like(await routeOf('router-a', LAN), { primary: true });
    await hse('nodes', 'delete', 'router-a');
    await alice.waitFor((x) => peer(x, 'router-a') === undefined && primaryOf(x, 'router-b').includes(LAN), 'router-b primary after router-a was deleted');
    t.is(await reachUntil(alice, LAN_HOST, /lan saw/), `lan saw ${ROUTER_LAN_ADDR['router-b']}`);
  });
}
