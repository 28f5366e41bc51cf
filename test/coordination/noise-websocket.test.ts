// The websocket framing under the browser-style transport: what RFC 6455 requires of a server (masked client frames,
// no unnegotiated RSV bits, short unfragmented control frames), fragmentation, pings and the close handshake.
import test from 'ava';
import net from 'node:net';
import { WebSocketStream } from '../../shared/websocket/stream.ts';
import {
  closePayload,
  OP_BINARY,
  OP_CLOSE,
  OP_CONTINUATION,
  OP_PING,
  OP_PONG,
  OP_TEXT,
  WsFrameReader,
  WsProtocolError,
  writeWsFrame,
  type WsFrame,
} from '../../shared/websocket/frames.ts';
import { closed, readBytes } from '../harness/noise-client.ts';

const MASK = Buffer.from('a1b2c3d4', 'hex');

test('frame lengths: 7-bit, 16-bit and 64-bit forms round-trip through the reader', (t) => {
  for (const len of [0, 1, 125, 126, 65535, 65536, 200_000]) {
    const payload = Buffer.alloc(len, 7);
    const [f] = new WsFrameReader(true).push(writeWsFrame(OP_BINARY, payload, MASK));
    t.is(f.payload.length, len);
    t.true(f.payload.equals(payload));
    t.true(f.fin);
  }
});

test('the reader keeps partial frames between pushes', (t) => {
  const r = new WsFrameReader(true);
  const wire = Buffer.concat([writeWsFrame(OP_BINARY, Buffer.from('hello'), MASK), writeWsFrame(OP_PING, Buffer.from('p'), MASK)]);
  const got = [];
  for (const b of wire) got.push(...r.push(Buffer.of(b)));
  t.deepEqual(
    got.map((f) => [f.opcode, f.payload.toString()]),
    [
      [OP_BINARY, 'hello'],
      [OP_PING, 'p'],
    ],
  );
  t.is(r.pending, 0);
});

const strict: Array<[string, Buffer, number]> = [
  ['an unmasked client frame', writeWsFrame(OP_BINARY, Buffer.from('x')), 1002],
  ['reserved bits', Buffer.from([0xc2, 0x80, 0, 0, 0, 0]), 1002],
  ['an unknown opcode', Buffer.from([0x83, 0x80, 0, 0, 0, 0]), 1002],
  ['a fragmented ping', Buffer.from([0x09, 0x80, 0, 0, 0, 0]), 1002],
  ['a long ping', writeWsFrame(OP_PING, Buffer.alloc(126), MASK), 1002],
  ['a frame over the size limit', Buffer.from([0x82, 0xff, 0, 0, 0, 0, 0x10, 0, 0, 0]), 1009],
];
for (const [name, wire, code] of strict) {
  test(`reader refuses ${name} with close code ${code}`, (t) => {
    const e = t.throws(() => new WsFrameReader(true).push(wire));
    t.true(e instanceof WsProtocolError);
    t.is((e as WsProtocolError).code, code);
  });
}

async function wsPair() {
  const listener = net.createServer();
  await new Promise<void>((r) => listener.listen(0, '127.0.0.1', r));
  const accepted = new Promise<net.Socket>((r) => listener.once('connection', r));
  const client = net.connect((listener.address() as net.AddressInfo).port, '127.0.0.1');
  const socket = await accepted;
  listener.close();
  const ws = new WebSocketStream(socket);
  const fromServer = new WsFrameReader(false);
  const frames: WsFrame[] = [];
  client.on('data', (c: Buffer) => frames.push(...fromServer.push(c)));
  return { ws, client, frames, wsClosed: closed(ws), clientClosed: closed(client) };
}

test('fragmented binary messages become one byte stream; pings are answered; writes leave as binary frames', async (t) => {
  const p = await wsPair();
  const got = readBytes(p.ws, 9);
  p.client.write(
    Buffer.concat([
      writeWsFrame(OP_BINARY, Buffer.from('abc'), MASK).fill(0x02, 0, 1), // FIN cleared: first fragment
      writeWsFrame(OP_PING, Buffer.from('are you there'), MASK),
      writeWsFrame(OP_CONTINUATION, Buffer.from('def'), MASK).fill(0x00, 0, 1),
      writeWsFrame(OP_CONTINUATION, Buffer.from('ghi'), MASK),
    ]),
  );
  t.is((await got).toString(), 'abcdefghi');
  p.ws.write(Buffer.from('reply'));
  await new Promise<void>((resolve) => {
    const check = () => (p.frames.length >= 2 ? resolve() : setTimeout(check, 5));
    check();
  });
  t.deepEqual(p.frames[0], { fin: true, opcode: OP_PONG, payload: Buffer.from('are you there') });
  t.deepEqual(p.frames[1], { fin: true, opcode: OP_BINARY, payload: Buffer.from('reply') });
  p.client.destroy();
});

test('large writes leave as binary messages of at most 4096 bytes (Tailscale clients refuse messages over 32 KiB)', async (t) => {
  const p = await wsPair();
  const data = Buffer.alloc(100_000, 5);
  p.ws.write(data);
  await new Promise<void>((resolve) => {
    const check = () => (p.frames.reduce((n, f) => n + f.payload.length, 0) >= data.length ? resolve() : setTimeout(check, 5));
    check();
  });
  t.true(p.frames.every((f) => f.opcode === OP_BINARY && f.fin && f.payload.length <= 4096));
  t.true(Buffer.concat(p.frames.map((f) => f.payload)).equals(data));
  p.client.destroy();
});

test('a text frame closes with 1003', async (t) => {
  const p = await wsPair();
  p.ws.resume();
  p.client.write(writeWsFrame(OP_TEXT, Buffer.from('{}'), MASK));
  t.regex((await p.wsClosed)?.message ?? '', /binary messages only/);
  await p.clientClosed;
  t.is(p.frames[0].opcode, OP_CLOSE);
  t.is(p.frames[0].payload.readUInt16BE(0), 1003);
});

test('a continuation without a message closes with 1002', async (t) => {
  const p = await wsPair();
  p.ws.resume();
  p.client.write(writeWsFrame(OP_CONTINUATION, Buffer.from('x'), MASK));
  t.true((await p.wsClosed) instanceof WsProtocolError);
  await p.clientClosed;
  t.is(p.frames[0].payload.readUInt16BE(0), 1002);
});

test("the peer's close is echoed and ends the stream cleanly", async (t) => {
  const p = await wsPair();
  const ended = new Promise<void>((r) => p.ws.once('end', r));
  p.ws.resume();
  p.client.write(writeWsFrame(OP_CLOSE, closePayload(1000, 'bye'), MASK));
  await ended;
  await p.clientClosed;
  t.is(p.frames[0].opcode, OP_CLOSE);
  t.is(p.frames[0].payload.readUInt16BE(0), 1000);
});
