// WebSocket framing for DERP over WebSocket: round trips in both directions, the RFC 6455 masking rules, and
// random bytes only ever yield frames or a WsProtocolError.
import test from 'ava';
import fc from 'fast-check';
import { acceptValue } from '../../services/relay/src/websocket.ts';
import { encodeWsFrame, WsFrameParser, WsOpcode, WsProtocolError } from '../../services/relay/src/ws-frames.ts';

test('Sec-WebSocket-Accept matches the RFC 6455 example', (t) => {
  t.is(acceptValue('dGhlIHNhbXBsZSBub25jZQ=='), 's3pPLMBiTxaQ9kYGzzhZRbK+xOo=');
});

test('frames round-trip through the parser for every length class, masked and not', (t) => {
  for (const len of [0, 1, 125, 126, 65535, 65536, 70000]) {
    for (const masked of [true, false]) {
      const payload = Buffer.alloc(len, len % 251);
      const p = new WsFrameParser(masked);
      p.push(encodeWsFrame(WsOpcode.Binary, payload, masked));
      const f = p.next()!;
      t.is(f.opcode, WsOpcode.Binary);
      t.true(f.fin);
      t.deepEqual(f.payload, payload, `length ${len}, masked ${masked}`);
      t.is(p.next(), null);
    }
  }
});

test('masking rules and control-frame limits are enforced', (t) => {
  t.throws(() => {
    const p = new WsFrameParser(true);
    p.push(encodeWsFrame(WsOpcode.Binary, Buffer.from('x'), false));
    p.next();
  }, { instanceOf: WsProtocolError, message: /must be masked/ });
  t.throws(() => {
    const p = new WsFrameParser(true);
    p.push(encodeWsFrame(WsOpcode.Ping, Buffer.alloc(126), true));
    p.next();
  }, { instanceOf: WsProtocolError, message: /125/ });
  t.throws(() => {
    const p = new WsFrameParser(true);
    p.push(encodeWsFrame(WsOpcode.Close, Buffer.alloc(2), true, false));
    p.next();
  }, { instanceOf: WsProtocolError, message: /fragmented control/ });
});

test('random bytes never throw anything but WsProtocolError', (t) => {
  fc.assert(
    fc.property(fc.uint8Array({ maxLength: 500 }), fc.boolean(), (bytes, server) => {
      const p = new WsFrameParser(server);
      p.push(Buffer.from(bytes));
      try {
        while (p.next() !== null);
      } catch (e) {
        if (!(e instanceof WsProtocolError)) throw e;
      }
    }),
  );
  t.pass();
});
