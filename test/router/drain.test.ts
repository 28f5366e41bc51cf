// Through the real router process: SIGTERM drains. New connections are refused at once, idle keep-alive connections
// are closed, a request in flight still gets its whole answer, tunnels are closed after it, and the exit status is 0.
import test from 'ava';
import { connect, Received, startRouterRig } from './client.ts';

test('SIGTERM: in-flight request completes, new connections refused, tunnels closed, exit 0', async (t) => {
  const rig = await startRouterRig();
  const router = rig.image.procs.router!;
  try {
    // A request the service holds, an idle keep-alive connection, and a tunnel.
    const inflight = await connect(rig.image.port);
    const answer = new Received(inflight);
    inflight.write('GET /machine/hold HTTP/1.1\r\nHost: h\r\n\r\n');
    await rig.standIns.coordination.waitHeld(1);

    const idle = await connect(rig.image.port);
    const idleGot = new Received(idle);
    idle.write('GET /key HTTP/1.1\r\nHost: h\r\n\r\n');
    await idleGot.until((b) => b.toString().includes('"/key"'), 'an answer on the keep-alive connection');

    const tunnel = await connect(rig.image.port);
    const tunnelGot = new Received(tunnel);
    tunnel.write('GET /derp HTTP/1.1\r\nHost: h\r\nUpgrade: DERP\r\nConnection: Upgrade\r\n\r\n');
    await tunnelGot.head();

    router.proc.kill('SIGTERM');
    await router.waitFor(/shutting down/);

    await t.throwsAsync(connect(rig.image.port), { code: 'ECONNREFUSED' }, 'a new connection is refused');
    await idleGot.closed;
    t.false(answer.socket.destroyed, 'the in-flight request is still open');
    t.false(tunnel.destroyed, 'the tunnel is still open while a request is in flight');

    rig.standIns.coordination.release();
    await answer.closed;
    t.regex(answer.text, /^HTTP\/1\.1 200 OK\r\n/);
    t.regex(answer.text, /\r\nconnection: close\r\n/i);
    t.regex(answer.text, /released\n(\r\n0\r\n\r\n)?$/);
    await tunnelGot.closed;

    t.is(await router.exited(), 0);
    t.regex(router.output(), /drained clean=true/);
  } finally {
    await rig.stop();
  }
});

test('SIGTERM with nothing in flight exits 0 at once, closing open tunnels', async (t) => {
  const rig = await startRouterRig();
  const router = rig.image.procs.router!;
  try {
    const tunnel = await connect(rig.image.port);
    const got = new Received(tunnel);
    tunnel.write('POST /ts2021 HTTP/1.1\r\nHost: h\r\nUpgrade: tailscale-control-protocol\r\nConnection: Upgrade\r\n\r\n');
    await got.head();
    router.proc.kill('SIGTERM');
    await got.closed;
    t.is(await router.exited(), 0);
  } finally {
    await rig.stop();
  }
});

test('a closed output pipe does not stop the router: it keeps serving and still exits 0 on SIGTERM', async (t) => {
  const { spawn } = await import('node:child_process');
  const fs = await import('node:fs');
  const os = await import('node:os');
  const path = await import('node:path');
  const { freePort, NODE, ROOT } = await import('../harness/process.ts');
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'hse-epipe-'));
  t.teardown(() => fs.rmSync(dataDir, { recursive: true, force: true }));
  const port = await freePort();
  // The supervisor's end of the pipe goes away (pm2 died): every later log line meets EPIPE.
  const p = spawn(NODE, [path.join(ROOT, 'router/src/main.ts')], {
    env: { PATH: process.env.PATH, HSE_DATA_DIR: dataDir, HSE_HTTP_PORT: String(port) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  t.teardown(() => p.kill('SIGKILL'));
  await new Promise<void>((resolve) => p.stdout.once('data', () => resolve()));
  p.stdout.destroy();
  p.stderr.destroy();
  for (let i = 0; i < 5; i++) {
    const r = await fetch(`http://127.0.0.1:${port}/console`, { redirect: 'manual' });
    t.true(r.status > 0);
  }
  const exited = new Promise<number | null>((resolve) => p.once('exit', (code) => resolve(code)));
  p.kill('SIGTERM');
  const code = await Promise.race([exited, new Promise<string>((r) => setTimeout(() => r('still running 15 s after SIGTERM'), 15_000))]);
  t.is(code, 0);
});
