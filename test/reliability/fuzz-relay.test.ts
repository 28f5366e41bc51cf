// Fuzzing the relay as a process, through the router: random DERP frames from a logged-in client (known and unknown
// types, lying lengths, oversize bodies, mesh frames), random bytes instead of a login, random ClientInfo bodies, and
// random or bit-flipped STUN datagrams on its UDP port. Each bad input ends at most the connection that sent it; two
// clients relaying packets to each other before and after every batch show the relay kept working for everyone.
import dgram from 'node:dgram';
import net from 'node:net';
import crypto from 'node:crypto';
import path from 'node:path';
import test from 'ava';
import fc from 'fast-check';
import { AdminClient } from '../../shared/admin-client.ts';
import { DerpClient } from '../../services/relay/src/derp-client.ts';
import { encodeFrame, FrameType } from '../../services/relay/src/frames.ts';
import { bindingRequest, parseBindingRequest, parseBindingResponse } from '../../services/relay/src/stun.ts';
import { serverKey } from '../harness/control-client.ts';
import { batches, FUZZ_BATCHES } from './lib/fuzz-batches.ts';
import { startImage, type Image } from '../harness/image.ts';
import { SimNode } from './lib/sim-node.ts';

const who = { actor: 'reliability-test', ip: '' };
let image: Image;
const members: SimNode[] = [];

test.before(async () => {
  image = await startImage({ services: ['coordination', 'relay'], env: { HSE_STUN_LISTEN: '127.0.0.1' } });
  const admin = new AdminClient(path.join(image.runDir, 'coordination-admin.sock'));
  await admin.createUser(who, 'relay');
  const key = (await admin.createPreAuthKey(who, { user: 'relay', reusable: true, expiresInSeconds: 3600 })).key;
  const pub = await serverKey(image.url);
  for (let i = 0; i < 3; i++) {
    const n = new SimNode({ port: image.port, serverPublic: pub, hostname: `relay-${i}` });
    await n.register(key);
    n.breakConnection();
    members.push(n);
  }
});

test.after.always(async () => {
  await image?.stop();
});

const connect = (n: SimNode) => DerpClient.connect({ host: '127.0.0.1', port: image.port, privateKey: n.nodePrivate });

/** Two members relay a packet each way: the relay works for everyone else. */
async function relayWorks(t: { true: (v: boolean, m?: string) => void; is: (a: unknown, b: unknown, m?: string) => void }, label: string): Promise<void> {
  t.is(image.procs.relay!.proc.exitCode, null, `${label}: relay still running`);
  const [a, b] = [await connect(members[0]), await connect(members[1])];
  try {
    await a.waitFor('serverInfo');
    await b.waitFor('serverInfo');
    const msg = crypto.randomBytes(64);
    a.send(b.publicKey, msg);
    const got = await b.waitFor('packet', (m) => m.data.equals(msg));
    b.send(a.publicKey, got.data);
    await a.waitFor('packet', (m) => m.data.equals(msg));
    t.true(true, `${label}: packets relayed both ways`);
  } finally {
    a.close();
    b.close();
  }
}

const knownTypes = Object.values(FrameType) as number[];
const frame = fc
  .record({
    type: fc.oneof({ arbitrary: fc.constantFrom(...knownTypes), weight: 3 }, { arbitrary: fc.integer({ min: 0, max: 255 }), weight: 1 }),
    body: fc.oneof(
      { arbitrary: fc.uint8Array({ maxLength: 200 }), weight: 5 },
      { arbitrary: fc.uint8Array({ minLength: 60_000, maxLength: 70_000 }), weight: 1 },
    ),
    lie: fc.oneof(
      { arbitrary: fc.constant(0), weight: 4 },
      { arbitrary: fc.integer({ min: -4, max: 4 }), weight: 1 },
      { arbitrary: fc.constant(0x7fffffff), weight: 1 },
    ),
  })
  .map(({ type, body, lie }) => {
    const f = encodeFrame(type, body);
    if (lie !== 0) f.writeUInt32BE(lie === 0x7fffffff ? lie : Math.max(0, body.length + lie), 1);
    return f;
  });

test.serial('random frames from a logged-in client end that connection at most; the relay keeps relaying for others', async (t) => {
  await relayWorks(t, 'before');
  let closedByRelay = 0;
  await batches(t, 'DERP frames after login', 'relay', image.procs.relay!.proc.pid!, 100, () =>
    fc.assert(
      fc.asyncProperty(fc.array(frame, { minLength: 1, maxLength: 6 }), async (frames) => {
        const c = await connect(members[2]);
        try {
          await c.waitFor('serverInfo');
          for (const f of frames) c.writeRaw(f);
          // A frame that is malformed for its type closes the connection at once; a body still owed (a lying
          // length) is simply waited for. Either way only this connection is affected.
          await Promise.race([c.closed, new Promise((r) => setTimeout(r, 150))]);
          if (c.isClosed) closedByRelay++;
        } finally {
          c.close();
        }
      }),
      { numRuns: 100 },
    ),
  );
  t.log(`${closedByRelay}/${100 * FUZZ_BATCHES} connections closed by the relay for a malformed frame`);
  await relayWorks(t, 'after frame fuzzing');
});

/** A raw DERP upgrade through the router that stops after the server's greeting: the pre-login state. */
function rawDerp(): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const s = net.connect(image.port, '127.0.0.1');
    let buf = Buffer.alloc(0);
    s.on('error', reject);
    s.on('connect', () => s.write('GET /derp HTTP/1.1\r\nHost: relay\r\nUpgrade: DERP\r\nConnection: Upgrade\r\n\r\n'));
    const onData = (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      const i = buf.indexOf('\r\n\r\n');
      // 101 head, then the ServerKey frame: 5-byte header + 8-byte magic + 32-byte key.
      if (i >= 0 && buf.length >= i + 4 + 45) {
        s.off('data', onData);
        resolve(s);
      }
    };
    s.on('data', onData);
  });
}

function closedWithin(s: net.Socket, ms: number): Promise<boolean> {
  if (s.destroyed) return Promise.resolve(true);
  return new Promise((resolve) => {
    const t = setTimeout(() => resolve(false), ms);
    s.once('close', () => {
      clearTimeout(t);
      resolve(true);
    });
  });
}

test.serial('random bytes or a random ClientInfo instead of a login close that connection; the relay keeps relaying', async (t) => {
  let closed = 0;
  await batches(t, 'bytes or ClientInfo instead of a login', 'relay', image.procs.relay!.proc.pid!, 80, () =>
    fc.assert(
      fc.asyncProperty(
        fc.oneof(
          fc.uint8Array({ minLength: 1, maxLength: 3000 }).map((b) => Buffer.from(b)),
          fc.uint8Array({ maxLength: 400 }).map((b) => encodeFrame(FrameType.ClientInfo, b)),
        ),
        async (bytes) => {
          const s = await rawDerp();
          s.on('error', () => {});
          s.resume();
          // The garbage, then zeros enough to complete any login frame it announced, so each case is decided now
          // rather than at the login deadline (which the next test shows on its own).
          s.write(bytes);
          s.write(Buffer.alloc(70_000));
          if (await closedWithin(s, 5_000)) closed++;
          s.destroy();
        },
      ),
      { numRuns: 80 },
    ),
  );
  t.is(closed, 80 * FUZZ_BATCHES, 'every connection that sent garbage instead of a login was closed');
  await relayWorks(t, 'after login fuzzing');
});

test.serial('a client that never logs in is closed at the login deadline', async (t) => {
  const s = await rawDerp();
  s.on('error', () => {});
  s.resume();
  s.write(Buffer.from([FrameType.ClientInfo, 0, 0, 0, 100]));
  t.true(await closedWithin(s, 15_000), 'closed within the 10 s login deadline');
});

function udp(): Promise<dgram.Socket> {
  return new Promise((resolve) => {
    const s = dgram.createSocket('udp4');
    s.bind(0, '127.0.0.1', () => resolve(s));
  });
}

test('STUN parser: any datagram gives a binding request or null, never an exception', (t) => {
  fc.assert(
    fc.property(fc.uint8Array({ maxLength: 600 }), (b) => {
      const r = parseBindingRequest(b);
      return r === null || r.txId.length === 12;
    }),
    { numRuns: 5_000 },
  );
  t.pass();
});

test.serial('STUN on the real port: random and bit-flipped datagrams get no crash; valid requests are still answered', async (t) => {
  const s = await udp();
  const answers: Buffer[] = [];
  s.on('message', (m) => answers.push(m));
  const valid = bindingRequest(crypto.randomBytes(12));
  await batches(t, 'STUN datagrams (random, bit-flipped)', 'relay', image.procs.relay!.proc.pid!, 2_000, () =>
    fc.assert(
      fc.asyncProperty(
        fc.oneof(
          fc.uint8Array({ maxLength: 1400 }).map((b) => Buffer.from(b)),
          fc.tuple(fc.nat(valid.length - 1), fc.integer({ min: 1, max: 255 })).map(([i, x]) => {
            const m = Buffer.from(valid);
            m[i] ^= x;
            return m;
          }),
        ),
        async (d) => {
          await new Promise<void>((r) => s.send(d, image.stunPort, '127.0.0.1', () => r()));
        },
      ),
      { numRuns: 2_000 },
    ),
  );
  // Afterwards a proper request is answered with our own address and port.
  const tx = crypto.randomBytes(12);
  answers.length = 0;
  for (let i = 0; i < 20 && !answers.some((a) => parseBindingResponse(a)?.txId.equals(tx)); i++) {
    s.send(bindingRequest(tx), image.stunPort, '127.0.0.1');
    await new Promise((r) => setTimeout(r, 100));
  }
  const res = answers.map(parseBindingResponse).find((a) => a?.txId.equals(tx));
  t.truthy(res, 'a valid binding request is answered after the fuzzing');
  t.is(res?.address, '127.0.0.1');
  t.is(res?.port, s.address().port);
  t.is(image.procs.relay!.proc.exitCode, null);
  s.close();
});
