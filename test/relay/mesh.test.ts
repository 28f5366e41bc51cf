// The relay mesh as nodes notice it: relays of one region with real mesh links between them (in this process, over
// loopback TCP), our DERP client as the nodes. Packets cross the mesh both ways; PeerGone reaches a receiver when its
// sender left the region, and not when the sender only moved to another relay; a relay that dies or stops answering
// takes its clients out of reach (receivers and senders hear PeerGone) until it is back; and the mesh frames are
// refused to anyone without the mesh key.
import crypto from 'node:crypto';
import test from 'ava';
import { KEY_LEN, PeerGoneReason, PeerPresentFlags } from '../../services/relay/src/frames.ts';
import { freezableTcp, MESH_KEY, meshedPair, nextReal, startMeshRelay, until } from './mesh-harness.ts';

/** A disco-looking packet: "TS💬" + 32-byte key + 24-byte nonce + payload. */
function discoPacket(): Buffer {
  return Buffer.concat([Buffer.from('TS💬', 'utf8'), Buffer.alloc(KEY_LEN + 24, 7), Buffer.from('disco')]);
}

test('clients homed on different relays reach each other both ways through the mesh', async (t) => {
  const { A, B, a, b } = await meshedPair();
  try {
    a.send(b.publicKey, Buffer.from('from a'));
    const atB = await b.waitFor('packet');
    t.deepEqual(atB.src, a.publicKey, 'the receiver sees the original sender, not the relay');
    t.is(atB.data.toString(), 'from a');
    b.send(a.publicKey, Buffer.from('from b'));
    const atA = await a.waitFor('packet');
    t.deepEqual(atA.src, b.publicKey);
    t.is(atA.data.toString(), 'from b');
    t.is(A.derp.stats.packetsForwardedOut, 1);
    t.is(B.derp.stats.packetsForwardedIn, 1);
    t.is(A.derp.stats.meshPeers, 1, 'B dialled A');
  } finally {
    await A.kill();
    await B.kill();
  }
});

test('a receiver hears PeerGone when its sender on another relay disconnects', async (t) => {
  const { A, B, a, b } = await meshedPair();
  try {
    a.send(b.publicKey, Buffer.from('x'));
    await b.waitFor('packet');
    a.close();
    const gone = await b.waitFor('peerGone');
    t.deepEqual(gone.peer, a.publicKey);
    t.is(gone.reason, PeerGoneReason.Disconnected);
  } finally {
    await A.kill();
    await B.kill();
  }
});

test('a sender that moves between relays, either way, is never reported gone', async (t) => {
  const { A, B, a, b } = await meshedPair();
  try {
    a.send(b.publicKey, Buffer.from('via the mesh'));
    await b.waitFor('packet');
    // The same node connects to B, then its connection to A closes (a client changing its home relay).
    const a2 = await B.client(a.privateKey);
    a.close();
    const linkToA = B.links[0];
    await until('B to hear that the node left A', () => linkToA.peerClients === 0);
    a2.send(b.publicKey, Buffer.from('now local'));
    const m = await nextReal(b);
    t.is(m.type, 'packet', `b must get the packet, not ${m.type}`);
    t.is(m.type === 'packet' && m.data.toString(), 'now local');

    // And back: the node connects to A again, then its connection to B closes.
    const a3 = await A.client(a.privateKey);
    await until('B to hear that the node is on A again', () => linkToA.peerClients === 1);
    a2.close();
    await until('B to see its local connection go', () => B.derp.registry.local(a.publicKey.toString('hex')) === null);
    a3.send(b.publicKey, Buffer.from('via the mesh again'));
    const m2 = await nextReal(b);
    t.is(m2.type, 'packet', `b must get the packet, not ${m2.type}`);
    t.is(m2.type === 'packet' && m2.data.toString(), 'via the mesh again');
  } finally {
    await A.kill();
    await B.kill();
  }
});

test('a relay that dies: its clients are out of reach, receivers and senders hear PeerGone, and they are back when it is', async (t) => {
  const { A, B, a, b } = await meshedPair();
  let A2: Awaited<ReturnType<typeof startMeshRelay>> | null = null;
  try {
    a.send(b.publicKey, Buffer.from('hello'));
    await b.waitFor('packet');
    await A.kill();
    // b received from a: it is told a is gone from the region.
    const gone = await b.waitFor('peerGone');
    t.deepEqual(gone.peer, a.publicKey);
    t.is(gone.reason, PeerGoneReason.Disconnected);
    t.is(B.derp.registry.lookup(a.publicKey.toString('hex')), null);
    t.true(B.log.has(/WARN B\/mesh: mesh link down .*"clientsLost":1/), B.log.lines.join('\n'));
    // b sending disco to a now gets NotHere, so it stops routing a's traffic to this relay.
    b.send(a.publicKey, discoPacket());
    const notHere = await b.waitFor('peerGone');
    t.deepEqual(notHere.peer, a.publicKey);
    t.is(notHere.reason, PeerGoneReason.NotHere);

    // A comes back at the same address (same key), a reconnects there: B's link dials again and a is reachable.
    A2 = await startMeshRelay({ name: 'A', port: A.port, privateKey: A.privateKey });
    A2.meshWith([B.url]);
    const a2 = await A2.client(a.privateKey);
    await until('B to learn of a again', () => B.derp.registry.lookup(a.publicKey.toString('hex')) !== null);
    b.send(a.publicKey, Buffer.from('welcome back'));
    const back = await a2.waitFor('packet');
    t.is(back.data.toString(), 'welcome back');
    t.true(B.log.has(/mesh link up/));
  } finally {
    await A2?.kill();
    await B.kill();
  }
});

test('a peer that stops answering without closing is dropped after the liveness deadline', async (t) => {
  const A = await startMeshRelay({ name: 'A' });
  const B = await startMeshRelay({ name: 'B' });
  const wire = await freezableTcp(A.port);
  try {
    const [link] = B.meshWith([`http://127.0.0.1:${wire.port}`], { pingMs: 100, deadMs: 600, retryMs: 60_000 });
    const a = await A.client();
    const b = await B.client();
    await until('B to learn of a', () => link.peerClients === 1);
    b.send(a.publicKey, Buffer.from('before'));
    await a.waitFor('packet');
    a.send(b.publicKey, Buffer.from('reply')); // A has no link to B: dropped there, no matter.
    wire.freeze();
    await until('the link to declare the silent peer gone', () => link.state === 'down', 5_000);
    t.is(B.derp.registry.lookup(a.publicKey.toString('hex')), null, "a silent peer's clients are no longer offered");
    t.true(B.log.has(/mesh link down .*no frame from the peer/), B.log.lines.join('\n'));
  } finally {
    wire.close();
    await A.kill();
    await B.kill();
  }
});

test('a wrong mesh key is refused and said so on both sides; nothing is forwarded', async (t) => {
  const A = await startMeshRelay({ name: 'A' });
  const B = await startMeshRelay({ name: 'B', meshKey: Buffer.alloc(32, 0x77) });
  try {
    const [link] = B.meshWith([A.url]);
    const a = await A.client();
    await until('A to refuse B', () => A.derp.stats.meshRefused > 0);
    t.true(A.log.has(/WARN A\/derp: mesh peer refused .*mesh key is not this relay's/), A.log.lines.join('\n'));
    await until('B to log why', () => B.log.has(/mesh link cannot reach its peer.*same mesh key/));
    t.not(link.state, 'up');
    t.is(B.derp.registry.lookup(a.publicKey.toString('hex')), null);
  } finally {
    await A.kill();
    await B.kill();
  }
});

test('a relay without a mesh key refuses relays that present one', async (t) => {
  const A = await startMeshRelay({ name: 'A', meshKey: null });
  try {
    await t.throwsAsync(A.client(undefined, { meshKey: MESH_KEY }), { message: /connection closed|no DERP message/ });
    t.true(A.log.has(/mesh peer refused .*this relay has none/));
  } finally {
    await A.kill();
  }
});

test('without the mesh key, WatchConns, ForwardPacket and ClosePeer close the sender’s connection and do nothing', async (t) => {
  const A = await startMeshRelay({ name: 'A' });
  try {
    const victim = await A.client();
    for (const act of ['watch', 'forward', 'close'] as const) {
      const intruder = await A.client();
      if (act === 'watch') intruder.watchConns();
      if (act === 'forward') intruder.forward(crypto.randomBytes(32), victim.publicKey, Buffer.from('spoofed'));
      if (act === 'close') intruder.closePeer(victim.publicKey);
      await intruder.closed;
      t.pass(`${act}: connection closed`);
    }
    victim.ping(Buffer.from('still-up'));
    const m = await nextReal(victim);
    t.is(m.type, 'pong', 'the victim got no spoofed packet and is still connected');
  } finally {
    await A.kill();
  }
});

test('a mesh peer hears every present client, then arrivals and departures', async (t) => {
  const A = await startMeshRelay({ name: 'A' });
  try {
    const early = await A.client();
    const watcher = await A.client(undefined, { meshKey: MESH_KEY });
    watcher.watchConns();
    const first = await watcher.waitFor('peerPresent');
    t.deepEqual(first.peer, early.publicKey);
    t.is(first.flags, PeerPresentFlags.IsRegular);
    const late = await A.client();
    t.deepEqual((await watcher.waitFor('peerPresent')).peer, late.publicKey);
    late.close();
    const gone = await watcher.waitFor('peerGone');
    t.deepEqual(gone.peer, late.publicKey);
    t.is(gone.reason, PeerGoneReason.Disconnected);
    t.is(A.derp.stats.clients, 1, 'the mesh peer is not counted as a client');
  } finally {
    await A.kill();
  }
});

test('a mesh peer can forward a packet in a client’s name, and close a client', async (t) => {
  const A = await startMeshRelay({ name: 'A' });
  try {
    const local = await A.client();
    const peer = await A.client(undefined, { meshKey: MESH_KEY });
    const remoteSender = crypto.randomBytes(32);
    peer.forward(remoteSender, local.publicKey, Buffer.from('forwarded'));
    const m = await local.waitFor('packet');
    t.deepEqual(m.src, remoteSender);
    t.is(m.data.toString(), 'forwarded');
    // A forwarded disco packet for a key not here: the mesh peer is told NotHere (its link then drops the route).
    const absent = crypto.randomBytes(32);
    peer.forward(remoteSender, absent, discoPacket());
    const nh = await peer.waitFor('peerGone');
    t.deepEqual(nh.peer, absent);
    t.is(nh.reason, PeerGoneReason.NotHere);
    peer.closePeer(local.publicKey);
    await local.closed;
    t.true(A.log.has(/mesh peer asked to close a client .*"found":true/));
  } finally {
    await A.kill();
  }
});

test('a relay whose mesh list includes itself notices and does not dial itself again', async (t) => {
  const A = await startMeshRelay({ name: 'A' });
  try {
    const [self] = A.meshWith([A.url]);
    await until('the link to recognise itself', () => self.state === 'self');
    t.true(A.log.has(/mesh peer is this relay itself/));
    t.is(A.derp.stats.meshPeers, 0);
  } finally {
    await A.kill();
  }
});
