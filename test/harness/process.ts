// Runs one of the project's processes (router, a service) as a real child process with its own environment, and
// keeps its output so a failing test can show it.
import { spawn, type ChildProcess } from 'node:child_process';
import dgram from 'node:dgram';
import net from 'node:net';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
/** The pinned Node 24 from the `node` npm package. */
export const NODE = path.join(ROOT, 'node_modules/.bin/node');

export interface Proc {
  proc: ChildProcess;
  output(): string;
  waitFor(re: RegExp, ms?: number): Promise<RegExpMatchArray>;
  exited(): Promise<number | null>;
  /** Sends `signal` (SIGTERM by default); a process still running after `killAfterMs` is killed with SIGKILL. */
  stop(signal?: NodeJS.Signals, killAfterMs?: number): Promise<number | null>;
}

export function runProcess(script: string, env: Record<string, string | undefined>): Proc {
  const proc = spawn(NODE, [path.join(ROOT, script)], {
    env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  proc.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  proc.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  // After 'exit', wait for 'close' (the output pipes drained) so output() is complete — but not forever: a child the
  // process left behind (an orphaned redis-server) can hold the pipes open.
  const exit = new Promise<number | null>((resolve) =>
    proc.once('exit', (code) => {
      const t = setTimeout(() => resolve(code), 1000);
      proc.once('close', () => {
        clearTimeout(t);
        resolve(code);
      });
    }),
  );
  return {
    proc,
    output: () => out,
    async waitFor(re, ms = 15_000) {
      const deadline = Date.now() + ms;
      while (Date.now() < deadline) {
        const m = out.match(re);
        if (m) return m;
        if (proc.exitCode !== null) break;
        await sleep(25);
      }
      const why = proc.exitCode !== null ? `exited with status ${proc.exitCode} before it printed ${re}` : `did not print ${re} within ${ms} ms`;
      throw new Error(`process ${script} ${why}; output:\n${out}`);
    },
    exited: () => exit,
    async stop(signal = 'SIGTERM', killAfterMs = 20_000) {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill(signal);
      const timer = setTimeout(() => proc.kill('SIGKILL'), killAfterMs);
      try {
        return await exit;
      } finally {
        clearTimeout(timer);
      }
    },
  };
}

/** A free TCP port on loopback (bound then released). */
export async function freePort(host = '127.0.0.1'): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, host, () => {
      const p = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(p));
    });
  });
}

/** A free UDP port on loopback (bound then released), e.g. for HSE_STUN_PORT. */
export async function freeUdpPort(host = '127.0.0.1'): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = dgram.createSocket(host.includes(':') ? 'udp6' : 'udp4');
    s.once('error', reject);
    s.bind(0, host, () => {
      const p = s.address().port;
      s.close(() => resolve(p));
    });
  });
}
