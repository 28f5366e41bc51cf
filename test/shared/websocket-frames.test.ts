// The websocket framing both endpoints share (/ts2021 and /derp): the RFC 6455 accept value, round trips for every
// length class, the masking and control-frame rules, and random bytes only ever yielding frames or WsProtocolError.
import crypto from 'node:crypto';
import test from 'ava';
import fc from 'fast-check';
import { OP_BINARY, OP_CLOSE, OP_PING, WsFrameReader, WsProtocolError, writeWsFrame } from '../../shared/websocket/frames.ts';
import { acceptValue } from '../../shared/websocket/handshake.ts';

test('Sec-WebSocket-Accept matches the RFC 6455 example', (t) => {
  t.is(acceptValue('dGhlIHNhbXBsZSBub25jZQ=='), 's3pPLMBiTxaQ9kYGzzhZRbK+xOo=');
});

test('frames round-trip for every length class, masked (client) and not (server)', (t) => {
  for (const len of [0, 1, 125, 126, 65535, 65536, 70000]) {
    for (const masked of [true, false]) {
      const payload = Buffer.alloc(len, len % 251);
      const frames = new WsFrameReader(masked).push(writeWsFrame(OP_BINARY, payload, masked ? crypto.randomBytes(4) : undefined));
      t.is(frames.length, 1);
      t.is(frames[0].opcode, OP_BINARY);
      t.true(frames[0].fin);
      t.deepEqual(frames[0].payload, payload, `length ${len}, masked ${masked}`);
    }
  }
});

test('masking rules and control-frame limits are enforced', (t) => {
  const mask = Buffer.from([1, 2, 3, 4]);
  t.throws(() => new WsFrameReader(true).push(writeWsFrame(OP_BINARY, Buffer.from('x'))), { instanceOf: WsProtocolError, message: /not masked/ });
  t.throws(() => new WsFrameReader(true).push(writeWsFrame(OP_PING, Buffer.alloc(126), mask)), { instanceOf: WsProtocolError, message: /too long/ });
  t.throws(() => new WsFrameReader(true).push(writeWsFrame(OP_CLOSE, Buffer.alloc(2), mask, false)), { instanceOf: WsProtocolError, message: /fragmented/ });
});

test('random bytes never throw anything but WsProtocolError', (t) => {
  fc.assert(
    fc.property(fc.uint8Array({ maxLength: 500 }), fc.boolean(), (bytes, server) => {
      try {
        new WsFrameReader(server).push(Buffer.from(bytes));
      } catch (e) {
        if (!(e instanceof WsProtocolError)) throw e;
      }
    }),
  );
  t.pass();
});
