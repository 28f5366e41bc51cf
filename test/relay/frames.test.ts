// DERP frame encoding/decoding and the incremental reader: exact wire layouts, round trips, and the property that
// arbitrary bytes in arbitrary chunks only ever produce frames or a FrameError, never any other exception.
import test from 'ava';
import fc from 'fast-check';
import { FrameReader, limitPolicy, type FramePolicy } from '../../services/relay/src/frame-reader.ts';
import {
  decodeNotePreferred,
  decodePeerGone,
  decodePing,
  decodeRecvPacket,
  decodeSendPacket,
  decodeServerKey,
  encodeFrame,
  encodePeerGone,
  encodeRecvPacket,
  encodeRestarting,
  encodeSendPacket,
  encodeServerKey,
  FrameError,
  FrameType,
  looksLikeDisco,
  MAGIC,
  MAX_PACKET_SIZE,
  PeerGoneReason,
} from '../../services/relay/src/frames.ts';
import { openClientInfo, openServerInfo, sealClientInfo, sealServerInfo } from '../../services/relay/src/client-info.ts';
import { newPrivateKey, publicKeyOf } from '../../services/relay/src/nacl-box.ts';

const key = (b: number) => Buffer.alloc(32, b);

function readAll(bytes: Buffer, chunks: number[], policy: FramePolicy = limitPolicy(1 << 20)) {
  const r = new FrameReader(policy);
  const out = [];
  let off = 0;
  for (const n of [...chunks, bytes.length]) {
    r.push(bytes.subarray(off, Math.min(bytes.length, off + n)));
    off = Math.min(bytes.length, off + n);
    for (let f = r.next(); f; f = r.next()) out.push({ type: f.type, body: Buffer.from(f.body) });
  }
  return out;
}

test('wire layouts match the reference', (t) => {
  t.deepEqual(MAGIC, Buffer.from([0x44, 0x45, 0x52, 0x50, 0xf0, 0x9f, 0x94, 0x91]));
  const sk = encodeServerKey(key(9));
  t.deepEqual(sk.subarray(0, 5), Buffer.from([0x01, 0, 0, 0, 40]));
  t.deepEqual(decodeServerKey(sk.subarray(5)), key(9));
  t.deepEqual(encodePeerGone(key(1), PeerGoneReason.NotHere), Buffer.concat([Buffer.from([0x08, 0, 0, 0, 33]), key(1), Buffer.from([1])]));
  t.deepEqual(encodeRestarting(1000, 30000), Buffer.from([0x15, 0, 0, 0, 8, 0, 0, 0x03, 0xe8, 0, 0, 0x75, 0x30]));
  t.deepEqual(encodeRecvPacket(key(2), Buffer.from('hi')).subarray(0, 5), Buffer.from([0x05, 0, 0, 0, 34]));
});

test('decoders refuse bodies that cannot be what they claim', (t) => {
  t.throws(() => decodeSendPacket(Buffer.alloc(31)), { instanceOf: FrameError });
  t.throws(() => decodeSendPacket(Buffer.alloc(32 + MAX_PACKET_SIZE + 1)), { instanceOf: FrameError });
  t.deepEqual(decodeSendPacket(Buffer.alloc(32 + MAX_PACKET_SIZE)).packet.length, MAX_PACKET_SIZE);
  t.throws(() => decodeNotePreferred(Buffer.alloc(2)), { instanceOf: FrameError });
  t.true(decodeNotePreferred(Buffer.from([1])));
  t.throws(() => decodePing(Buffer.alloc(7)), { instanceOf: FrameError });
  t.throws(() => decodePing(Buffer.alloc(1001)), { instanceOf: FrameError });
  t.is(decodePeerGone(key(3)).reason, PeerGoneReason.Disconnected, 'older servers sent no reason byte');
  t.throws(() => decodeServerKey(Buffer.alloc(40)), { instanceOf: FrameError });
});

test('disco packets are recognised by their magic and minimum length', (t) => {
  const magic = Buffer.from('TS💬', 'utf8');
  t.true(looksLikeDisco(Buffer.concat([magic, Buffer.alloc(56)])));
  t.false(looksLikeDisco(Buffer.concat([magic, Buffer.alloc(55)])));
  t.false(looksLikeDisco(Buffer.alloc(100)));
});

test('ClientInfo and ServerInfo seal and open between the right keys only', (t) => {
  const serverPriv = newPrivateKey();
  const clientPriv = newPrivateKey();
  const frame = sealClientInfo(clientPriv, publicKeyOf(clientPriv), publicKeyOf(serverPriv), { appName: 'test' });
  const { clientKey, info } = openClientInfo(serverPriv, frame.subarray(5));
  t.deepEqual(clientKey, publicKeyOf(clientPriv));
  t.is(info.version, 2);
  t.true(info.canAckPings);
  t.is(info.appName, 'test');
  t.throws(() => openClientInfo(newPrivateKey(), frame.subarray(5)), { instanceOf: FrameError, message: /does not open/ });
  const tampered = Buffer.from(frame.subarray(5));
  tampered[tampered.length - 1] ^= 1;
  t.throws(() => openClientInfo(serverPriv, tampered), { instanceOf: FrameError });
  const zeroKey = Buffer.concat([Buffer.alloc(32), frame.subarray(5 + 32)]);
  t.throws(() => openClientInfo(serverPriv, zeroKey), { instanceOf: FrameError, message: /low-order/ });
  const si = sealServerInfo(serverPriv, publicKeyOf(clientPriv));
  t.is(si[0], FrameType.ServerInfo);
  t.is(openServerInfo(clientPriv, publicKeyOf(serverPriv), si.subarray(5)).version, 2);
});

test('frames survive any chunking', (t) => {
  fc.assert(
    fc.property(
      fc.array(fc.record({ type: fc.integer({ min: 0, max: 255 }), body: fc.uint8Array({ maxLength: 300 }) }), { maxLength: 8 }),
      fc.array(fc.integer({ min: 1, max: 50 }), { maxLength: 40 }),
      (frames, chunks) => {
        const bytes = Buffer.concat(frames.map((f) => encodeFrame(f.type, f.body)));
        const got = readAll(bytes, chunks);
        t.deepEqual(
          got,
          frames.map((f) => ({ type: f.type, body: Buffer.from(f.body) })),
        );
      },
    ),
  );
});

test('skipped frames vanish without disturbing the ones around them', (t) => {
  const bytes = Buffer.concat([encodeFrame(1, Buffer.from('a')), encodeFrame(0x7f, Buffer.alloc(5000, 9)), encodeFrame(2, Buffer.from('b'))]);
  const got = readAll(bytes, [3, 7, 100, 1, 2000], (type) => (type === 0x7f ? 'skip' : 'read'));
  t.deepEqual(
    got.map((f) => f.body.toString()),
    ['a', 'b'],
  );
});

test('random bytes never throw anything but FrameError out of the reader', (t) => {
  fc.assert(
    fc.property(fc.uint8Array({ maxLength: 2000 }), fc.array(fc.integer({ min: 1, max: 64 }), { maxLength: 30 }), (bytes, chunks) => {
      try {
        for (const f of readAll(Buffer.from(bytes), chunks, limitPolicy(4096))) {
          // Every decoder on every body: only FrameError may come out.
          for (const decode of [decodeSendPacket, decodeRecvPacket, decodePeerGone, decodePing, decodeNotePreferred, decodeServerKey]) {
            try {
              decode(f.body);
            } catch (e) {
              if (!(e instanceof FrameError)) throw e;
            }
          }
        }
      } catch (e) {
        if (!(e instanceof FrameError)) throw e;
      }
    }),
  );
  t.pass();
});

test('SendPacket encoding round-trips', (t) => {
  fc.assert(
    fc.property(fc.uint8Array({ minLength: 32, maxLength: 32 }), fc.uint8Array({ maxLength: 2000 }), (dst, packet) => {
      const [f] = readAll(encodeSendPacket(dst, packet), []);
      const d = decodeSendPacket(f.body);
      t.deepEqual([Buffer.from(d.dst), Buffer.from(d.packet)], [Buffer.from(dst), Buffer.from(packet)]);
    }),
  );
});
