// The region registry's rules, without sockets: a local client wins over the mesh, a key announced by two relays goes
// to the one that announced it first, and receivers hear PeerGone only when a key is held nowhere in the region.
import test from 'ava';
import { PeerGoneReason } from '../../services/relay/src/frames.ts';
import { type MeshForwarder, RegionRegistry, type RelayClient } from '../../services/relay/src/registry.ts';

class FakeClient implements RelayClient {
  readonly key: Buffer;
  readonly keyHex: string;
  readonly got: string[] = [];
  readonly gone: { peer: string; reason: number }[] = [];
  constructor(b: number) {
    this.key = Buffer.alloc(32, b);
    this.keyHex = this.key.toString('hex');
  }
  deliver(_src: Buffer, packet: Buffer): void {
    this.got.push(packet.toString());
  }
  peerGone(peer: Buffer, reason: number): void {
    this.gone.push({ peer: peer.toString('hex'), reason });
  }
}

class FakeLink implements MeshForwarder {
  readonly name: string;
  readonly sent: { dst: string; packet: string }[] = [];
  constructor(name: string) {
    this.name = name;
  }
  forward(_src: Buffer, dst: Buffer, packet: Buffer): void {
    this.sent.push({ dst: dst.toString('hex'), packet: packet.toString() });
  }
}

const send = (r: RegionRegistry, to: FakeClient, text: string) => r.lookup(to.keyHex)?.deliver(Buffer.alloc(32, 0xee), Buffer.from(text));

test('a key held here and elsewhere: the local client wins, and its leaving hands the key to the mesh without PeerGone', (t) => {
  const r = new RegionRegistry();
  const x = new FakeClient(1);
  const receiver = new FakeClient(2);
  const link = new FakeLink('B');
  r.add(x);
  r.add(receiver);
  r.addForwarder(x.key, link);
  r.watchGone(x.keyHex, receiver);
  send(r, x, 'one');
  t.deepEqual(x.got, ['one']);
  t.deepEqual(link.sent, []);
  t.true(r.remove(x));
  send(r, x, 'two');
  t.deepEqual(link.sent, [{ dst: x.keyHex, packet: 'two' }]);
  t.deepEqual(receiver.gone, [], 'still in the region');
  t.is(r.size, 1);
  t.is(r.remoteSize, 1);
});

test('a key announced by two relays goes to the first; PeerGone only when the last one drops it', (t) => {
  const r = new RegionRegistry();
  const receiver = new FakeClient(2);
  r.add(receiver);
  const x = new FakeClient(1);
  const [b, c] = [new FakeLink('B'), new FakeLink('C')];
  r.addForwarder(x.key, b);
  r.addForwarder(x.key, c);
  r.addForwarder(x.key, b); // announced again after a reconnect: no second entry
  r.watchGone(x.keyHex, receiver);
  send(r, x, 'p1');
  t.deepEqual(
    b.sent.map((s) => s.packet),
    ['p1'],
  );
  r.removeForwarder(x.keyHex, b);
  send(r, x, 'p2');
  t.deepEqual(
    c.sent.map((s) => s.packet),
    ['p2'],
  );
  t.deepEqual(receiver.gone, []);
  r.removeForwarder(x.keyHex, b); // not its key any more: nothing happens
  t.deepEqual(receiver.gone, []);
  r.removeForwarder(x.keyHex, c);
  t.deepEqual(receiver.gone, [{ peer: x.keyHex, reason: PeerGoneReason.Disconnected }]);
  t.is(r.lookup(x.keyHex), null);
  r.removeForwarder(x.keyHex, c);
  t.is(receiver.gone.length, 1, 'told once');
});

test('a local client leaving with no relay holding its key is gone, and its own watch is not told about itself', (t) => {
  const r = new RegionRegistry();
  const x = new FakeClient(1);
  const y = new FakeClient(2);
  r.add(x);
  r.add(y);
  r.watchGone(x.keyHex, y);
  r.watchGone(x.keyHex, x);
  t.true(r.remove(x));
  t.deepEqual(y.gone, [{ peer: x.keyHex, reason: PeerGoneReason.Disconnected }]);
  t.deepEqual(x.gone, []);
  t.is(r.lookup(x.keyHex), null);
});
