// The encrypted record transport over real loopback TCP, poked from a raw client socket so every framing edge can
// be produced on purpose: frames split across reads, many frames per read, empty frames, the size limit, foreign
// frame types, bad tags, replays, a stream cut mid-frame, and backpressure in both directions (HTTP/2 streams
// megabytes through this).
import test from 'ava';
import crypto from 'node:crypto';
import net from 'node:net';
import type { CipherState } from '../../services/coordination/src/noise/cipher-state.ts';
import { NoiseConn, sealFrames } from '../../services/coordination/src/noise/conn.ts';
import { FrameReader } from '../../services/coordination/src/noise/frame-reader.ts';
import { respondToInitiation } from '../../services/coordination/src/noise/handshake.ts';
import { MAX_FRAME_LEN, MAX_PLAINTEXT_LEN } from '../../services/coordination/src/noise/messages.ts';
import { generatePair } from '../../services/coordination/src/noise/x25519.ts';
import { closed, initiate, readBytes } from '../harness/noise-client.ts';

interface Pair {
  server: NoiseConn;
  serverSocket: net.Socket;
  client: net.Socket;
  /** Client -> server. */
  tx: CipherState;
  /** Server -> client. */
  rx: CipherState;
  serverClosed: Promise<Error | null>;
}

async function pair(): Promise<Pair> {
  const key = generatePair();
  const init = initiate({ serverPublic: key.publicKey });
  const hs = respondToInitiation(init.initiation, key);
  const keys = init.finish(hs.response);
  const listener = net.createServer();
  await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
  const accepted = new Promise<net.Socket>((resolve) => listener.once('connection', resolve));
  const client = net.connect((listener.address() as net.AddressInfo).port, '127.0.0.1');
  client.setNoDelay(true);
  const serverSocket = await accepted;
  listener.close();
  const server = new NoiseConn(serverSocket, { rx: hs.rx, tx: hs.tx });
  return { server, serverSocket, client, tx: keys.tx, rx: keys.rx, serverClosed: closed(server) };
}

function frames(tx: CipherState, ...plaintexts: Buffer[]): Buffer {
  const out: Buffer[] = [];
  for (const p of plaintexts) sealFrames(tx, p, out);
  return Buffer.concat(out);
}

/** A record frame with a given type and length field, around an arbitrary body. */
function rawFrame(type: number, len: number, body: Buffer = Buffer.alloc(len)): Buffer {
  const h = Buffer.of(type, 0, 0);
  h.writeUInt16BE(len, 1);
  return Buffer.concat([h, body]);
}

test('a frame delivered one byte per TCP write arrives whole', async (t) => {
  const p = await pair();
  const msg = crypto.randomBytes(1000);
  const wire = frames(p.tx, msg);
  const got = readBytes(p.server, msg.length);
  for (const b of wire) {
    p.client.write(Buffer.of(b));
    await new Promise((r) => setImmediate(r));
  }
  t.deepEqual(await got, msg);
  p.client.destroy();
});

test('many frames in one write, with empty frames among them, arrive in order', async (t) => {
  const p = await pair();
  const parts = Array.from({ length: 50 }, (_, i) => (i % 7 === 3 ? Buffer.alloc(0) : crypto.randomBytes(1 + ((i * 97) % 5000))));
  const all = Buffer.concat(parts);
  const got = readBytes(p.server, all.length);
  p.client.write(frames(p.tx, ...parts));
  t.deepEqual(await got, all);
  p.client.destroy();
});

test('a maximum-size frame (4096 bytes) is accepted', async (t) => {
  const p = await pair();
  const msg = crypto.randomBytes(MAX_PLAINTEXT_LEN);
  const wire = frames(p.tx, msg);
  t.is(wire.length, MAX_FRAME_LEN);
  const got = readBytes(p.server, msg.length);
  p.client.write(wire);
  t.deepEqual(await got, msg);
  p.client.destroy();
});

const rejections: Array<[string, (p: Pair) => Buffer, RegExp]> = [
  ['a frame over 4096 bytes', () => rawFrame(0x04, 4094), /exceeds the 4096-byte limit/],
  ['an error frame from the client', () => rawFrame(0x03, 5, Buffer.from('hello')), /unexpected frame type 3/],
  ['a second initiation', () => rawFrame(0x01, 96), /unexpected frame type 1/],
  ['a frame too short for its tag', () => rawFrame(0x04, 15), /too short/],
  [
    'a frame with a flipped bit',
    (p) => {
      const f = frames(p.tx, Buffer.from('tampered'));
      f[5] ^= 0x01;
      return f;
    },
    /frame 0 from peer rejected: message authentication failed/,
  ],
  [
    'a replayed frame',
    (p) => {
      const f = frames(p.tx, Buffer.from('once'));
      return Buffer.concat([f, f]);
    },
    /frame 1 from peer rejected/,
  ],
  ['frames sealed with the server-to-client key', (p) => frames(p.rx, Buffer.from('wrong direction')), /rejected/],
];
for (const [name, make, reason] of rejections) {
  test(`${name} destroys the connection with a reason`, async (t) => {
    const p = await pair();
    p.server.resume();
    p.client.write(make(p));
    const err = await p.serverClosed;
    t.regex(err?.message ?? '', reason);
    await closed(p.client); // the peer sees the close
    t.true(p.serverSocket.destroyed);
  });
}

test('a stream cut in the middle of a frame is an error, a clean end is not', async (t) => {
  const cut = await pair();
  cut.server.resume();
  cut.client.end(frames(cut.tx, Buffer.from('cut me')).subarray(0, 10));
  t.regex((await cut.serverClosed)?.message ?? '', /middle of a frame/);

  const clean = await pair();
  const got = readBytes(clean.server, 5);
  clean.client.end(frames(clean.tx, Buffer.from('bye!!')));
  t.is((await got).toString(), 'bye!!');
  const ended = new Promise<void>((resolve) => clean.server.once('end', resolve));
  clean.server.resume();
  await ended;
  t.is(await clean.serverClosed, null);
});

test('large writes leave as frames of at most 4096 bytes that decrypt in order', async (t) => {
  const p = await pair();
  const data = crypto.randomBytes(1 << 20);
  const reader = new FrameReader();
  const got: Buffer[] = [];
  let size = 0;
  let maxFrame = 0;
  const done = new Promise<void>((resolve) => {
    p.client.on('data', (chunk: Buffer) => {
      for (const ct of reader.push(chunk)) {
        maxFrame = Math.max(maxFrame, ct.length + 3);
        const pt = p.rx.decrypt(ct);
        got.push(pt);
        size += pt.length;
      }
      if (size >= data.length) resolve();
    });
  });
  p.server.write(data.subarray(0, 12345));
  p.server.write(data.subarray(12345));
  await done;
  t.true(Buffer.concat(got).equals(data));
  t.is(maxFrame, MAX_FRAME_LEN);
  p.client.destroy();
});

test('write backpressure: a peer that does not read makes write() return false until it catches up', async (t) => {
  const p = await pair();
  p.client.pause();
  const chunk = crypto.randomBytes(1 << 20);
  let written = 0;
  while (p.server.write(chunk)) {
    written += chunk.length;
    if (written > 64 << 20) break;
  }
  written += chunk.length;
  t.true(written <= 64 << 20, 'write() never signalled backpressure');
  const drained = new Promise<void>((resolve) => p.server.once('drain', resolve));
  const reader = new FrameReader();
  let received = 0;
  const all = new Promise<void>((resolve) => {
    p.client.on('data', (c: Buffer) => {
      for (const ct of reader.push(c)) received += p.rx.decrypt(ct).length;
      if (received === written) resolve();
    });
  });
  p.client.resume();
  await drained;
  await all;
  t.is(received, written);
  p.client.destroy();
});

test('read backpressure: a consumer that does not read stops the socket instead of buffering everything', async (t) => {
  const p = await pair();
  const data = crypto.randomBytes(16 << 20);
  const wire = frames(p.tx, data);
  p.server.pause();
  p.client.write(wire);
  // Give the bytes time to flow as far as they can; with backpressure they stop in the kernel and the client.
  await new Promise((r) => setTimeout(r, 300));
  t.true(p.server.readableLength < 256 * 1024, `server buffered ${p.server.readableLength} bytes`);
  const hash = crypto.createHash('sha256');
  let n = 0;
  await new Promise<void>((resolve) => {
    p.server.on('data', (c: Buffer) => {
      hash.update(c);
      n += c.length;
      if (n === data.length) resolve();
    });
    p.server.resume();
  });
  t.is(hash.digest('hex'), crypto.createHash('sha256').update(data).digest('hex'));
  p.client.destroy();
});
