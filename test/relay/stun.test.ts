// The STUN wire code: Tailscale's request parses, answers carry the XOR-mapped address (checked against RFC 5769's
// test vectors), and no byte sequence makes the parser throw.
import test from 'ava';
import fc from 'fast-check';
import ipaddr from 'ipaddr.js';
import { bindingRequest, bindingResponse, parseBindingRequest, parseBindingResponse } from '../../services/relay/src/stun.ts';

const txId = Buffer.from('b7e7a701bc34d686fa87dfae', 'hex');

test('a Tailscale-style binding request parses', (t) => {
  const req = bindingRequest(txId);
  t.is(req.length, 20 + 12 + 8, 'header + SOFTWARE "tailnode" + FINGERPRINT, like net/stun');
  const parsed = parseBindingRequest(req);
  t.deepEqual(parsed, { txId, software: 'tailnode' });
});

test('a request with a wrong fingerprint, a response, or a truncated message is not a binding request', (t) => {
  const req = bindingRequest(txId);
  const badFp = Buffer.from(req);
  badFp[badFp.length - 1] ^= 1;
  t.is(parseBindingRequest(badFp), null);
  t.is(parseBindingRequest(req.subarray(0, req.length - 1)), null);
  t.is(parseBindingRequest(bindingResponse(txId, '192.0.2.1', 32853)!), null);
  t.is(parseBindingRequest(Buffer.from('GET / HTTP/1.1\r\n\r\n')), null);
  // A bare 20-byte binding request (no attributes) is valid STUN.
  const bare = Buffer.alloc(20);
  bare.writeUInt16BE(1, 0);
  Buffer.from([0x21, 0x12, 0xa4, 0x42]).copy(bare, 4);
  txId.copy(bare, 8);
  t.deepEqual(parseBindingRequest(bare), { txId, software: null });
});

// RFC 5769 sections 2.2 and 2.3: XOR-MAPPED-ADDRESS for 192.0.2.1:32853 and [2001:db8:1234:5678:11:2233:4455:6677]:32853.
test('XOR-MAPPED-ADDRESS matches the RFC 5769 test vectors', (t) => {
  const v4 = bindingResponse(txId, '192.0.2.1', 32853)!;
  t.deepEqual(v4.subarray(0, 4), Buffer.from('0101000c', 'hex'));
  t.deepEqual(v4.subarray(4, 20), Buffer.concat([Buffer.from('2112a442', 'hex'), txId]));
  t.deepEqual(v4.subarray(20), Buffer.from('002000080001a147e112a643', 'hex'));
  const v6 = bindingResponse(txId, '2001:db8:1234:5678:11:2233:4455:6677', 32853)!;
  t.deepEqual(v6.subarray(20), Buffer.from('002000140002a1470113a9faa5d3f179bc25f4b5bed2b9d9', 'hex'));
  t.deepEqual(parseBindingResponse(v4), { txId, address: '192.0.2.1', port: 32853 });
  t.deepEqual(parseBindingResponse(v6), { txId, address: '2001:db8:1234:5678:11:2233:4455:6677', port: 32853 });
});

test('responses round-trip for any address and port', (t) => {
  fc.assert(
    fc.property(fc.oneof(fc.ipV4(), fc.ipV6()), fc.integer({ min: 0, max: 65535 }), fc.uint8Array({ minLength: 12, maxLength: 12 }), (address, port, id) => {
      const res = bindingResponse(id, address, port);
      t.truthy(res);
      const back = parseBindingResponse(res!)!;
      t.is(back.port, port);
      // Compared by value, not by spelling.
      t.deepEqual(ipaddr.parse(back.address).toByteArray(), ipaddr.parse(address).toByteArray());
    }),
  );
});

test('random bytes never throw out of the parsers', (t) => {
  fc.assert(
    fc.property(fc.uint8Array({ maxLength: 200 }), (bytes) => {
      parseBindingRequest(bytes);
      parseBindingResponse(bytes);
    }),
  );
  // Random attributes behind a valid header reach the attribute walk.
  fc.assert(
    fc.property(fc.uint8Array({ maxLength: 120 }), fc.integer({ min: 0, max: 0xffff }), (attrs, type) => {
      const head = Buffer.alloc(20);
      head.writeUInt16BE(type & 0x3fff, 0);
      head.writeUInt16BE(attrs.length, 2);
      Buffer.from([0x21, 0x12, 0xa4, 0x42]).copy(head, 4);
      const msg = Buffer.concat([head, attrs]);
      parseBindingRequest(msg);
      parseBindingResponse(msg);
    }),
  );
  t.pass();
});
