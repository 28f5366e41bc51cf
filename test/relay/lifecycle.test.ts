// The relay process over its life: its key (created once, owner-only, kept across restarts), keep-alives, a
// SIGTERM drain, a Redis outage (new clients refused, existing ones carry on) and public DERP mode.
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import dgram from 'node:dgram';
import test from 'ava';
import { Logger } from '../../shared/log.ts';
import { OpenAdmission } from '../../services/relay/src/admission.ts';
import { DerpClient } from '../../services/relay/src/derp-client.ts';
import { DerpServer } from '../../services/relay/src/derp-server.ts';
import { createRelayHttpServer } from '../../services/relay/src/http.ts';
import { newPrivateKey, publicKeyOf } from '../../services/relay/src/nacl-box.ts';
import { startRedis } from '../harness/redis.ts';
import { newNode, register, startRelay } from './harness.ts';

test('the relay key is created once, readable by its owner only, and kept across restarts', async (t) => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'hse-relay-key-'));
  try {
    const first = await startRelay(null, { dataDir });
    const file = path.join(dataDir, 'derp.key');
    t.is(fs.statSync(file).mode & 0o777, 0o600);
    const text = fs.readFileSync(file, 'utf8');
    const priv = Buffer.from(/privkey:([0-9a-f]{64})/.exec(text)![1], 'hex');
    const c1 = await first.connect();
    t.deepEqual(c1.serverKey, publicKeyOf(priv));
    c1.close();
    await first.stop();
    const second = await startRelay(null, { dataDir });
    t.is(fs.readFileSync(file, 'utf8'), text);
    const c2 = await second.connect();
    t.deepEqual(c2.serverKey, publicKeyOf(priv));
    t.notRegex(second.proc.output(), /generated the relay key/);
    c2.close();
    await second.stop();
  } finally {
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
});

test('a damaged key file stops the relay with a message saying what to do, and exit status 2', async (t) => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'hse-relay-key-'));
  fs.writeFileSync(path.join(dataDir, 'derp.key'), 'not a key', { mode: 0o600 });
  const { runProcess } = await import('../harness/process.ts');
  const p = runProcess('services/relay/src/main.ts', { HSE_DATA_DIR: dataDir, HSE_DERP_VERIFY_CLIENTS: 'off' });
  t.is(await p.exited(), 2);
  t.regex(p.output(), /delete it to have a new key generated/);
  fs.rmSync(dataDir, { recursive: true, force: true });
});

test('connected clients get keep-alives', async (t) => {
  // In-process with a short period: the behaviour is the same at 60 s, only slower to watch.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hse-relay-ka-'));
  const socketPath = path.join(dir, 'relay.sock');
  const privateKey = newPrivateKey();
  const derp = new DerpServer({
    privateKey,
    publicKey: publicKeyOf(privateKey),
    admission: new OpenAdmission(),
    log: new Logger('test', 'error'),
    queueDepth: 4,
    keepAliveMs: 20,
    keepAliveJitterMs: 10,
  });
  const server = createRelayHttpServer({ derp, log: new Logger('test', 'error') });
  await new Promise<void>((r) => server.listen(socketPath, r));
  const c = await DerpClient.connect({ socketPath });
  await c.waitFor('serverInfo');
  await c.waitFor('keepAlive');
  await c.waitFor('keepAlive');
  t.false(c.isClosed);
  await derp.drain();
  server.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

test('SIGTERM tells clients the relay is restarting, closes them, and exits 0', async (t) => {
  const relay = await startRelay(null);
  const c = await relay.connect();
  await c.waitFor('serverInfo');
  const exit = relay.proc.stop('SIGTERM');
  const msg = await c.waitFor('restarting');
  t.true(msg.reconnectInMs > 0 && msg.tryForMs > msg.reconnectInMs);
  await c.closed;
  t.is(await exit, 0);
  t.regex(relay.proc.output(), /shutting down/);
  await relay.stop();
});

test('with Redis down, new clients are refused (fail closed) and connected ones carry on', async (t) => {
  const redis = await startRedis();
  const relay = await startRelay(redis);
  try {
    const [na, nb] = [newNode(), newNode()];
    await register(redis.client(), na, 1);
    await register(redis.client(), nb, 2);
    const a = await relay.connect({ privateKey: na.privateKey });
    await a.waitFor('serverInfo');
    await redis.stop();
    const b = await relay.connect({ privateKey: nb.privateKey });
    await t.throwsAsync(b.recv(), { message: /closed/ });
    await relay.proc.waitFor(/relay client refused .*reason="store unavailable/);
    const data = Buffer.from('stillhere');
    a.ping(data.subarray(0, 8));
    t.deepEqual((await a.waitFor('pong')).data, data.subarray(0, 8));
    a.close();
  } finally {
    await relay.stop();
  }
});

test('public DERP mode: no relay, /derp says why, and the STUN port stays free', async (t) => {
  const relay = await startRelay(null, { env: { HSE_DERP_MODE: 'public' } });
  t.regex(relay.proc.output(), /listening .*derp=public/);
  const body = await new Promise<{ status: number; text: string }>((resolve, reject) => {
    http
      .get({ socketPath: relay.socket, path: '/derp/probe' }, (res) => {
        let text = '';
        res.on('data', (d: Buffer) => (text += d));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      })
      .on('error', reject);
  });
  t.is(body.status, 404);
  t.regex(body.text, /HSE_DERP_MODE=public/);
  const s = dgram.createSocket('udp4');
  await new Promise<void>((resolve, reject) => {
    s.once('error', reject);
    s.bind(relay.stunPort, '127.0.0.1', resolve);
  });
  s.close();
  t.false(fs.existsSync(path.join(relay.dataDir, 'derp.key')));
  await relay.stop();
});
