// DNS settings and key expiry at the protocol level, through the router to the real coordination process, with our
// own control client (exact messages, cases the official client reaches only by accident): the DNSConfig delta every
// open stream gets, a refusal that sends nothing, the 501 answers of endpoints this server does not offer, and the
// key lifetime a registration gets.
import test from 'ava';
import { AdminClient, AdminError } from '../../shared/admin-client.ts';
import { parseConfig } from '../../shared/config.ts';
import type { NodeView } from '../../shared/model.ts';
import { adminSocket } from '../../shared/paths.ts';
import type { DNSConfig, MapResponse } from '../../services/coordination/src/tailcfg/tailcfg.ts';
import { startImage, type Image } from '../harness/image.ts';
import { ControlClient, randomKey, serverKey, type MapStream } from '../harness/control-client.ts';

let image: Image;
let pub: Buffer;
let api: AdminClient;
let reusable: string;
const cli = { actor: 'test', ip: '' };
const clients: ControlClient[] = [];
const HOUR = 3_600_000;

test.before(async () => {
  image = await startImage({ services: ['coordination'], env: { HSE_NODE_KEY_EXPIRY: '2h' } });
  pub = await serverKey(image.url);
  api = new AdminClient(adminSocket(parseConfig(image.env)));
  await api.createUser(cli, 'ops');
  reusable = (await api.createPreAuthKey(cli, { user: 'ops', reusable: true })).key;
});
test.after.always(async () => {
  for (const c of clients) c.close();
  await image?.stop();
});

async function client(): Promise<ControlClient> {
  const c = await ControlClient.connect(image.port, pub);
  clients.push(c);
  return c;
}

async function joined(extra: Record<string, unknown> = {}): Promise<{ c: ControlClient; node: NodeView }> {
  const c = await client();
  const r = await c.register({ Auth: { AuthKey: reusable }, ...extra });
  if (!r.MachineAuthorized) throw new Error(`not authorized: ${JSON.stringify(r)}`);
  const node = (await api.listNodes(cli)).find((n) => n.nodeKey === c.nodeKey)!;
  return { c, node };
}

const dnsMessages = (s: MapStream): DNSConfig[] => s.messages.filter((m: MapResponse) => m.DNSConfig).map((m) => m.DNSConfig!);

test.serial('every open map stream gets the new DNSConfig when the settings change, and new streams start with it', async (t) => {
  const a = (await joined()).c.stream();
  const b = (await joined()).c.stream();
  await a.waitFor((m) => m.Node !== undefined, 'first map');
  await b.waitFor((m) => m.Node !== undefined, 'first map');
  t.deepEqual(a.messages[0].DNSConfig, { Routes: { 'hse.internal.': [] }, Domains: ['hse.internal'], Proxied: true });

  const started = Date.now();
  await api.setDns(cli, { nameservers: ['10.0.0.53'], overrideLocalDNS: true, extraRecords: [{ name: 'grafana.hse.internal', value: '100.64.0.7' }] });
  const expected: DNSConfig = {
    Resolvers: [{ Addr: '10.0.0.53' }],
    Routes: { 'hse.internal.': [] },
    Domains: ['hse.internal'],
    Proxied: true,
    ExtraRecords: [{ Name: 'grafana.hse.internal', Type: 'A', Value: '100.64.0.7' }],
  };
  for (const s of [a, b]) {
    const m = await s.waitFor((x) => x.DNSConfig !== undefined && x.Node === undefined, 'a DNSConfig delta');
    t.deepEqual(m.DNSConfig, expected);
    t.is(m.Peers, undefined, 'a delta, not a full map');
  }
  t.log(`both streams had the delta ${Date.now() - started} ms after the admin API answered`);

  const fresh = (await joined()).c.stream();
  t.deepEqual((await fresh.waitFor((m) => m.Node !== undefined, 'first map')).DNSConfig, expected);
  t.deepEqual(await api.getDns(cli), {
    magicDNS: true,
    overrideLocalDNS: true,
    nameservers: ['10.0.0.53'],
    splitDNS: {},
    searchDomains: [],
    extraRecords: [{ name: 'grafana.hse.internal', type: 'A', value: '100.64.0.7' }],
  });

  // A refused change is not stored and sends nothing: the next DNSConfig a stream sees is the next accepted one.
  const seen = dnsMessages(a).length;
  const from = a.messages.length;
  const later = (pred: (m: MapResponse) => boolean) => (m: MapResponse) => a.messages.indexOf(m) >= from && pred(m);
  const refused = await api.setDns(cli, { splitDNS: { 'hse.internal': ['10.0.0.1'] } }).catch((e: unknown) => e);
  t.true(refused instanceof AdminError && refused.status === 400);
  t.regex((refused as Error).message, /^splitDNS: "hse\.internal" is the tailnet's own domain/);
  t.is((await api.getDns(cli)).nameservers[0], '10.0.0.53', 'the previous settings stay');
  await api.setDns(cli, { magicDNS: false });
  await a.waitFor(
    later((m) => m.DNSConfig?.Proxied === false),
    'MagicDNS off',
  );
  t.deepEqual(dnsMessages(a).slice(seen), [{ Proxied: false }]);

  // Saving the same settings again is no change and sends nothing (seen from the next real change).
  await api.setDns(cli, { magicDNS: false });
  await api.setDns(cli, {});
  await a.waitFor(
    later((m) => m.DNSConfig?.Proxied === true),
    'MagicDNS back on',
  );
  t.is(dnsMessages(a).length, seen + 2);
  for (const s of [a, b, fresh]) s.close();
});

test.serial('endpoints this server does not offer answer 501 with what is not available, never a retry-later 5xx', async (t) => {
  const { c } = await joined();
  const cases: [string, RegExp][] = [
    ['/machine/feature/query', /HTTPS certificates, Serve over HTTPS and Funnel are not available on this server \(hse\)/],
    ['/machine/set-dns', /DNS records for HTTPS certificates are not available on this server/],
    ['/machine/id-token', /ID tokens .* are not available on this server/],
    ['/machine/audit-log', /audit logs of SSH sessions are not available on this server/],
  ];
  for (const [path, message] of cases) {
    const r = await c.post(path, { Version: 142, NodeKey: c.nodeKey });
    t.is(r.status, 501, path);
    t.regex(r.body.toString(), message, path);
  }
  t.is((await c.post('/machine/no-such-thing', {})).status, 404);
});

test.serial('a registration gets the tailnet key lifetime; a sooner request wins, a later one is capped', async (t) => {
  const expiryOf = async (extra: Record<string, unknown>) => {
    const before = Date.now();
    const { node } = await joined(extra);
    return { at: Date.parse(node.expiry!), before };
  };
  const plain = await expiryOf({});
  t.true(plain.at >= plain.before + 2 * HOUR - 5000 && plain.at <= Date.now() + 2 * HOUR, 'HSE_NODE_KEY_EXPIRY from now');
  const soon = new Date(Date.now() + HOUR / 2).toISOString();
  t.is(new Date((await expiryOf({ Expiry: soon })).at).toISOString(), soon);
  const late = await expiryOf({ Expiry: new Date(Date.now() + 24 * HOUR).toISOString() });
  t.true(late.at <= Date.now() + 2 * HOUR, 'capped');

  // A logged-in node asking for an earlier expiry (the client's SetExpirySooner) gets it; a later one it does not.
  const { c, node } = await joined();
  const sooner = new Date(Date.now() + 10 * 60_000).toISOString();
  t.true((await c.register({ Expiry: sooner })).MachineAuthorized);
  t.is((await api.getNode(cli, node.id)).expiry, sooner);
  await c.register({ Expiry: new Date(Date.now() + HOUR).toISOString() });
  t.is((await api.getNode(cli, node.id)).expiry, sooner);
});

test.serial('an expired machine must log in again: its old key proves nothing, a pre-auth key brings back the same machine', async (t) => {
  const { c, node } = await joined();
  await api.expireNode(cli, node.id);
  t.true((await api.getNode(cli, node.id)).expired);
  // The client's own check with the expired key: told it expired, so it regenerates its key.
  t.like(await c.register({}), { NodeKeyExpired: true, MachineAuthorized: false });
  const old = c.nodeKey;
  c.nodeKey = randomKey('nodekey');
  const relogin = await c.register({ OldNodeKey: old });
  t.regex(relogin.AuthURL ?? '', /\/console\/register\//, 'an interactive login, not a silent rotation');
  t.falsy(relogin.MachineAuthorized);
  const back = await c.register({ OldNodeKey: old, Auth: { AuthKey: reusable } });
  t.true(back.MachineAuthorized);
  const after = await api.getNode(cli, node.id);
  t.is(after.nodeKey, c.nodeKey);
  t.is(after.ipv4, node.ipv4);
  t.false(after.expired);
  t.is((await api.listNodes(cli)).filter((n) => n.machineKey === node.machineKey).length, 1);
});

test.serial('disabled key expiry: the map sends no KeyExpiry, a re-login keeps it off, enabling starts a fresh lifetime', async (t) => {
  const { c, node } = await joined();
  const s = c.stream();
  await s.waitFor((m) => m.Node?.KeyExpiry !== undefined, 'first map with a key expiry');
  const off = await api.setKeyExpiryDisabled(cli, node.id, true);
  t.true(off.keyExpiryDisabled);
  t.is(off.expiry, null);
  const self = await s.waitFor((m) => m.Node !== undefined && m.Node.KeyExpiry === undefined, 'the self node without expiry');
  t.false(self.Node!.Expired ?? false);
  t.true((await c.register({ Auth: { AuthKey: reusable } })).MachineAuthorized);
  t.is((await api.getNode(cli, node.id)).expiry, null, 'still never after a re-login');
  const on = await api.setKeyExpiryDisabled(cli, node.id, false);
  t.false(on.keyExpiryDisabled);
  t.true(Date.parse(on.expiry!) > Date.now() + HOUR);
  const bad = await api.request('POST', `/v1/nodes/${node.id}/key-expiry`, cli, { disabled: 'yes' }).catch((e: unknown) => e);
  t.regex((bad as Error).message, /"disabled" must be true or false/);
  s.close();
});
