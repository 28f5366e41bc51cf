// /ts2021 over real loopback TCP: the native upgrade (POST and GET), the websocket variant, an upgrade that Node
// sees as a plain request, and every refusal a client or a broken proxy can provoke. The server must answer each
// refusal in a way the client can act on, log why, and keep serving everyone else.
import test from 'ava';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http2 from 'node:http2';
import os from 'node:os';
import path from 'node:path';
import type { Duplex } from 'node:stream';
import { websocketAccept } from '../../services/coordination/src/noise/upgrade-request.ts';
import { generatePair } from '../../services/coordination/src/noise/x25519.ts';
import { closed, dialControl, readBytes, startControlServer, type ControlServer, type DialResult } from '../harness/noise-client.ts';

function ok(t: { fail(m: string): void }, r: DialResult): Extract<DialResult, { kind: 'ok' }> {
  if (r.kind !== 'ok') {
    t.fail(`dial failed: ${JSON.stringify(r)}`);
    throw new Error('dial failed');
  }
  return r;
}

async function echoCheck(conn: Duplex, size: number): Promise<boolean> {
  const data = crypto.randomBytes(size);
  conn.write(data);
  const back = await readBytes(conn, size);
  return back.equals(data);
}

/** The server-side connection of a dial (tests share one server and run concurrently, so match by key). */
function acceptedFor(s: ControlServer, r: { machine: { publicKey: Buffer } }) {
  const a = s.accepted.find((c) => c.info.machineKey.equals(r.machine.publicKey));
  if (!a) throw new Error('server handed up no connection for this client');
  return a;
}

let srv: ControlServer;
test.before(async () => {
  srv = await startControlServer();
});
test.after.always(async () => {
  await srv?.close();
});

test('native POST upgrade: exact 101, early payload with a node-key challenge, echo through the encrypted stream', async (t) => {
  const r = ok(t, await dialControl({ port: srv.port, serverPublic: srv.key.publicKey }));
  t.is(r.raw101, 'HTTP/1.1 101 Switching Protocols\r\nUpgrade: tailscale-control-protocol\r\nConnection: upgrade');
  t.regex((r.early as { nodeKeyChallenge: string }).nodeKeyChallenge, /^chalpub:[0-9a-f]{64}$/);
  const { info } = acceptedFor(srv, r);
  t.deepEqual(info.machineKey, r.machine.publicKey);
  t.is(info.capVersion, 142);
  t.true(await echoCheck(r.conn, 200_000));
  r.conn.destroy();
});

test('native GET upgrade works too', async (t) => {
  const r = ok(t, await dialControl({ port: srv.port, serverPublic: srv.key.publicKey, method: 'GET' }));
  t.true(await echoCheck(r.conn, 10));
  r.conn.destroy();
});

test('the client address comes from the router header only', async (t) => {
  const r = ok(
    t,
    await dialControl({
      port: srv.port,
      serverPublic: srv.key.publicKey,
      extraHeaders: { 'X-Hse-Client-Ip': '100.64.9.9', 'X-Forwarded-For': '198.51.100.7' },
    }),
  );
  t.is(acceptedFor(srv, r).info.clientIp, '100.64.9.9');
  const bare = ok(t, await dialControl({ port: srv.port, serverPublic: srv.key.publicKey, extraHeaders: { 'X-Forwarded-For': '198.51.100.7' } }));
  t.is(acceptedFor(srv, bare).info.clientIp, '');
  r.conn.destroy();
  bare.conn.destroy();
});

test('websocket variant: subprotocol echoed, correct accept key, no early payload, binary stream both ways', async (t) => {
  const r = ok(t, await dialControl({ port: srv.port, serverPublic: srv.key.publicKey, transport: 'websocket' }));
  t.regex(r.raw101, /^HTTP\/1\.1 101 Switching Protocols\r\n/);
  t.regex(r.raw101, /\r\nSec-WebSocket-Protocol: tailscale-control-protocol(\r\n|$)/);
  t.regex(r.raw101, /\r\nSec-WebSocket-Accept: [A-Za-z0-9+/=]{28}(\r\n|$)/);
  t.is(r.early, undefined);
  t.deepEqual(acceptedFor(srv, r).info.machineKey, r.machine.publicKey);
  t.true(await echoCheck(r.conn, 300_000));
  r.conn.destroy();
});

test('websocket accept key follows RFC 6455', (t) => {
  // The example from RFC 6455 section 1.3.
  t.is(websocketAccept('dGhlIHNhbXBsZSBub25jZQ=='), 's3pPLMBiTxaQ9kYGzzhZRbK+xOo=');
});

for (const via of ['tcp', 'unix'] as const) {
  test(`an upgrade whose Connection lacks "upgrade" is taken over from the HTTP server and carries HTTP/2 (${via})`, async (t) => {
    let socketPath: string | undefined;
    if (via === 'unix') {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hse-noise-'));
      t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
      socketPath = path.join(dir, 'coordination.sock');
    }
    const h2srv = await startControlServer({
      socketPath,
      serve(conn) {
        const h2 = http2.createServer((req, res) => {
          if (req.url === '/echo') req.pipe(res);
          else res.end(`hello ${req.url}`);
        });
        h2.emit('connection', conn);
      },
    });
    t.teardown(() => h2srv.close());
    const r = ok(t, await dialControl({ port: h2srv.port, socketPath, serverPublic: h2srv.key.publicKey, connection: 'keep-alive' }));
    t.truthy(r.early);
    const client = http2.connect('http://control', { createConnection: () => r.conn });
    client.on('error', () => {});
    const get = (p: string, body?: Buffer) =>
      new Promise<Buffer>((resolve, reject) => {
        const req = client.request({ ':method': body ? 'POST' : 'GET', ':path': p });
        const chunks: Buffer[] = [];
        req.on('data', (c: Buffer) => chunks.push(c));
        req.on('end', () => resolve(Buffer.concat(chunks)));
        req.on('error', reject);
        req.end(body);
      });
    const body = crypto.randomBytes(500_000);
    const results = await Promise.all([get('/echo', body), ...Array.from({ length: 10 }, (_, i) => get(`/x${i}`))]);
    t.true(results[0].equals(body));
    for (let i = 0; i < 10; i++) t.is(results[i + 1].toString(), `hello /x${i}`);
    t.true(h2srv.log.lines.some((l) => /taken over/.test(l.msg)));
    // The HTTP server no longer counts the socket as one of its idle keep-alive connections (server.close() calls this).
    h2srv.server.closeIdleConnections();
    t.is((await get('/later')).toString(), 'hello /later');
    client.close();
  });
}

test('a client below capability version 113 gets an error frame saying it is too old, and the server keeps serving', async (t) => {
  const r = await dialControl({ port: srv.port, serverPublic: srv.key.publicKey, capVersion: 112 });
  t.is(r.kind, 'error-frame');
  if (r.kind === 'error-frame') t.regex(r.message, /too old.*113/);
  t.true(srv.log.lines.some((l) => l.msg === 'control upgrade refused' && /capability version 112/.test(String(l.fields.reason))));
  const again = ok(t, await dialControl({ port: srv.port, serverPublic: srv.key.publicKey, capVersion: 113 }));
  t.true(await echoCheck(again.conn, 100));
  again.conn.destroy();
});

test('a client that pinned the wrong server key is closed without an explanation after the 101', async (t) => {
  const r = await dialControl({ port: srv.port, serverPublic: generatePair().publicKey });
  t.is(r.kind, 'closed');
  t.true(srv.log.lines.some((l) => /did not authenticate/.test(String(l.fields.reason))));
});

test('a handshake header of the wrong size gets an error frame', async (t) => {
  const r = await dialControl({ port: srv.port, serverPublic: srv.key.publicKey, handshakeText: crypto.randomBytes(48).toString('base64') });
  t.deepEqual(r, { kind: 'error-frame', message: 'wrong handshake initiation size' });
});

const refusals: Array<[string, Parameters<typeof dialControl>[0] extends infer O ? Partial<O> : never, number, RegExp]> = [
  [
    'missing handshake header',
    { headers: { Host: 'x', Upgrade: 'tailscale-control-protocol', Connection: 'upgrade' } },
    400,
    /missing X-Tailscale-Handshake header/,
  ],
  ['handshake header not base64', { handshakeText: 'not*base64!' }, 400, /invalid X-Tailscale-Handshake/],
  ['unknown next protocol', { headers: { Host: 'x', Upgrade: 'h2c', Connection: 'upgrade', 'X-Tailscale-Handshake': 'AAAA' } }, 400, /unknown next protocol/],
  ['PUT', { method: 'PUT' }, 405, /use POST/],
  [
    'websocket without the subprotocol',
    {
      transport: 'websocket',
      headers: { Host: 'x', Upgrade: 'websocket', Connection: 'Upgrade', 'Sec-WebSocket-Key': 'dGhlIHNhbXBsZSBub25jZQ==', 'Sec-WebSocket-Version': '13' },
    },
    400,
    /subprotocol/,
  ],
  [
    'websocket with a bad key',
    {
      transport: 'websocket',
      headers: {
        Host: 'x',
        Upgrade: 'websocket',
        Connection: 'Upgrade',
        'Sec-WebSocket-Key': 'short',
        'Sec-WebSocket-Version': '13',
        'Sec-WebSocket-Protocol': 'tailscale-control-protocol',
      },
    },
    400,
    /Sec-WebSocket-Key/,
  ],
  ['websocket over POST', { transport: 'websocket', method: 'POST' }, 405, /GET/],
];
for (const [name, o, status, body] of refusals) {
  test(`refused before the upgrade: ${name} -> ${status} with a short text`, async (t) => {
    const r = await dialControl({ port: srv.port, serverPublic: srv.key.publicKey, ...o });
    t.is(r.kind, 'http');
    if (r.kind !== 'http') return;
    t.is(r.status, status);
    t.regex(r.body, body);
    t.regex(r.head, /\r\nContent-Type: text\/plain; charset=utf-8\r\n/);
  });
}

test('the websocket handshake parameter is required', async (t) => {
  // A websocket request whose URL carries no handshake: built by hand, since dialControl always adds one.
  const r = await dialControl({
    port: srv.port,
    serverPublic: srv.key.publicKey,
    transport: 'websocket',
    handshakeText: '',
  });
  t.is(r.kind, 'http');
  if (r.kind === 'http') t.regex(r.body, /missing X-Tailscale-Handshake query parameter/);
});

test('a connection that completes the handshake but never sends a frame is closed at the deadline', async (t) => {
  const s = await startControlServer({ handshakeTimeoutMs: 150 });
  t.teardown(() => s.close());
  const r = ok(t, await dialControl({ port: s.port, serverPublic: s.key.publicKey }));
  await closed(r.socket);
  t.true(s.log.lines.some((l) => /handshake deadline/.test(l.msg)));
});

test('the deadline does not touch a connection once the client has sent a frame', async (t) => {
  // A deadline long enough that a loaded machine still gets the first frame in before it, and a wait well past it.
  const s = await startControlServer({ handshakeTimeoutMs: 1500 });
  t.teardown(() => s.close());
  const r = ok(t, await dialControl({ port: s.port, serverPublic: s.key.publicKey }));
  t.true(await echoCheck(r.conn, 10));
  await new Promise((resolve) => setTimeout(resolve, 2500));
  t.true(await echoCheck(r.conn, 10));
  t.false(s.log.lines.some((l) => /handshake deadline/.test(l.msg)));
  r.conn.destroy();
});
