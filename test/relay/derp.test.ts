// The relay as a real process behind its Unix socket, a real redis-server holding the registered node keys, and our
// own DERP client: what a Tailscale client would notice — login, packets both ways, PeerGone, duplicate keys,
// malformed frames, refused keys, WebSocket, revocation by change events.
import net from 'node:net';
import test from 'ava';
import { encodeChange } from '../../shared/changes.ts';
import { K } from '../../shared/redis-keys.ts';
import type { DerpClient } from '../../services/relay/src/derp-client.ts';
import { encodeFrame, FrameType, KEY_LEN, PeerGoneReason } from '../../services/relay/src/frames.ts';
import { startRedis, type TestRedis } from '../harness/redis.ts';
import { newNode, register, startRelay, type TestNode, type TestRelay } from './harness.ts';

let redis: TestRedis;
let relay: TestRelay;
let nextId = 1;

test.before(async () => {
  redis = await startRedis();
  relay = await startRelay(redis);
});
test.after.always(async () => {
  await relay?.stop();
  await redis?.stop();
});

async function registered(): Promise<TestNode> {
  const n = newNode();
  await register(redis.client(), n, nextId++);
  return n;
}

/** Connects and waits for ServerInfo, i.e. until the relay has admitted the client. */
async function online(node: TestNode, websocket = false): Promise<DerpClient> {
  const c = await relay.connect({ privateKey: node.privateKey, websocket });
  await c.waitFor('serverInfo');
  return c;
}

/** A disco-looking packet: "TS💬" + 32-byte key + 24-byte nonce + payload. */
function discoPacket(): Buffer {
  return Buffer.concat([Buffer.from('TS💬', 'utf8'), Buffer.alloc(KEY_LEN + 24, 7), Buffer.from('ping')]);
}

test('handshake: 101 echoes the Upgrade token and names the protocol version; ServerInfo opens', async (t) => {
  const node = await registered();
  const c = await relay.connect({ privateKey: node.privateKey });
  t.is(c.upgradeHeaders.upgrade, 'DERP');
  t.is(c.upgradeHeaders['derp-version'], '2');
  t.is(c.upgradeHeaders['derp-public-key'], c.serverKey.toString('hex'));
  const info = await c.waitFor('serverInfo');
  t.is(info.version, 2);
  c.close();

  const lower = await relay.connect({ privateKey: node.privateKey, upgrade: 'derp' });
  t.is(lower.upgradeHeaders.upgrade, 'derp', 'the exact token is echoed, as Go reverse proxies insist');
  await lower.waitFor('serverInfo');
  lower.close();
});

test('a packet goes from one client to another and back', async (t) => {
  const [na, nb] = [await registered(), await registered()];
  const [a, b] = [await online(na), await online(nb)];
  a.notePreferred(true);
  a.send(nb.publicKey, Buffer.from('hello b'));
  const atB = await b.waitFor('packet');
  t.deepEqual(atB.src, na.publicKey);
  t.is(atB.data.toString(), 'hello b');
  b.send(na.publicKey, Buffer.from('hello a'));
  const atA = await a.waitFor('packet');
  t.deepEqual(atA.src, nb.publicKey);
  t.is(atA.data.toString(), 'hello a');
  a.close();
  b.close();
});

test('a client that received from a peer hears PeerGone when that peer leaves', async (t) => {
  const [na, nb] = [await registered(), await registered()];
  const [a, b] = [await online(na), await online(nb)];
  a.send(nb.publicKey, Buffer.from('x'));
  await b.waitFor('packet');
  a.close();
  const gone = await b.waitFor('peerGone');
  t.deepEqual(gone.peer, na.publicKey);
  t.is(gone.reason, PeerGoneReason.Disconnected);
  b.close();
});

test('a disco packet to a key nobody holds is answered with PeerGone(NotHere)', async (t) => {
  const na = await registered();
  const absent = newNode();
  const a = await online(na);
  a.send(absent.publicKey, discoPacket());
  const gone = await a.waitFor('peerGone');
  t.deepEqual(gone.peer, absent.publicKey);
  t.is(gone.reason, PeerGoneReason.NotHere);
  a.close();
});

test('ping is answered with a pong carrying the same bytes; unknown frame types are skipped', async (t) => {
  const a = await online(await registered());
  a.writeRaw(encodeFrame(0x7e, Buffer.from('a frame type from the future')));
  const data = Buffer.from('01234567');
  a.ping(data);
  const pong = await a.waitFor('pong');
  t.deepEqual(pong.data, data);
  t.false(a.isClosed);
  a.close();
});

test('duplicate key: the newer connection wins and the older one is told and closed', async (t) => {
  const [na, nb] = [await registered(), await registered()];
  const a = await online(na);
  const b1 = await online(nb);
  const b2 = await online(nb);
  const health = await b1.waitFor('health');
  t.regex(health.problem, /replaced/);
  await b1.closed;
  t.true(b1.isClosed);
  a.send(nb.publicKey, Buffer.from('to the newest'));
  t.is((await b2.waitFor('packet')).data.toString(), 'to the newest');
  // The displaced connection leaving does not make the key look gone.
  b2.send(na.publicKey, Buffer.from('still here'));
  t.is((await a.waitFor('packet')).data.toString(), 'still here');
  a.close();
  b2.close();
});

test('a malformed frame closes only the connection that sent it', async (t) => {
  const [na, nb, nc, nd] = [await registered(), await registered(), await registered(), await registered()];
  const [a, b, c, d] = [await online(na), await online(nb), await online(nc), await online(nd)];
  // SendPacket too short to hold a destination key.
  c.writeRaw(encodeFrame(FrameType.SendPacket, Buffer.alloc(10)));
  await c.closed;
  // A frame header announcing more than the packet limit.
  const huge = Buffer.alloc(5);
  huge[0] = FrameType.SendPacket;
  huge.writeUInt32BE(KEY_LEN + (64 << 10) + 1, 1);
  d.writeRaw(huge);
  await d.closed;
  a.send(nb.publicKey, Buffer.from('after the bad ones'));
  t.is((await b.waitFor('packet')).data.toString(), 'after the bad ones');
  b.send(na.publicKey, Buffer.from('both ways'));
  t.is((await a.waitFor('packet')).data.toString(), 'both ways');
  t.regex(relay.proc.output(), /malformed frame.*SendPacket of 10 bytes/);
  a.close();
  b.close();
});

test('a connection whose first frame is not ClientInfo is closed', async (t) => {
  const s = net.connect(relay.socket);
  s.write('GET /derp HTTP/1.1\r\nHost: relay\r\nUpgrade: DERP\r\nConnection: Upgrade\r\n\r\n');
  s.write(encodeFrame(FrameType.Ping, Buffer.alloc(8)));
  let got = '';
  s.on('data', (d: Buffer) => (got += d.toString('latin1')));
  await new Promise((r) => s.once('close', r));
  t.regex(got, /^HTTP\/1\.1 101 /);
});

test('an unregistered node key is refused: no ServerInfo, the connection closes, the refusal is logged', async (t) => {
  const stranger = newNode();
  const c = await relay.connect({ privateKey: stranger.privateKey, clientIp: '127.0.0.9' });
  const err = await t.throwsAsync(c.recv());
  t.regex(err!.message, /closed/);
  const hex = stranger.publicKey.toString('hex');
  const line = await relay.proc.waitFor(new RegExp(`relay client refused ip=127\\.0\\.0\\.9 key=nodekey:${hex.slice(0, 12)}\\S*… reason=.*not registered`));
  t.false(line[0].includes(hex), 'the full key is not logged');
  // And once in the activity log, for the console.
  const rows = (await redis.client().xrange(K.activity, '-', '+')) as [string, string[]][];
  const entry = rows.map(([, f]) => f).find((f) => f.includes('relay.refused') && f.includes(stranger.nodeKey));
  t.truthy(entry);
  t.true(entry!.includes('127.0.0.9'));
});

test('WebSocket variant: subprotocol derp, binary messages, interoperates with a plain DERP client', async (t) => {
  const [na, nb] = [await registered(), await registered()];
  const ws = await relay.connect({ privateKey: na.privateKey, websocket: true });
  t.is(ws.upgradeHeaders['sec-websocket-protocol'], 'derp');
  t.is(ws.upgradeHeaders.upgrade, 'websocket');
  t.is((await ws.waitFor('serverInfo')).version, 2);
  const plain = await online(nb);
  ws.send(nb.publicKey, Buffer.alloc(3000, 1));
  t.is((await plain.waitFor('packet')).data.length, 3000);
  plain.send(na.publicKey, Buffer.from('over websocket'));
  t.is((await ws.waitFor('packet')).data.toString(), 'over websocket');
  ws.close();
  plain.close();
});

test('deleting a node closes its relay connection; rotating a key closes the old key', async (t) => {
  const [deleted, rotated] = [await registered(), await registered()];
  const [c1, c2] = [await online(deleted), await online(rotated)];
  const pub = redis.client();
  await pub.publish(K.changes, encodeChange({ kind: 'node.delete', nodeId: 1, nodeKey: deleted.nodeKey }));
  await c1.closed;
  t.true(c1.isClosed);
  const fresh = newNode();
  await pub.publish(K.changes, encodeChange({ kind: 'node.keyrotate', nodeId: 2, oldNodeKey: rotated.nodeKey, nodeKey: fresh.nodeKey }));
  await c2.closed;
  t.true(c2.isClosed);
});

test('an Upgrade request without "Connection: Upgrade" is still taken over', async (t) => {
  const s = net.connect(relay.socket);
  s.write('GET /derp HTTP/1.1\r\nHost: relay\r\nUpgrade: DERP\r\n\r\n');
  const got = await new Promise<Buffer>((resolve) => {
    let buf = Buffer.alloc(0);
    s.on('data', (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      const end = buf.indexOf('\r\n\r\n');
      if (end !== -1 && buf.length >= end + 4 + 5 + 40) resolve(buf);
    });
  });
  const end = got.indexOf('\r\n\r\n');
  t.regex(got.subarray(0, end).toString(), /^HTTP\/1\.1 101 /);
  t.is(got[end + 4], FrameType.ServerKey);
  s.destroy();
});

test('a client that stops reading loses its oldest packets, not the newest, and never slows the sender', async (t) => {
  const [na, nb, nc] = [await registered(), await registered(), await registered()];
  const [a, slow, other] = [await online(na), await online(nb), await online(nc)];
  slow.pause();
  // Far more than the socket buffers and a 32-packet queue hold.
  const count = 3000;
  for (let i = 0; i < count; i++) a.send(nb.publicKey, Buffer.alloc(1200, i % 256));
  a.send(nb.publicKey, Buffer.from('newest'));
  // The sender is served meanwhile: its packets to a reading client go through.
  a.send(nc.publicKey, Buffer.from('not held up'));
  t.is((await other.waitFor('packet')).data.toString(), 'not held up');
  slow.resume();
  let received = 0;
  for (;;) {
    const m = await slow.waitFor('packet');
    received++;
    if (m.data.toString() === 'newest') break;
  }
  t.log(`received ${received}`);
  t.true(received < count, `received ${received} of ${count + 1}: some were dropped`);
  t.false(a.isClosed);
  a.close();
  slow.close();
  other.close();
});
