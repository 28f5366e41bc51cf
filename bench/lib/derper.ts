// Tailscale's derper for a benchmark, on loopback: plain HTTP on 127.0.0.1:<port> (derper serves TLS only on :443 or
// with --certmode=manual, so any other port is plain HTTP, as -dev does on :3340), STUN on 127.0.0.1:<stun port>,
// a key file in a temp dir, client verification off (its default, like HSE_DERP_VERIFY_CLIENTS=off for ours).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort, freeUdpPort, HEAD_AND_TAIL, startProcess, type Proc } from '../../test/harness/process.ts';
import { DERPER, PEERS, requirePeer } from './peers.ts';

export interface Derper {
  port: number;
  stunPort: number;
  server: Proc;
  pids(): Record<string, number>;
  stop(): Promise<void>;
}

export async function startDerper(): Promise<Derper> {
  requirePeer(PEERS.derper);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'derper-bench-'));
  const port = await freePort();
  const stunPort = await freeUdpPort();
  const server = startProcess(
    'derper',
    DERPER,
    [
      '-a',
      `127.0.0.1:${port}`,
      '-c',
      path.join(dir, 'derper.key'),
      '-stun-port',
      String(stunPort),
      '-http-port',
      '-1',
      '-home',
      'blank',
      '-verify-clients=false',
    ],
    { env: { PATH: process.env.PATH, HOME: dir }, cwd: dir, keep: HEAD_AND_TAIL },
  );
  try {
    await server.waitFor(/derper: serving on/, 30_000);
  } catch (e) {
    await server.stop();
    fs.rmSync(dir, { recursive: true, force: true });
    throw e;
  }
  return {
    port,
    stunPort,
    server,
    pids: () => ({ derper: server.pid }),
    async stop() {
      await server.stop();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}
