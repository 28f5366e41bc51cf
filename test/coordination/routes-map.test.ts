// What the map streams say about subnet routers and exit nodes, at the wire level (our own control client through
// the real router and coordination process), for the parts an official client does not show in `tailscale status`:
// the routers' own PacketFilter, AllowedIPs on the primary only, and a policy change that changes only the routes a
// viewer may use (same peers) reaching its stream. The end-to-end behaviour with official clients is in
// test/netns/routes.test.ts. Reference: tailscale tailcfg.Node (AllowedIPs, PrimaryRoutes), net/routemanager (a
// prefix on two peers is resolved by the client, so control puts it on one), ipn/ipnlocal updateFilterLocked.
import test from 'ava';
import type { FilterRule, MapResponse, Node } from '../../services/coordination/src/tailcfg/tailcfg.ts';
import { ControlClient, type MapStream, serverKey } from '../harness/control-client.ts';
import { hseOut } from '../harness/hse-cli.ts';
import { startImage, type Image } from '../harness/image.ts';

const LAN = '10.9.0.0/24';

let image: Image;
let pub: Buffer;

async function hse(...args: string[]): Promise<unknown> {
  return JSON.parse(await hseOut(image, [...args, '--json']));
}

async function setPolicy(policy: unknown): Promise<void> {
  await hseOut(image, ['policy', 'set', '-'], JSON.stringify(policy));
}

interface Member {
  client: ControlClient;
  stream: MapStream;
  self: Node;
}

/** Registers a node for `user` with this Hostinfo and opens its map stream. */
async function member(user: string, hostname: string, routes: string[] = []): Promise<Member> {
  const { key } = (await hse('keys', 'create', '--user', user)) as { key: string };
  const client = await ControlClient.connect(image.port, pub);
  const hostinfo = { Hostname: hostname, OS: 'linux', ...(routes.length > 0 ? { RoutableIPs: routes } : {}) };
  const r = await client.register({ Auth: { AuthKey: key }, Hostinfo: hostinfo });
  if (!r.MachineAuthorized) throw new Error(`${hostname} not authorized: ${JSON.stringify(r)}`);
  const stream = client.stream({ Hostinfo: hostinfo });
  const self = (await stream.waitFor((m) => m.Node !== undefined, `${hostname}'s own Node`)).Node!;
  return { client, stream, self };
}

/** The latest Node of peer `id` the stream was sent (full map or PeersChanged). */
function latestPeer(s: MapStream, id: number): Node | undefined {
  let found: Node | undefined;
  for (const m of s.messages) for (const p of [...(m.Peers ?? []), ...(m.PeersChanged ?? [])]) if (p.ID === id) found = p;
  return found;
}

/** The latest PacketFilter the stream was sent. */
function latestFilter(s: MapStream): FilterRule[] {
  let found: FilterRule[] = [];
  for (const m of s.messages) if (m.PacketFilter) found = m.PacketFilter;
  return found;
}

/** Waits until the latest Node of peer `id` on the stream satisfies `ok`. */
async function untilPeer(s: MapStream, id: number, ok: (n: Node | undefined) => boolean, what: string): Promise<Node | undefined> {
  await s.waitFor(() => ok(latestPeer(s, id)), what);
  return latestPeer(s, id);
}

const dstIPs = (rules: FilterRule[]) => rules.flatMap((r) => (r.DstPorts ?? []).map((d) => d.IP));

test.before(async () => {
  image = await startImage({ services: ['coordination'] });
  pub = await serverKey(image.url);
  await hse('users', 'create', 'ops');
  await hse('users', 'create', 'alice');
});
test.after.always(async () => {
  await image?.stop();
});

test.serial(
  'subnet routes on the wire: the primary alone carries the prefix, the router’s filter names it, and a policy change of routes alone reaches the viewer',
  async (t) => {
    // alice may reach ops's machines, but not the LAN behind them.
    await setPolicy({ acls: [{ action: 'accept', src: ['alice@'], dst: ['ops@:*'] }] });
    const gw1 = await member('ops', 'gw1', [LAN]);
    const gw2 = await member('ops', 'gw2', [LAN]);
    const viewer = await member('alice', 'laptop');
    await hse('routes', 'approve', 'gw1', LAN);
    await hse('routes', 'approve', 'gw2', LAN);
    // gw1 went online first: it is primary, and knows it.
    const gw1Self = await gw1.stream.waitFor((m) => (m.Node?.PrimaryRoutes ?? []).includes(LAN), 'gw1 told it is primary');
    t.true(gw1Self.Node!.AllowedIPs!.includes(LAN), 'the router’s own Node lists its approved route');

    // Peers the same, routes not usable: gw1 is a peer of alice, without the LAN.
    const before = await untilPeer(viewer.stream, gw1.self.ID, (n) => n !== undefined, 'gw1 as a peer');
    t.false(before!.AllowedIPs!.includes(LAN), JSON.stringify(before!.AllowedIPs));
    t.is(before!.PrimaryRoutes, undefined);

    // The policy now admits alice to the LAN: the same peers, only the routes she may use change.
    const mark = viewer.stream.messages.length;
    await setPolicy({ acls: [{ action: 'accept', src: ['alice@'], dst: ['ops@:*', `${LAN}:*`] }] });
    await viewer.stream.waitFor(
      (m) => viewer.stream.messages.indexOf(m) >= mark && (m.PeersChanged ?? []).some((p) => p.ID === gw1.self.ID && (p.PrimaryRoutes ?? []).includes(LAN)),
      'gw1 resent with the LAN',
    );
    const primary = latestPeer(viewer.stream, gw1.self.ID)!;
    t.true(primary.AllowedIPs!.includes(LAN));
    t.true(primary.AllowedIPs!.includes(primary.Addresses[0]), 'AllowedIPs keeps the node’s own addresses');
    const standby = latestPeer(viewer.stream, gw2.self.ID)!;
    t.false(standby.AllowedIPs!.includes(LAN), 'the standby does not carry the prefix');
    t.is(standby.PrimaryRoutes, undefined);
    t.false(
      viewer.stream.messages.slice(mark).some((m: MapResponse) => (m.PeersRemoved ?? []).length > 0),
      'no peer removed: only routes changed',
    );

    // Both routers' filters admit alice into the LAN (either may become primary); alice's own filter does not name it.
    for (const gw of [gw1, gw2]) {
      await gw.stream.waitFor(() => dstIPs(latestFilter(gw.stream)).includes(LAN), 'the LAN in the router’s filter');
      const rule = latestFilter(gw.stream).find((r) => (r.DstPorts ?? []).some((d) => d.IP === LAN))!;
      t.true(
        rule.SrcIPs.some((s) => s.startsWith(viewer.self.Addresses[0].split('/')[0])),
        JSON.stringify(rule),
      );
    }
    t.false(dstIPs(latestFilter(viewer.stream)).includes(LAN));

    // And back: the route is taken away again, the peer stays.
    const mark2 = viewer.stream.messages.length;
    await setPolicy({ acls: [{ action: 'accept', src: ['alice@'], dst: ['ops@:*'] }] });
    await viewer.stream.waitFor(
      (m) => viewer.stream.messages.indexOf(m) >= mark2 && (m.PeersChanged ?? []).some((p) => p.ID === gw1.self.ID && !p.AllowedIPs!.includes(LAN)),
      'gw1 resent without the LAN',
    );
    t.is(latestPeer(viewer.stream, gw1.self.ID)!.PrimaryRoutes, undefined);
    for (const m of [gw1, gw2, viewer]) m.client.close();
  },
);

test.serial('an exit node on the wire: both default routes, never primary, and internet ranges in its filter only with autogroup:internet', async (t) => {
  await setPolicy({ acls: [{ action: 'accept', src: ['alice@'], dst: ['ops@:*', 'autogroup:internet:*'] }] });
  const exit = await member('ops', 'exit1', ['0.0.0.0/0', '::/0']);
  const viewer = await member('alice', 'laptop2');
  await hse('routes', 'approve', 'exit1', 'exit');
  const seen = await untilPeer(viewer.stream, exit.self.ID, (n) => n?.AllowedIPs?.includes('0.0.0.0/0') ?? false, 'the exit node offered');
  t.true(seen!.AllowedIPs!.includes('::/0'), 'both default routes, or the client does not offer it');
  t.is(seen!.PrimaryRoutes, undefined, 'exit routes are never primary');
  await exit.stream.waitFor(() => dstIPs(latestFilter(exit.stream)).some((ip) => ip.startsWith('11.0.0.0')), 'internet ranges in the exit node’s filter');
  t.false(dstIPs(latestFilter(exit.stream)).includes('*'), 'the internet ranges, not everything');

  await setPolicy({ acls: [{ action: 'accept', src: ['alice@'], dst: ['ops@:*'] }] });
  const gone = await untilPeer(viewer.stream, exit.self.ID, (n) => n !== undefined && !n.AllowedIPs!.includes('0.0.0.0/0'), 'the exit routes withdrawn');
  t.truthy(gone, 'the exit node is still a peer');
  await exit.stream.waitFor(() => !dstIPs(latestFilter(exit.stream)).some((ip) => ip.startsWith('11.0.0.0')), 'internet ranges gone from the filter');
  for (const m of [exit, viewer]) m.client.close();
});
