// STUN from real UDP sockets to the relay process: IPv4 on 127.0.0.1 and IPv6 on ::1, answered with the address
// and port the relay saw; garbage is ignored and the server carries on.
import dgram from 'node:dgram';
import crypto from 'node:crypto';
import test from 'ava';
import { bindingRequest, bindingResponse, parseBindingResponse, type BindingResponse } from '../../services/relay/src/stun.ts';
import { startRelay, type TestRelay } from './harness.ts';

let relay: TestRelay;
test.before(async () => {
  relay = await startRelay(null);
});
test.after.always(async () => {
  await relay?.stop();
});

async function client(type: 'udp4' | 'udp6', address: string): Promise<dgram.Socket> {
  const s = dgram.createSocket({ type, ipv6Only: type === 'udp6' });
  await new Promise<void>((resolve) => s.bind(0, address, resolve));
  return s;
}

function nextAnswer(s: dgram.Socket): Promise<BindingResponse | null> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('no STUN answer within 10 s')), 10_000);
    s.once('message', (msg) => {
      clearTimeout(timer);
      resolve(parseBindingResponse(msg));
    });
  });
}

for (const [type, address] of [
  ['udp4', '127.0.0.1'],
  ['udp6', '::1'],
] as const) {
  test(`a binding request over ${type === 'udp4' ? 'IPv4' : 'IPv6'} is answered with the sender's address and port`, async (t) => {
    const s = await client(type, address);
    const txId = crypto.randomBytes(12);
    const answer = nextAnswer(s);
    s.send(bindingRequest(txId), relay.stunPort, address);
    const got = await answer;
    t.deepEqual(got, { txId, address, port: s.address().port });
    s.close();
  });
}

test('garbage, responses and other STUN messages are ignored; the next request is still answered', async (t) => {
  const s = await client('udp4', '127.0.0.1');
  const send = (b: Buffer) => new Promise<void>((resolve) => s.send(b, relay.stunPort, '127.0.0.1', () => resolve()));
  const answer = nextAnswer(s);
  await send(Buffer.alloc(0));
  await send(crypto.randomBytes(300));
  await send(Buffer.from('GET / HTTP/1.1\r\n\r\n'));
  await send(bindingResponse(crypto.randomBytes(12), '192.0.2.1', 1)!);
  const truncated = bindingRequest(crypto.randomBytes(12));
  await send(truncated.subarray(0, truncated.length - 3));
  const txId = crypto.randomBytes(12);
  await send(bindingRequest(txId));
  // The first answer to arrive is the one for the valid request: nothing before it was answered.
  t.deepEqual((await answer)?.txId, txId);
  t.is(relay.proc.proc.exitCode, null);
  s.close();
});
