// Through the real router process: bodies stream both ways without buffering or caps, and nothing on the body side
// of a request times out. The router here has a 1 s head timeout, so every pause below is longer than the only
// clock the router has: what stays open is open because proxied traffic has no clock at all.
import crypto from 'node:crypto';
import http from 'node:http';
import net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import test from 'ava';
import { startRouterRig, type RouterRig } from './client.ts';
import { pattern } from './stand-in.ts';

let rig: RouterRig;

test.before(async () => {
  rig = await startRouterRig({ env: { HSE_HEADER_TIMEOUT: '1' } });
});

test.after.always(async () => {
  await rig?.stop();
});

const PAUSE_MS = 1_500;

test('a long-poll stays open across pauses and delivers each chunk as the service writes it', async (t) => {
  const chunks: string[] = [];
  let wake: (() => void) | null = null;
  const ended = new Promise<number>((resolve, reject) => {
    const req = http.get(`${rig.image.url}/machine/longpoll`, { agent: false }, (res) => {
      res.setEncoding('utf8');
      res.on('data', (d: string) => {
        chunks.push(d);
        wake?.();
      });
      res.on('end', () => resolve(res.statusCode!));
      res.on('error', reject);
    });
    req.on('error', reject);
  });
  await rig.standIns.coordination.waitHeld(1);
  const words = ['keep', 'alive', 'map', 'update'];
  for (const [i, w] of words.entries()) {
    await sleep(PAUSE_MS);
    rig.standIns.coordination.push(w);
    // The chunk must arrive while the response is still open: nothing holds it back until the end.
    while (chunks.join('') !== words.slice(0, i + 1).join('')) await new Promise<void>((r) => (wake = r));
  }
  rig.standIns.coordination.end();
  t.is(await ended, 200);
  t.is(chunks.join(''), 'keepalivemapupdate');
});

test('a request body that trickles in with long pauses still arrives whole', async (t) => {
  const reply = await new Promise<string>((resolve, reject) => {
    const req = http.request(`${rig.image.url}/console/upload`, { method: 'POST', agent: false }, (res) => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d));
      res.on('end', () => resolve(body));
    });
    req.on('error', reject);
    void (async () => {
      for (const piece of ['slow', 'ly', ' up', 'loaded']) {
        req.write(piece);
        await sleep(PAUSE_MS);
      }
      req.end();
    })();
  });
  const expected = crypto.createHash('sha256').update('slowly uploaded').digest('hex');
  t.deepEqual(JSON.parse(reply), { bytes: 15, sha256: expected });
});

test('a 100 MB upload streams through (sent in pieces, never held whole on either side)', async (t) => {
  const piece = pattern(64 * 1024, 3);
  const pieces = 1600; // 1600 x 64 KiB = 100 MiB
  const hash = crypto.createHash('sha256');
  const reply = await new Promise<string>((resolve, reject) => {
    const req = http.request(
      `${rig.image.url}/upload`,
      { method: 'POST', agent: false, headers: { 'content-length': String(piece.length * pieces) } },
      (res) => {
        let body = '';
        res.on('data', (d: Buffer) => (body += d));
        res.on('end', () => resolve(body));
      },
    );
    req.on('error', reject);
    let sent = 0;
    const more = () => {
      while (sent < pieces) {
        sent++;
        hash.update(piece);
        if (!req.write(piece)) return void req.once('drain', more);
      }
      req.end();
    };
    more();
  });
  t.deepEqual(JSON.parse(reply), { bytes: piece.length * pieces, sha256: hash.digest('hex') });
});

test('a chunked upload without Content-Length streams through', async (t) => {
  const piece = pattern(10_000, 5);
  const hash = crypto.createHash('sha256');
  const reply = await new Promise<string>((resolve, reject) => {
    const req = http.request(`${rig.image.url}/derp/upload`, { method: 'PUT', agent: false }, (res) => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d));
      res.on('end', () => resolve(body));
    });
    req.on('error', reject);
    for (let i = 0; i < 50; i++) {
      req.write(piece);
      hash.update(piece);
    }
    req.end();
  });
  t.deepEqual(JSON.parse(reply), { bytes: 500_000, sha256: hash.digest('hex') });
});

test('a 20 MB download streams back intact', async (t) => {
  const total = 20 * 1024 * 1024;
  const got = crypto.createHash('sha256');
  let bytes = 0;
  await new Promise<void>((resolve, reject) => {
    http
      .get(`${rig.image.url}/console/download?bytes=${total}`, { agent: false }, (res) => {
        res.on('data', (d: Buffer) => {
          bytes += d.length;
          got.update(d);
        });
        res.on('end', resolve);
        res.on('error', reject);
      })
      .on('error', reject);
  });
  const want = crypto.createHash('sha256');
  const block = pattern(64 * 1024);
  for (let left = total; left > 0; left -= block.length) want.update(left >= block.length ? block : block.subarray(0, left));
  t.is(bytes, total);
  t.is(got.digest('hex'), want.digest('hex'));
});

test('an HTTP/1.0 client gets a streamed answer unchunked, ended by the router closing the connection', async (t) => {
  const s = net.connect(rig.image.port, '127.0.0.1');
  let text = '';
  s.setEncoding('latin1');
  s.on('data', (d: string) => (text += d));
  const closed = new Promise<void>((resolve) => s.on('close', () => resolve()));
  s.write('GET /console/longpoll HTTP/1.0\r\nHost: h\r\n\r\n');
  await rig.standIns.console.waitHeld(1);
  rig.standIns.console.push('first ');
  rig.standIns.console.push('second');
  rig.standIns.console.end();
  await closed;
  const [head, body] = text.split('\r\n\r\n');
  t.regex(head, /^HTTP\/1\.1 200 /);
  t.notRegex(head, /transfer-encoding/i, 'an HTTP/1.0 client cannot read chunked framing');
  t.is(body, 'first second');
});
