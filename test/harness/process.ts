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

/** `script` is a project path: a `.ts` main runs on the pinned Node, a `.sh` launcher under /bin/sh. */
export function runProcess(script: string, env: Record<string, string | undefined>): Proc {
  const proc = spawn(script.endsWith('.sh') ? '/bin/sh' : NODE, [path.join(ROOT, script)], {
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

// Ports for test servers come from 20000-32767, below Linux's ephemeral range (32768-60999): a port the kernel hands
// to some outgoing connection a moment after we released it cannot be one of ours. Each candidate is bound and
// released to check it is free now; the random start keeps parallel test processes apart.
const PORT_LO = 20_000;
const PORT_SPAN = 12_768;
let nextPort = PORT_LO + Math.floor(Math.random() * PORT_SPAN);

function candidatePort(): number {
  nextPort = PORT_LO + ((nextPort - PORT_LO + 1 + Math.floor(Math.random() * 50)) % PORT_SPAN);
  return nextPort;
}

function tryTcp(port: number, host: string): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.once('error', () => resolve(false));
    s.listen(port, host, () => s.close(() => resolve(true)));
  });
}

function tryUdp(port: number, host: string): Promise<boolean> {
  return new Promise((resolve) => {
    const s = dgram.createSocket(host.includes(':') ? 'udp6' : 'udp4');
    s.once('error', () => {
      s.close();
      resolve(false);
    });
    s.bind(port, host, () => s.close(() => resolve(true)));
  });
}

async function findPort(check: (port: number) => Promise<boolean>): Promise<number> {
  for (let i = 0; i < 200; i++) {
    const p = candidatePort();
    if (await check(p)) return p;
  }
  throw new Error('no free test port found in 20000-32767');
}

/** A free TCP port on loopback (checked by binding it). */
export function freePort(host = '127.0.0.1'): Promise<number> {
  return findPort((p) => tryTcp(p, host));
}

/** A free UDP port on loopback (checked by binding it), e.g. for HSE_STUN_PORT. */
export function freeUdpPort(host = '127.0.0.1'): Promise<number> {
  return findPort((p) => tryUdp(p, host));
}
