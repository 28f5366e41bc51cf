// The control protocol through the real router and coordination process with our own client: registration cases,
// machine-key binding, the map stream's deltas, lite updates, logout, key rotation and ephemeral clean-up.
import path from 'node:path';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import test from 'ava';
import { startImage, type Image } from '../harness/image.ts';
import { NODE, ROOT } from '../harness/process.ts';
import { CAP_VERSION, dialControl } from '../harness/noise-client.ts';
import { ControlClient, randomKey, serverKey } from '../harness/control-client.ts';

const exec = promisify(execFile);
let image: Image;
let pub: Buffer;
let reusable: string;

async function hse(...args: string[]): Promise<unknown> {
  const { stdout } = await exec(NODE, [path.join(ROOT, 'bin/hse.ts'), ...args, '--json'], { env: { ...image.env, PATH: process.env.PATH } });
  return JSON.parse(stdout);
}

async function key(...flags: string[]): Promise<string> {
  return ((await hse('keys', 'create', '--user', 'ops', ...flags)) as { key: string }).key;
}

const join = async () => {
  const c = await ControlClient.connect(image.port, pub);
  const r = await c.register({ Auth: { AuthKey: reusable } });
  if (!r.MachineAuthorized) throw new Error(`not authorized: ${JSON.stringify(r)}`);
  return c;
};

test.before(async () => {
  image = await startImage({ services: ['coordination'], env: { HSE_EPHEMERAL_TIMEOUT: '1' } });
  pub = await serverKey(image.url);
  await hse('users', 'create', 'ops');
  reusable = await key('--reusable');
});
test.after.always(async () => {
  await image?.stop();
});

test('GET /key answers the Noise key; a missing or garbage v is 400', async (t) => {
  const r = await fetch(`${image.url}/key?v=${CAP_VERSION}`);
  t.is(r.status, 200);
  t.regex(((await r.json()) as { publicKey: string }).publicKey, /^mkey:[0-9a-f]{64}$/);
  t.is((await fetch(`${image.url}/key`)).status, 400);
  t.is((await fetch(`${image.url}/key?v=abc`)).status, 400);
});

test('a client below capability version 113 gets a Noise error frame saying so', async (t) => {
  const r = await dialControl({ port: image.port, serverPublic: pub, capVersion: 100 });
  t.is(r.kind, 'error-frame');
  t.regex((r as { message: string }).message, /too old/);
});

test('a single-use key registers one device; the second is told why', async (t) => {
  const once = await key();
  const a = await ControlClient.connect(image.port, pub);
  const b = await ControlClient.connect(image.port, pub);
  t.true((await a.register({ Auth: { AuthKey: once } })).MachineAuthorized);
  t.regex((await b.register({ Auth: { AuthKey: once } })).Error ?? '', /already used/);
  t.regex((await b.register({ Auth: { AuthKey: 'hse-auth-000000000000-nope' } })).Error ?? '', /invalid pre-auth key/);
  a.close();
  b.close();
});

test('a node key is bound to its machine key: another machine cannot use it', async (t) => {
  const a = await join();
  const thief = await ControlClient.connect(image.port, pub);
  thief.nodeKey = a.nodeKey;
  t.regex((await thief.register()).Error ?? '', /different machine/);
  const m = thief.stream();
  await m.waitFor(() => false, 'nothing', 1000).catch(() => {});
  t.is(m.status, 403);
  a.close();
  thief.close();
});

test('map stream: full map first, then joins, endpoint patches, offline and removal as deltas', async (t) => {
  const a = await join();
  const sa = a.stream();
  const first = await sa.waitFor((m) => m.Node !== undefined, 'Node');
  t.true(first.Node!.MachineAuthorized);
  t.truthy(first.DERPMap);
  t.true(Array.isArray(first.Peers));

  const b = await join();
  const bId = (await b.register()).User!.ID; // still authorized on a repeat call
  t.truthy(bId);
  // a learns of b once it is registered, before it has a stream (offline, no endpoints yet).
  await sa.waitFor((m) => (m.PeersChanged ?? []).some((p) => p.Key === b.nodeKey), 'b registered');
  const sb = b.stream({ Endpoints: ['127.0.0.1:41641'] });
  const bNode = (await sb.waitFor((m) => m.Node !== undefined, 'Node')).Node!;
  await sa.waitFor((m) => (m.PeersChangedPatch ?? []).some((p) => p.NodeID === bNode.ID && p.Online === true), 'b online');
  // The endpoints b sent with its stream reach a: b was offline when they arrived, so they come with its "online".
  await sa.waitFor(
    (m) =>
      (m.PeersChanged ?? []).some((p) => p.ID === bNode.ID && (p.Endpoints ?? []).includes('127.0.0.1:41641')) ||
      (m.PeersChangedPatch ?? []).some((p) => p.NodeID === bNode.ID && (p.Endpoints ?? []).includes('127.0.0.1:41641')),
    "b's endpoints",
  );

  // A lite update (no stream) with new endpoints: 200, and a patch reaches a.
  const lite = await b.post('/machine/map', {
    Version: CAP_VERSION,
    NodeKey: b.nodeKey,
    DiscoKey: b.discoKey,
    OmitPeers: true,
    Stream: false,
    Endpoints: ['127.0.0.1:5555'],
  });
  t.is(lite.status, 200);
  t.is(lite.body.length, 0);
  await sa.waitFor((m) => (m.PeersChangedPatch ?? []).some((p) => p.NodeID === bNode.ID && (p.Endpoints ?? []).includes('127.0.0.1:5555')), 'endpoint patch');

  sb.close();
  await sa.waitFor((m) => (m.PeersChangedPatch ?? []).some((p) => p.NodeID === bNode.ID && p.Online === false), 'b offline');

  await hse('nodes', 'delete', String(bNode.ID));
  await sa.waitFor((m) => (m.PeersRemoved ?? []).includes(bNode.ID), 'b removed');
  a.close();
  b.close();
});

test('renaming a node reaches its own stream and its peers', async (t) => {
  const a = await join();
  const b = await join();
  const sa = a.stream();
  const sb = b.stream();
  const bNode = (await sb.waitFor((m) => m.Node !== undefined, 'Node')).Node!;
  await sa.waitFor((m) => m.Node !== undefined, 'Node');
  await hse('nodes', 'rename', String(bNode.ID), 'renamed-b');
  await sb.waitFor((m) => m.Node?.Name === 'renamed-b.hse.internal.', 'own new name');
  await sa.waitFor((m) => (m.PeersChanged ?? []).some((p) => p.Name === 'renamed-b.hse.internal.'), 'peer new name');
  t.pass();
  a.close();
  b.close();
});

test('key rotation keeps the node; logout expires it', async (t) => {
  const a = await join();
  const before = (await hse('nodes', 'list')) as { id: number; nodeKey: string; ipv4: string }[];
  const mine = before.find((n) => n.nodeKey === a.nodeKey)!;
  const old = a.nodeKey;
  a.nodeKey = randomKey('nodekey');
  const rotated = await a.register({ OldNodeKey: old });
  t.true(rotated.MachineAuthorized);
  const after = (await hse('nodes', 'list')) as { id: number; nodeKey: string; ipv4: string }[];
  const same = after.find((n) => n.id === mine.id)!;
  t.is(same.nodeKey, a.nodeKey);
  t.is(same.ipv4, mine.ipv4);

  const out = await a.register({ Expiry: '1970-01-01T00:02:03Z' });
  t.true(out.NodeKeyExpired);
  const expired = (await hse('nodes', 'list')) as { id: number; expired: boolean }[];
  t.true(expired.find((n) => n.id === mine.id)!.expired);
  a.close();
});

test('an ephemeral node is removed after it disconnects', async (t) => {
  const eph = await key('--ephemeral');
  const a = await ControlClient.connect(image.port, pub);
  t.true((await a.register({ Auth: { AuthKey: eph } })).MachineAuthorized);
  const s = a.stream();
  const id = (await s.waitFor((m) => m.Node !== undefined, 'Node')).Node!.ID;
  s.close();
  a.close();
  const deadline = Date.now() + 15_000;
  let present = true;
  while (present && Date.now() < deadline) {
    present = ((await hse('nodes', 'list')) as { id: number }[]).some((n) => n.id === id);
    if (present) await new Promise((r) => setTimeout(r, 250));
  }
  t.false(present);
});

test('a malformed register body gets a 4xx and the service keeps serving', async (t) => {
  const a = await ControlClient.connect(image.port, pub);
  const bad = await a.post('/machine/register', 'not an object');
  t.true(bad.status >= 400 && bad.status < 500);
  const worse = await a.post('/machine/register', { Version: CAP_VERSION, NodeKey: 'nodekey:zz' });
  t.is(worse.status, 400);
  t.true((await join()).nodeKey.startsWith('nodekey:'));
  a.close();
});
