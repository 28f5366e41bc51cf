// Security review, the parts that live at process and protocol boundaries, each shown on the running image:
//   - internal sockets cannot be reached by another user (run dir 700, sockets 600), tried for real as `nobody`;
//   - secrets never reach a log line or the activity log (full pre-auth keys, passwords, node, machine and server
//     private keys, session ids, CSRF tokens, the cookie key), with every process at debug level; keys are shown by
//     their prefix; Redis holds pre-auth keys and passwords only hashed;
//   - a node key is bound to the machine key that registered it;
//   - single-use, expired, expired-by-operator and forged pre-auth keys are refused and create nothing;
//   - the relay admits registered node keys only, and drops a node the moment it is deleted.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import test from 'ava';
import type { Redis } from 'ioredis';
import { AdminClient } from '../../shared/admin-client.ts';
import { K } from '../../shared/redis-keys.ts';
import { DerpClient } from '../../services/relay/src/derp-client.ts';
import { newPrivateKey } from '../../services/relay/src/nacl-box.ts';
import { rawPrivateKey } from '../../services/coordination/src/noise/x25519.ts';
import { Client } from '../harness/console-client.ts';
import { serverKey } from '../harness/control-client.ts';
import { CAP_VERSION } from '../harness/noise-client.ts';
import { startImage, type Image } from '../harness/image.ts';
import { NODE } from '../harness/process.ts';
import { waitUntil } from './lib/fleet.ts';
import { SimNode } from './lib/sim-node.ts';
import { CONSOLE_PASSWORD } from './lib/supervised-image.ts';

const who = { actor: 'reliability-test', ip: '' };
let image: Image;
let admin: AdminClient;
let redis: Redis;
let serverPublic: Buffer;
let reusable: string;
const nodes: SimNode[] = [];

test.before(async () => {
  image = await startImage({ env: { HSE_CONSOLE_PASSWORD: CONSOLE_PASSWORD, HSE_LOG_LEVEL: 'debug' } });
  admin = new AdminClient(path.join(image.runDir, 'coordination-admin.sock'));
  redis = image.redis!.client();
  serverPublic = await serverKey(image.url);
  await admin.createUser(who, 'sec');
  reusable = (await admin.createPreAuthKey(who, { user: 'sec', reusable: true, expiresInSeconds: 3600 })).key;
});

test.after.always(async () => {
  for (const n of nodes) await n.stop();
  await image?.stop();
});

function node(hostname: string): SimNode {
  const n = new SimNode({ port: image.port, serverPublic, hostname });
  nodes.push(n);
  return n;
}

function registerBody(n: SimNode, authKey?: string, extra: Record<string, unknown> = {}) {
  return {
    Version: CAP_VERSION,
    NodeKey: n.nodeKey,
    Hostinfo: { Hostname: n.opts.hostname, OS: 'linux' },
    ...(authKey ? { Auth: { AuthKey: authKey } } : {}),
    ...extra,
  };
}

/** Tries to connect to a Unix socket as the unprivileged user `nobody`; resolves with "connected" or the error code. */
function connectAsNobody(socket: string, asOwner = false): Promise<string> {
  const code = `require('net').connect(${JSON.stringify(socket)}).on('connect',()=>{console.log('connected');process.exit(0)}).on('error',(e)=>{console.log(e.code);process.exit(0)})`;
  return new Promise((resolve, reject) => {
    const p = spawn(NODE, ['-e', code], { ...(asOwner ? {} : { uid: 65534, gid: 65534 }), stdio: ['ignore', 'pipe', 'pipe'], env: { PATH: process.env.PATH } });
    let out = '';
    p.stdout.on('data', (d: Buffer) => (out += d.toString()));
    p.stderr.on('data', (d: Buffer) => (out += d.toString()));
    p.on('error', reject);
    p.on('exit', () => resolve(out.trim()));
  });
}

test.serial('internal sockets: run dir 700, sockets 600, and another user cannot connect even when the directories are opened', async (t) => {
  t.is(fs.statSync(image.dataDir).mode & 0o777, 0o700, 'data dir');
  t.is(fs.statSync(image.runDir).mode & 0o777, 0o700, 'run dir');
  const sockets = fs.readdirSync(image.runDir).filter((f) => f.endsWith('.sock'));
  t.deepEqual(sockets.sort(), ['console.sock', 'coordination-admin.sock', 'coordination.sock', 'relay.sock']);
  for (const s of sockets) t.is(fs.statSync(path.join(image.runDir, s)).mode & 0o777, 0o600, s);
  for (const f of fs.readdirSync(image.dataDir).filter((x) => x.endsWith('.key'))) t.is(fs.statSync(path.join(image.dataDir, f)).mode & 0o777, 0o600, f);

  // First wall: the directory. Second wall: the socket itself, tried with the directories made traversable.
  for (const s of sockets) t.is(await connectAsNobody(path.join(image.runDir, s)), 'EACCES', `${s} through the 700 run dir`);
  fs.chmodSync(image.dataDir, 0o711);
  fs.chmodSync(image.runDir, 0o711);
  try {
    for (const s of sockets) t.is(await connectAsNobody(path.join(image.runDir, s)), 'EACCES', `${s} itself`);
  } finally {
    fs.chmodSync(image.runDir, 0o700);
    fs.chmodSync(image.dataDir, 0o700);
  }
  // The control: the same script as the owner connects, so EACCES above is the permission and nothing else.
  for (const s of sockets) t.is(await connectAsNobody(path.join(image.runDir, s), true), 'connected', `${s} as its owner`);
});

test.serial('a node key is bound to the machine that registered it', async (t) => {
  const owner = node('owner');
  await owner.register(reusable);
  const thief = node('thief');
  // Same node key, another machine, even with a valid pre-auth key.
  const r = await thief.post('/machine/register', { ...registerBody(thief, reusable), NodeKey: owner.nodeKey });
  t.is(r.status, 200);
  t.regex(JSON.parse(r.body).Error, /registered to a different machine/);
  // Map requests with the stolen key.
  const m = await thief.post('/machine/map', { Version: CAP_VERSION, NodeKey: owner.nodeKey, Stream: false, OmitPeers: true });
  t.is(m.status, 403);
  // "Rotating" away from the owner's key from another machine does not move the owner's node.
  const rot = await thief.post('/machine/register', { ...registerBody(thief), OldNodeKey: owner.nodeKey });
  t.notRegex(rot.body, /MachineAuthorized":true/);
  const all = await admin.listNodes(who);
  t.is(all.filter((n) => n.hostname === 'owner' && n.nodeKey === owner.nodeKey).length, 1, 'the owner keeps its node');
  t.false(
    all.some((n) => n.nodeKey === thief.nodeKey),
    'the thief got no node',
  );
});

test.serial('single-use, expired, operator-expired and forged pre-auth keys are refused and create nothing', async (t) => {
  const before = (await admin.listNodes(who)).length;
  const once = (await admin.createPreAuthKey(who, { user: 'sec', expiresInSeconds: 3600 })).key;
  await node('once-a').register(once);
  const second = node('once-b');
  t.regex(JSON.parse((await second.post('/machine/register', registerBody(second, once))).body).Error, /already used/);

  // Keys live at least a minute; let one run out by moving its expiry into the past, as time would.
  const short = await admin.createPreAuthKey(who, { user: 'sec', reusable: true, expiresInSeconds: 60 });
  const rec = JSON.parse((await redis.hget(K.preAuthKeys, String(short.id)))!) as { expiration: string };
  await redis.hset(K.preAuthKeys, String(short.id), JSON.stringify({ ...rec, expiration: new Date(Date.now() - 1000).toISOString() }));
  const late = node('late');
  t.regex(JSON.parse((await late.post('/machine/register', registerBody(late, short.key))).body).Error, /expired/);

  const revoked = await admin.createPreAuthKey(who, { user: 'sec', reusable: true, expiresInSeconds: 3600 });
  await admin.expirePreAuthKey(who, revoked.id);
  const r3 = node('revoked');
  t.regex(JSON.parse((await r3.post('/machine/register', registerBody(r3, revoked.key))).body).Error, /expired/);

  // A real key's visible prefix with a made-up secret, and a key of the right shape that was never issued.
  const forged = `${reusable.slice(0, 'hse-auth-'.length + 12)}-${'A'.repeat(32)}`;
  const f1 = node('forged');
  t.regex(JSON.parse((await f1.post('/machine/register', registerBody(f1, forged))).body).Error, /invalid pre-auth key/);
  const f2 = node('invented');
  t.regex(JSON.parse((await f2.post('/machine/register', registerBody(f2, `hse-auth-000000000000-${'B'.repeat(32)}`))).body).Error, /invalid pre-auth key/);

  t.is((await admin.listNodes(who)).length, before + 1, 'only the first use of the single-use key made a node');
});

test.serial('relay admission: registered keys only, refusals logged with the address, a deleted node is dropped at once', async (t) => {
  const member = node('member');
  await member.register(reusable);
  const c = await DerpClient.connect({ host: '127.0.0.1', port: image.port, privateKey: member.nodePrivate });
  await c.waitFor('serverInfo');

  const stranger = await DerpClient.connect({ host: '127.0.0.1', port: image.port, privateKey: newPrivateKey() });
  await t.throwsAsync(stranger.waitFor('serverInfo', () => true, 10_000));
  await waitUntil(
    () => /relay client refused ip=127\.0\.0\.1 key=nodekey:[0-9a-f]{12}… reason="node key is not registered/.test(image.procs.relay!.output()),
    () => 'the refusal in the relay log',
    10_000,
  );

  const id = (await admin.listNodes(who)).find((n) => n.nodeKey === member.nodeKey)!.id;
  await admin.deleteNode(who, id);
  await c.closed;
  const again = await DerpClient.connect({ host: '127.0.0.1', port: image.port, privateKey: member.nodePrivate });
  await t.throwsAsync(again.waitFor('serverInfo', () => true, 10_000));
  t.pass();
});

test.serial('secrets never reach the logs or the activity log; keys appear by prefix; Redis keeps keys and passwords hashed', async (t) => {
  const secrets = new Map<string, string>();
  // Pre-auth keys of every kind, used for real.
  const kinds = { single: {}, reusable: { reusable: true }, ephemeral: { ephemeral: true } } as const;
  for (const [kind, opts] of Object.entries(kinds)) {
    const k = (await admin.createPreAuthKey(who, { user: 'sec', expiresInSeconds: 3600, ...opts })).key;
    secrets.set(`${kind} pre-auth key`, k);
    secrets.set(`${kind} pre-auth key secret part`, k.slice('hse-auth-'.length + 13));
    const n = node(`logs-${kind}`);
    await n.register(k);
    n.start();
    await waitUntil(
      () => n.streaming,
      () => 'stream',
      10_000,
    );
    secrets.set(`${kind} node private key`, n.nodePrivate.toString('hex'));
    secrets.set(`${kind} node private key (base64)`, n.nodePrivate.toString('base64'));
    const machine = rawPrivateKey(n.machine.privateKey);
    secrets.set(`${kind} machine private key`, machine.toString('hex'));
    secrets.set(`${kind} machine private key (base64)`, machine.toString('base64'));
    const d = await DerpClient.connect({ host: '127.0.0.1', port: image.port, privateKey: n.nodePrivate });
    await d.waitFor('serverInfo');
    d.close();
  }
  secrets.set('reusable key of the earlier tests', reusable);
  // A wrong key someone pasted: not valid, but it might be a real key of another server.
  const typo = node('typo');
  const typoKey = `hse-auth-0123456789ab-${'Q'.repeat(32)}`;
  await typo.post('/machine/register', registerBody(typo, typoKey));
  secrets.set('rejected pre-auth key', typoKey);

  // Console: a failed and a successful sign-in, a session with its CSRF token, sign-out.
  const wrong = 'not the password but a close guess 91c2';
  const b = new Client(image.url);
  t.is((await b.signIn('admin', wrong)).status, 401);
  t.is((await b.signIn('admin', CONSOLE_PASSWORD)).status, 303);
  secrets.set('console password', CONSOLE_PASSWORD);
  secrets.set('wrong password attempt', wrong);
  secrets.set('session id', b.jar.get('hse_session')!);
  secrets.set('session CSRF token', await b.sessionCsrf());
  const csrf = await b.sessionCsrf();
  t.is((await b.request('/console/logout', { form: { csrf } })).status, 303);
  secrets.set('cookie signing key', (await redis.hget(K.consoleSecrets, 'cookie'))!);

  // Server private keys from their files.
  for (const f of fs.readdirSync(image.dataDir).filter((x) => x.endsWith('.key'))) {
    for (const m of fs.readFileSync(path.join(image.dataDir, f), 'utf8').matchAll(/privkey:([0-9a-f]{64})/g)) secrets.set(`server key ${f}`, m[1]);
  }
  t.true([...secrets.keys()].some((k) => k.startsWith('server key noise')) && [...secrets.keys()].some((k) => k.startsWith('server key derp')));

  await sleep(500);
  const logs = image.logs();
  const activity = JSON.stringify(await redis.xrange(K.activity, '-', '+'));
  for (const [what, value] of secrets) {
    t.false(logs.includes(value), `${what} appears in a process log`);
    t.false(activity.includes(value), `${what} appears in the activity log`);
  }
  // Keys are identified by their visible prefix instead.
  for (const kind of Object.keys(kinds)) {
    const prefix = secrets.get(`${kind} pre-auth key`)!.slice(0, 'hse-auth-'.length + 12);
    t.true(logs.includes(`key=${prefix}`), `${kind} key shown by its prefix`);
  }

  // At rest: no pre-auth key or password in clear anywhere in Redis (session ids are key names there by design).
  const dump: string[] = [];
  for (const key of await redis.keys('*')) {
    const type = await redis.type(key);
    if (type === 'string') dump.push(String(await redis.get(key)));
    else if (type === 'hash') dump.push(JSON.stringify(await redis.hgetall(key)));
    else if (type === 'stream') dump.push(JSON.stringify(await redis.xrange(key, '-', '+')));
    else if (type === 'zset') dump.push(JSON.stringify(await redis.zrange(key, 0, -1)));
  }
  const atRest = dump.join('\n');
  for (const what of [
    'single pre-auth key secret part',
    'reusable pre-auth key secret part',
    'ephemeral pre-auth key secret part',
    'console password',
    'wrong password attempt',
  ]) {
    t.false(atRest.includes(secrets.get(what)!), `${what} stored in clear`);
  }
});
