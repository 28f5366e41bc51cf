// Through the real router process: a service that is down or breaks, and hostile or broken clients. Each case ends with
// the router still serving, since one bad connection must never take the others down.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import test from 'ava';
import { NODE } from '../harness/process.ts';
import { connect, Received, request, startRouterRig, type RouterRig } from './client.ts';

let rig: RouterRig;

test.before(async () => {
  // A 1 s head timeout keeps the slow-header cases short; the default is 30 s.
  rig = await startRouterRig({ env: { HSE_HEADER_TIMEOUT: '1' } });
});

test.after.always(async () => {
  await rig?.stop();
});

async function stillServing(t: { is: (a: unknown, b: unknown, m?: string) => void }): Promise<void> {
  const r = await request(`${rig.image.url}/key`);
  t.is(r.status, 200, 'the router still serves other requests');
}

test.serial('a service that is not running (no socket): 503 naming it', async (t) => {
  await rig.standIns.console.close();
  try {
    const r = await request(`${rig.image.url}/console/login`);
    t.is(r.status, 503);
    t.is(r.body, 'hse: the console service is unavailable (not running); try again shortly\n');
    t.is(rig.image.procs.router!.proc.exitCode, null);
    await stillServing(t);
    await rig.image.procs.router!.waitFor(/WARN .*service unavailable service=console status=503 error=ENOENT/);
  } finally {
    const { startStandIn } = await import('./stand-in.ts');
    rig.standIns.console = await startStandIn('console', rig.image.socket('console'));
  }
});

test.serial('a service that died and left its socket file behind: 503 naming it', async (t) => {
  const file = rig.image.socket('relay');
  await rig.standIns.relay.close();
  // A process that listens on the socket and is killed with SIGKILL leaves the file with nobody behind it.
  const holder = spawn(NODE, ['-e', `require('net').createServer().listen(${JSON.stringify(file)}, () => console.log('up'))`], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await new Promise((r) => holder.stdout!.once('data', r));
  holder.kill('SIGKILL');
  await new Promise((r) => holder.once('exit', r));
  t.true(fs.existsSync(file));
  try {
    const r = await request(`${rig.image.url}/derp`);
    t.is(r.status, 503);
    t.regex(r.body, /relay service is unavailable/);
    await stillServing(t);
  } finally {
    const { startStandIn } = await import('./stand-in.ts');
    rig.standIns.relay = await startStandIn('relay', file);
  }
});

test('a service that drops the connection without answering: 502 naming it', async (t) => {
  const r = await request(`${rig.image.url}/reset`);
  t.is(r.status, 502);
  t.regex(r.body, /^hse: the coordination service did not answer properly/);
  await stillServing(t);
});

test('a slow-header attack is cut off at the head timeout', async (t) => {
  const s = await connect(rig.image.port);
  const got = new Received(s);
  s.write('GET /key HTTP/1.1\r\nHost: h\r\n');
  // Keep dribbling header lines, never finishing the head, until the router hangs up.
  let n = 0;
  const drip = setInterval(() => {
    if (!s.destroyed && s.writable) s.write(`X-Drip-${n++}: ${'a'.repeat(10)}\r\n`);
  }, 200);
  try {
    await got.closed;
  } finally {
    clearInterval(drip);
  }
  t.true(got.text === '' || /^HTTP\/1\.1 408 /.test(got.text), `answer was ${JSON.stringify(got.text.slice(0, 40))}`);
  t.is(rig.standIns.coordination.seen.filter((x) => x.headers['x-drip-0'] !== undefined).length, 0, 'nothing reached a service');
  await stillServing(t);
});

test('a connection that never sends a head is closed', async (t) => {
  const s = await connect(rig.image.port);
  const got = new Received(s);
  await got.closed;
  t.pass();
  await stillServing(t);
});

test('a huge head is refused with 431', async (t) => {
  const s = await connect(rig.image.port);
  const got = new Received(s);
  s.write(`GET /key HTTP/1.1\r\nHost: h\r\nX-Big: ${'b'.repeat(40 * 1024)}\r\n\r\n`);
  await got.closed;
  t.regex(got.text, /^HTTP\/1\.1 431 /);
  await stillServing(t);
});

test('a big head under the limit is passed on whole', async (t) => {
  // 14 KiB: also under Node's default 16 KiB, which the services (and these stand-ins) keep.
  const r = await request(`${rig.image.url}/key`, { headers: { 'x-big': 'c'.repeat(14 * 1024) } });
  t.is(r.status, 200);
  t.is(JSON.parse(r.body).headers['x-big'].length, 14 * 1024);
});

for (const [name, bytes] of [
  ['garbage instead of HTTP', '\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03 not http at all\r\n\r\n'],
  ['a header line without a colon', 'GET / HTTP/1.1\r\nHost: h\r\nNot a header\r\n\r\n'],
  [
    'conflicting body lengths (a smuggling attempt)',
    'POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /admin HTTP/1.1\r\nHost: h\r\n\r\n',
  ],
] as const) {
  test(`${name}: 400 and the connection closed`, async (t) => {
    const s = await connect(rig.image.port);
    const got = new Received(s);
    s.write(Buffer.from(bytes, 'latin1'));
    await got.closed;
    t.regex(got.text, /^HTTP\/1\.1 400 /);
    t.is(rig.standIns.coordination.seen.filter((x) => x.url === '/admin').length, 0);
    await stillServing(t);
  });
}

test('a client that hangs up mid-upload does not disturb the router', async (t) => {
  const s = await connect(rig.image.port);
  s.write(`POST /upload HTTP/1.1\r\nHost: h\r\nContent-Length: 1000000\r\n\r\n${'x'.repeat(1000)}`);
  s.destroy();
  await stillServing(t);
});
