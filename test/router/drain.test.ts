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
    await router.waitFor(/draining/);

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
    t.regex(router.output(), /stopped clean=true/);
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
