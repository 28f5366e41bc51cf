// Property tests for everything that parses bytes a stranger controls. The promise: arbitrary input either parses
// or is refused with the module's own error type — never another exception that could escape a socket handler —
// and, over a real socket, garbage closes that one connection while the server keeps serving.
import test from 'ava';
import fc from 'fast-check';
import type { IncomingMessage } from 'node:http';
import net from 'node:net';
import { sealFrames } from '../../services/coordination/src/noise/conn.ts';
import { FrameError, FrameReader } from '../../services/coordination/src/noise/frame-reader.ts';
import { respondToInitiation } from '../../services/coordination/src/noise/handshake.ts';
import { HandshakeError } from '../../services/coordination/src/noise/messages.ts';
import { readUpgradeRequest, UpgradeRefused } from '../../services/coordination/src/noise/upgrade-request.ts';
import { WsFrameReader, WsProtocolError } from '../../shared/websocket/frames.ts';
import { generatePair } from '../../services/coordination/src/noise/x25519.ts';
import { closed, dialControl, initiate, readBytes, startControlServer } from '../harness/noise-client.ts';

const chunks = fc.array(fc.uint8Array({ maxLength: 300 }), { maxLength: 20 });

function onlyThrows<E>(kind: new (...a: never[]) => E, fn: () => void): boolean {
  try {
    fn();
    return true;
  } catch (e) {
    if (e instanceof kind) return true;
    throw e;
  }
}

test('frame reader: arbitrary bytes yield frames or a FrameError, nothing else', (t) => {
  fc.assert(
    fc.property(chunks, (cs) => {
      const r = new FrameReader();
      return onlyThrows(FrameError, () => {
        for (const c of cs) for (const f of r.push(c)) if (f.length < 16 || f.length > 4093) throw new Error('frame outside limits');
      });
    }),
  );
  t.pass();
});

test('frame reader: however a valid stream is cut, the same frames come out', (t) => {
  const key = generatePair();
  fc.assert(
    fc.property(fc.array(fc.uint8Array({ maxLength: 9000 }), { minLength: 1, maxLength: 5 }), fc.array(fc.nat(), { maxLength: 30 }), (msgs, cuts) => {
      const init = initiate({ serverPublic: key.publicKey });
      const hs = respondToInitiation(init.initiation, key);
      const tx = init.finish(hs.response).tx;
      const out: Buffer[] = [];
      for (const m of msgs) sealFrames(tx, m, out);
      const wire = Buffer.concat(out);
      const points = [...new Set(cuts.map((c) => c % (wire.length + 1)))].sort((a, b) => a - b);
      const r = new FrameReader();
      const got: Buffer[] = [];
      let prev = 0;
      for (const p of [...points, wire.length]) {
        got.push(...r.push(wire.subarray(prev, p)).map((f) => hs.rx.decrypt(f)));
        prev = p;
      }
      return r.pending === 0 && Buffer.concat(got).equals(Buffer.concat(msgs.map((m) => Buffer.from(m))));
    }),
    { numRuns: 40 },
  );
  t.pass();
});

test('initiation parser and responder: arbitrary bytes and mutated initiations only ever raise HandshakeError', (t) => {
  const server = generatePair();
  const good = initiate({ serverPublic: server.publicKey }).initiation;
  fc.assert(
    fc.property(
      fc.oneof(
        fc.uint8Array({ maxLength: 200 }),
        fc.uint8Array({ minLength: 101, maxLength: 101 }),
        fc.tuple(fc.nat(100), fc.integer({ min: 1, max: 255 })).map(([i, x]) => {
          const b = Buffer.from(good);
          b[i] ^= x;
          return b;
        }),
      ),
      (bytes) => onlyThrows(HandshakeError, () => respondToInitiation(bytes, server)),
    ),
    { numRuns: 300 },
  );
  t.pass();
});

test('websocket frame reader: arbitrary bytes yield frames or a WsProtocolError', (t) => {
  fc.assert(
    fc.property(chunks, fc.boolean(), (cs, server) => {
      const r = new WsFrameReader(server);
      return onlyThrows(WsProtocolError, () => {
        for (const c of cs) r.push(c);
      });
    }),
  );
  t.pass();
});

test('upgrade request reader: arbitrary headers and URLs give a request or UpgradeRefused', (t) => {
  const value = fc.oneof(fc.string(), fc.constantFrom('tailscale-control-protocol', 'websocket', 'WebSocket', '13', 'AAAA', 'dGhlIHNhbXBsZSBub25jZQ=='));
  fc.assert(
    fc.property(
      fc.dictionary(
        fc.constantFrom('upgrade', 'x-tailscale-handshake', 'sec-websocket-key', 'sec-websocket-version', 'sec-websocket-protocol', 'connection'),
        value,
      ),
      fc.constantFrom('GET', 'POST', 'PUT'),
      fc.oneof(
        fc.string(),
        fc.constant('/ts2021?X-Tailscale-Handshake=AAAA'),
        fc.webUrl().map((u) => new URL(u).pathname + new URL(u).search),
      ),
      (headers, method, url) => onlyThrows(UpgradeRefused, () => readUpgradeRequest({ headers, method, url } as unknown as IncomingMessage)),
    ),
    { numRuns: 300 },
  );
  t.pass();
});

test('garbage after a good handshake closes that connection; the server keeps serving others', async (t) => {
  const srv = await startControlServer();
  t.teardown(() => srv.close());
  const samples = fc.sample(fc.uint8Array({ minLength: 1, maxLength: 3000 }), { numRuns: 25, seed: 8 });
  for (const garbage of samples) {
    const r = await dialControl({ port: srv.port, serverPublic: srv.key.publicKey });
    if (r.kind !== 'ok') return t.fail(`dial failed: ${r.kind}`);
    const gone = closed(r.socket);
    r.socket.write(garbage);
    r.socket.end();
    await gone;
  }
  // Garbage as the very first bytes on the socket (no HTTP at all) is the HTTP server's to refuse.
  const raw = net.connect(srv.port, '127.0.0.1');
  raw.end(Buffer.from([0x04, 0x00, 0x10, 1, 2, 3]));
  raw.resume();
  await closed(raw);
  const r = await dialControl({ port: srv.port, serverPublic: srv.key.publicKey });
  if (r.kind !== 'ok') return t.fail('server stopped serving');
  r.conn.write('still here');
  t.is((await readBytes(r.conn, 10)).toString(), 'still here');
  r.conn.destroy();
  t.is(srv.accepted.length, samples.length + 1);
});
