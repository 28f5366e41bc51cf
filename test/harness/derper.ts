// Tailscale's own DERP server, `derper` (pinned, `go install`ed by .ci/run into the same GOBIN as tailscaled), as a
// test peer: TLS with a certificate from the throwaway test CA (--certmode=manual), on a free loopback port, no STUN,
// no plain-HTTP port, its own key file and mesh key file in a temp dir, meshing with the hosts given.
import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { freePort } from './process.ts';
import { TAILSCALED } from './tailscale.ts';

export const DERPER = process.env.HSE_DERPER ?? path.join(path.dirname(TAILSCALED), 'derper');

export function haveDerper(): boolean {
  return fs.existsSync(DERPER);
}

export interface DerperOptions {
  /** Certificate (chain) and key for `hostname`, and the CA the mesh peers' certificates chain to. */
  certFile: string;
  keyFile: string;
  caFile: string;
  /** The TLS name derper serves (its certificate must carry it). Default "localhost". */
  hostname?: string;
  /** 64 hex digits, written to --mesh-psk-file. */
  meshKey: string;
  /** --mesh-with: derper's host[:port] or host/dial-host entries. */
  meshWith?: string[];
  port?: number;
}

export interface Derper {
  port: number;
  /** https://<hostname>:<port>/derp */
  url: string;
  proc: ChildProcess;
  output(): string;
  waitFor(re: RegExp, ms?: number): Promise<void>;
  stop(): Promise<void>;
}

export async function startDerper(o: DerperOptions): Promise<Derper> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hse-derper-'));
  const hostname = o.hostname ?? 'localhost';
  const port = o.port ?? (await freePort());
  // Manual cert mode reads <certdir>/<hostname>.crt and .key.
  fs.copyFileSync(o.certFile, path.join(dir, `${hostname}.crt`));
  fs.copyFileSync(o.keyFile, path.join(dir, `${hostname}.key`));
  const pskFile = path.join(dir, 'mesh.key');
  fs.writeFileSync(pskFile, `${o.meshKey}\n`, { mode: 0o600 });
  const args = [
    `-a=127.0.0.1:${port}`,
    '-certmode=manual',
    `-certdir=${dir}`,
    `-hostname=${hostname}`,
    '-http-port=-1',
    '-stun=false',
    `-c=${path.join(dir, 'derper.json')}`,
    `-mesh-psk-file=${pskFile}`,
  ];
  if (o.meshWith?.length) args.push(`-mesh-with=${o.meshWith.join(',')}`);
  const proc = spawn(DERPER, args, {
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: dir, SSL_CERT_FILE: o.caFile },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  proc.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  proc.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<void>((r) => proc.once('exit', () => r()));
  const waitFor = async (re: RegExp, ms = 20_000): Promise<void> => {
    const deadline = Date.now() + ms;
    while (!re.test(out)) {
      if (proc.exitCode !== null) throw new Error(`derper exited (${proc.exitCode}) before printing ${re}:\n${out}`);
      if (Date.now() > deadline) throw new Error(`derper did not print ${re} within ${ms} ms:\n${out}`);
      await sleep(50);
    }
  };
  await waitFor(/serving on .* with TLS/);
  return {
    port,
    url: `https://${hostname}:${port}/derp`,
    proc,
    output: () => out,
    waitFor,
    async stop() {
      if (proc.exitCode === null) proc.kill('SIGTERM');
      await Promise.race([exited, sleep(5_000)]);
      if (proc.exitCode === null) proc.kill('SIGKILL');
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}
