// The mesh frames byte for byte as derper writes and reads them (derp/derp.go, derpserver.go sendPeerPresent,
// recvForwardPacket), the short PeerPresent forms older servers send, and the mesh key's format and comparison.
import test from 'ava';
import fc from 'fast-check';
import {
  decodeClosePeer,
  decodeForwardPacket,
  decodePeerPresent,
  encodeClosePeer,
  encodeForwardPacket,
  encodePeerPresent,
  encodeWatchConns,
  FrameError,
  MAX_PACKET_SIZE,
  PEER_PRESENT_LEN,
  PeerPresentFlags,
} from '../../services/relay/src/frames.ts';
import { meshKeyMatches } from '../../services/relay/src/mesh-key.ts';
import { DerpSettingError, parseMeshKey } from '../../shared/derp-addresses.ts';

const key = (b: number) => Buffer.alloc(32, b);

test('PeerPresent: key, IPv4 as a mapped 16-byte address, port, flags — 51 bytes (derpserver.go peerPresentFrameLen)', (t) => {
  const f = encodePeerPresent(key(3), '192.0.2.7', 41641, PeerPresentFlags.IsRegular);
  t.is(PEER_PRESENT_LEN, 51);
  t.deepEqual(f.subarray(0, 5), Buffer.from([0x09, 0, 0, 0, 51]));
  t.deepEqual(f.subarray(5, 37), key(3));
  t.deepEqual(f.subarray(37, 53), Buffer.from([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 7]));
  t.deepEqual(f.subarray(53), Buffer.from([0xa2, 0xa9, 0x01]));
  t.deepEqual(decodePeerPresent(f.subarray(5)), { peer: key(3), ip: '192.0.2.7', port: 41641, flags: 1 });
});

test('PeerPresent: IPv6 and unknown addresses round-trip; older short forms decode', (t) => {
  const v6 = decodePeerPresent(encodePeerPresent(key(1), '2001:db8::5', 7, PeerPresentFlags.IsProber).subarray(5));
  t.is(v6.ip, '2001:db8::5');
  t.is(v6.flags, PeerPresentFlags.IsProber);
  const none = encodePeerPresent(key(1), '', 0, PeerPresentFlags.IsRegular);
  t.deepEqual(none.subarray(37, 55), Buffer.alloc(18), 'no address: 16 zero bytes and port 0, as derper for an unknown one');
  t.is(decodePeerPresent(none.subarray(5)).ip, '');
  // Key only (the oldest servers), key + address without flags, and a longer body from a newer server.
  t.deepEqual(decodePeerPresent(key(4)), { peer: key(4), ip: '', port: 0, flags: 0 });
  const noFlags = encodePeerPresent(key(4), '10.0.0.1', 5, 1).subarray(5, 5 + 50);
  t.deepEqual(decodePeerPresent(noFlags), { peer: key(4), ip: '10.0.0.1', port: 5, flags: 0 });
  const longer = Buffer.concat([encodePeerPresent(key(4), '10.0.0.1', 5, 9).subarray(5), Buffer.from([1, 2, 3])]);
  t.is(decodePeerPresent(longer).flags, 9);
  t.throws(() => decodePeerPresent(Buffer.alloc(31)), { instanceOf: FrameError });
});

test('ForwardPacket: source key, destination key, packet; refused when short or oversized', (t) => {
  const f = encodeForwardPacket(key(1), key(2), Buffer.from('pkt'));
  t.deepEqual(f.subarray(0, 5), Buffer.from([0x0a, 0, 0, 0, 67]));
  const d = decodeForwardPacket(f.subarray(5));
  t.deepEqual([d.src, d.dst, d.packet.toString()], [key(1), key(2), 'pkt']);
  t.throws(() => decodeForwardPacket(Buffer.alloc(63)), { instanceOf: FrameError });
  t.throws(() => decodeForwardPacket(Buffer.alloc(64 + MAX_PACKET_SIZE + 1)), { instanceOf: FrameError });
  t.is(decodeForwardPacket(Buffer.alloc(64 + MAX_PACKET_SIZE)).packet.length, MAX_PACKET_SIZE);
  t.throws(() => encodeForwardPacket(key(1), Buffer.alloc(31), Buffer.alloc(0)), { instanceOf: RangeError });
});

test('WatchConns is an empty frame 0x10; ClosePeer carries exactly one key', (t) => {
  t.deepEqual(encodeWatchConns(), Buffer.from([0x10, 0, 0, 0, 0]));
  t.deepEqual(encodeClosePeer(key(8)), Buffer.concat([Buffer.from([0x11, 0, 0, 0, 32]), key(8)]));
  t.deepEqual(decodeClosePeer(key(8)), key(8));
  t.throws(() => decodeClosePeer(Buffer.alloc(33)), { instanceOf: FrameError });
});

test('mesh frames round-trip for any keys, addresses and packets', (t) => {
  const k = fc.uint8Array({ minLength: 32, maxLength: 32 }).map((a) => Buffer.from(a));
  fc.assert(
    fc.property(k, k, fc.uint8Array({ maxLength: 2000 }), (src, dst, pkt) => {
      const d = decodeForwardPacket(encodeForwardPacket(src, dst, pkt).subarray(5));
      return d.src.equals(src) && d.dst.equals(dst) && d.packet.equals(Buffer.from(pkt));
    }),
  );
  fc.assert(
    fc.property(k, fc.oneof(fc.ipV4(), fc.ipV6()), fc.integer({ min: 0, max: 65535 }), fc.integer({ min: 1, max: 255 }), (peer, ip, port, flags) => {
      const d = decodePeerPresent(encodePeerPresent(peer, ip, port, flags).subarray(5));
      return d.peer.equals(peer) && d.port === port && d.flags === flags && ipBytes(d.ip).equals(ipBytes(ip));
    }),
  );
  t.pass();
});

/** An address as its 16 wire bytes (IPv4 mapped; "" is all zeros), so different spellings compare equal. */
function ipBytes(ip: string): Buffer {
  return encodePeerPresent(key(0), ip, 0, 1).subarray(37, 53);
}

test('the mesh key: 64 hex digits as derper reads them, not all zeros; compared whole', (t) => {
  const hex = `${'a'.repeat(62)}0f`;
  t.deepEqual(parseMeshKey(`  ${hex.toUpperCase()}\n`), Buffer.from(hex, 'hex'), 'whitespace trimmed, either case');
  t.throws(() => parseMeshKey('abc'), { instanceOf: DerpSettingError, message: /64 hexadecimal digits/ });
  t.throws(() => parseMeshKey('g'.repeat(64)), { instanceOf: DerpSettingError });
  t.throws(() => parseMeshKey('0'.repeat(64)), { instanceOf: DerpSettingError, message: /all zeros/ });
  const ours = Buffer.from(hex, 'hex');
  t.true(meshKeyMatches(ours, hex));
  t.true(meshKeyMatches(ours, hex.toUpperCase()));
  t.false(meshKeyMatches(ours, `${'a'.repeat(62)}0e`), 'last byte differs');
  t.false(meshKeyMatches(ours, hex.slice(0, 62)), 'shorter');
  t.false(meshKeyMatches(ours, `${hex}00`), 'longer');
  t.false(meshKeyMatches(ours, ''));
});
