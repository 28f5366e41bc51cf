// Through the real router process: HTTP/1.1 upgrades of any method and protocol become raw tunnels, byte for byte in
// both directions, with the bytes sent along with the head passed on and both ends closed together.
import crypto from 'node:crypto';
import test from 'ava';
import { CLIENT_IP_HEADER } from '../../shared/paths.ts';
import { connect, Received, startRouterRig, type RouterRig } from './client.ts';
import { greeting } from './stand-in.ts';

let rig: RouterRig;

test.before(async () => {
  rig = await startRouterRig();
});

test.after.always(async () => {
  await rig?.stop();
});

/** Sends `count` random bytes in pieces and waits until all of them came back; returns both. */
async function echoRoundTrip(got: Received, offset: number, count: number): Promise<{ sent: Buffer; back: Buffer }> {
  const sent = crypto.randomBytes(count);
  for (let i = 0; i < count; i += 7919) got.socket.write(sent.subarray(i, Math.min(count, i + 7919)));
  const all = await got.until((b) => b.length >= offset + count, `${count} echoed bytes`);
  return { sent, back: all.subarray(offset, offset + count) };
}

function lastSeen(service: 'coordination' | 'console' | 'relay', url: string) {
  const s = rig.standIns[service].seen.filter((x) => x.url === url);
  return s[s.length - 1];
}

test('POST /ts2021 with Upgrade: tailscale-control-protocol is tunnelled byte for byte both ways', async (t) => {
  const s = await connect(rig.image.port);
  const got = new Received(s);
  // Bytes right behind the head, in the same write: they must reach the service after its 101, not get lost.
  const early = Buffer.from([0x00, 0x01, 0xff, 0x0d, 0x0a, 0x0d, 0x0a, 0x7f]);
  s.write(
    Buffer.concat([
      Buffer.from(
        'POST /ts2021?test=bytes HTTP/1.1\r\nHost: vpn.example.com\r\nUpgrade: tailscale-control-protocol\r\nConnection: upgrade\r\n' +
          'X-Tailscale-Handshake: AAEC\r\nX-Forwarded-For: 6.6.6.6\r\n\r\n',
      ),
      early,
    ]),
  );
  const { head, rest } = await got.head();
  t.regex(head, /^HTTP\/1\.1 101 Switching Protocols\r\n/);
  t.true(head.includes('\r\nUpgrade: tailscale-control-protocol\r\n'), 'Upgrade is echoed exactly');
  const greet = Buffer.from(greeting('coordination'));
  await got.until((b) => b.length >= head.length + greet.length + early.length);
  t.deepEqual(got.bytes.subarray(head.length, head.length + greet.length), greet, 'service -> client bytes');
  t.deepEqual(got.bytes.subarray(head.length + greet.length, head.length + greet.length + early.length), early, 'early client bytes');
  void rest;

  const { sent, back } = await echoRoundTrip(got, head.length + greet.length + early.length, 1 << 20);
  t.true(sent.equals(back), '1 MiB of random bytes came back unchanged');

  const seen = lastSeen('coordination', '/ts2021?test=bytes');
  t.is(seen.method, 'POST');
  t.true(seen.upgrade);
  t.is(seen.headers['x-tailscale-handshake'], 'AAEC');
  t.is(seen.headers[CLIENT_IP_HEADER], '127.0.0.1');
  t.is(seen.headers['x-forwarded-for'], '127.0.0.1');
  t.is(seen.headers.host, 'vpn.example.com');
  s.destroy();
});

test('GET /derp with Upgrade: DERP is tunnelled to the relay byte for byte both ways', async (t) => {
  const s = await connect(rig.image.port);
  const got = new Received(s);
  s.write('GET /derp HTTP/1.1\r\nHost: vpn.example.com\r\nUpgrade: DERP\r\nConnection: Upgrade\r\nDerp-Fast-Start: 1\r\n\r\n');
  const { head } = await got.head();
  t.regex(head, /^HTTP\/1\.1 101 /);
  t.true(head.includes('\r\nUpgrade: DERP\r\n'));
  t.true(head.includes('\r\nX-Stand-In: relay\r\n'));
  const greet = greeting('relay').length;
  await got.until((b) => b.length >= head.length + greet);
  const { sent, back } = await echoRoundTrip(got, head.length + greet, 300_000);
  t.true(sent.equals(back));
  t.is(lastSeen('relay', '/derp').headers['derp-fast-start'], '1');
  s.destroy();
});

test('a WebSocket upgrade under /console reaches the console as a tunnel', async (t) => {
  const s = await connect(rig.image.port);
  const got = new Received(s);
  s.write(
    'GET /console/live HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n',
  );
  const { head } = await got.head();
  t.true(head.includes('\r\nUpgrade: websocket\r\n'));
  t.true(head.includes('\r\nX-Stand-In: console\r\n'));
  s.destroy();
});

for (const connection of ['close', 'keep-alive', null]) {
  test(`an upgrade whose Connection header is ${connection ?? 'absent'} is still tunnelled`, async (t) => {
    const s = await connect(rig.image.port);
    const got = new Received(s);
    const conn = connection === null ? '' : `Connection: ${connection}\r\n`;
    s.write(`POST /ts2021?connection=${connection} HTTP/1.1\r\nHost: h\r\nUpgrade: tailscale-control-protocol\r\n${conn}Content-Length: 0\r\n\r\n`);
    const { head } = await got.head();
    t.regex(head, /^HTTP\/1\.1 101 /);
    t.true(head.includes('\r\nUpgrade: tailscale-control-protocol\r\n'));
    const greet = greeting('coordination').length;
    await got.until((b) => b.length >= head.length + greet);
    const { sent, back } = await echoRoundTrip(got, head.length + greet, 200_000);
    t.true(sent.equals(back));
    const seen = lastSeen('coordination', `/ts2021?connection=${connection}`);
    t.true(seen.upgrade, 'the service got a proper upgrade request');
    t.regex(String(seen.headers.connection), /upgrade/i);
    s.destroy();
  });
}

test('an upgrade the service refuses is answered as the service answered, then closed', async (t) => {
  const s = await connect(rig.image.port);
  const got = new Received(s);
  s.write('GET /derp/refuse HTTP/1.1\r\nHost: h\r\nUpgrade: DERP\r\nConnection: Upgrade\r\n\r\n');
  await got.closed;
  t.regex(got.text, /^HTTP\/1\.1 404 Not Found\r\n/);
  t.true(got.text.endsWith('refused\n'));
});

test('when the service closes the tunnel, the client side is closed too', async (t) => {
  const s = await connect(rig.image.port);
  const got = new Received(s);
  s.write('GET /derp/bye HTTP/1.1\r\nHost: h\r\nUpgrade: DERP\r\nConnection: Upgrade\r\n\r\n');
  await got.closed;
  t.regex(got.text, /^HTTP\/1\.1 101 /);
  t.true(got.text.endsWith(greeting('relay')), 'the bytes sent before the close arrive in full');
});

test('when the client closes the tunnel, the service side is closed too', async (t) => {
  const s = await connect(rig.image.port);
  const got = new Received(s);
  s.write('GET /derp/closing HTTP/1.1\r\nHost: h\r\nUpgrade: DERP\r\nConnection: Upgrade\r\n\r\n');
  await got.head();
  // The stand-in echoes; after our FIN it ends its side, which the router passes back as a close.
  s.end('last words');
  await got.closed;
  t.true(got.text.endsWith('last words'));
});

test('an upgrade to a service that is down gets 503 naming the service', async (t) => {
  const down = await startRouterRig();
  await down.standIns.relay.close();
  try {
    const s = await connect(down.image.port);
    const got = new Received(s);
    s.write('GET /derp HTTP/1.1\r\nHost: h\r\nUpgrade: DERP\r\nConnection: Upgrade\r\n\r\n');
    await got.closed;
    t.regex(got.text, /^HTTP\/1\.1 503 Service Unavailable\r\n/);
    t.regex(got.text, /relay service is unavailable/);
  } finally {
    await down.stop();
  }
});
