// Child processes for tests and benchmarks, and free loopback ports for them to listen on. One of the project's
// mains (runProcess) or any other program (startProcess: redis, pebble, a reverse proxy, tailscaled, headscale,
// derper, nginx, pm2-runtime) runs as a real child process; its output is kept so a failure can show it.
import { spawn, type ChildProcess } from 'node:child_process';
import dgram from 'node:dgram';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
/** The pinned Node 24 from the `node` npm package. */
export const NODE = path.join(ROOT, 'node_modules/.bin/node');
/** Where the .ci scripts `go install` the pinned Go programs (tailscaled, pebble, traefik). */
export const GOBIN = process.env.HSE_TEST_GOBIN ?? path.join(process.env.GOPATH ?? path.join(os.homedir(), 'go'), 'bin');

/** Finds an executable on PATH, in /usr/sbin (nginx, for non-root PATHs) or in GOBIN; null when there is none. */
export function findBinary(name: string): string | null {
  const dirs = [...(process.env.PATH ?? '').split(':'), '/usr/sbin', '/usr/local/sbin', GOBIN];
  for (const d of dirs) {
    if (!d) continue;
    const p = path.join(d, name);
    try {
      fs.accessSync(p, fs.constants.X_OK);
      return p;
    } catch {
      // not here
    }
  }
  return null;
}

export interface Proc {
  /** What messages call it: the script for runProcess, the name given to startProcess. */
  name: string;
  proc: ChildProcess;
  /** 0 when the program could not be started at all. */
  pid: number;
  /** stdout and stderr as they arrived, interleaved (only the kept part, see StartOptions.keep). */
  output(): string;
  /** Waits until the output so far matches `re`; throws with the output when the process ends first or `ms` pass. */
  waitFor(re: RegExp, ms?: number): Promise<RegExpMatchArray>;
  /**
   * The exit status (null after a signal) once the process has exited and its output is read, or a second after the
   * exit when something it left behind holds the pipes open.
   */
  exited(): Promise<number | null>;
  /** Sends `signal` (SIGTERM by default); a process still running after `killAfterMs` is killed with SIGKILL. */
  stop(signal?: NodeJS.Signals, killAfterMs?: number): Promise<number | null>;
}

export interface StartOptions {
  /** The whole environment of the child. Default: this process's. */
  env?: Record<string, string | undefined>;
  cwd?: string;
  /**
   * Keep only the first `head` and the last `tail` characters of the output (a benchmark's servers log a line per
   * node; a long run must not hold all of it). Default: keep everything.
   */
  keep?: { head: number; tail: number };
}

// Children still running when this process exits — a test that failed before it stopped one, a benchmark that threw
// — are killed then, so that nothing is left running on a shared machine. (A process killed by a signal runs no exit
// handlers; ava ends its workers normally.)
const running = new Set<ChildProcess>();
process.on('exit', () => {
  for (const child of running) child.kill('SIGKILL');
});

/** What to keep of a long-running server's output (StartOptions.keep): 64 KiB from the start and the last 256 KiB. */
export const HEAD_AND_TAIL = { head: 64 * 1024, tail: 256 * 1024 };

/** Starts `cmd` with `args` (no shell), output piped and kept. */
export function startProcess(name: string, cmd: string, args: string[], opts: StartOptions = {}): Proc {
  const proc = spawn(cmd, args, { env: opts.env ?? process.env, cwd: opts.cwd, stdio: ['ignore', 'pipe', 'pipe'] });
  running.add(proc);
  const keep = opts.keep;
  let head = '';
  let tail = '';
  let dropped = false;
  const onOut = (d: Buffer | string) => {
    let s = d.toString();
    if (!keep) {
      head += s;
      return;
    }
    const room = keep.head - head.length;
    if (room > 0) {
      head += s.slice(0, room);
      s = s.slice(room);
    }
    tail += s;
    // Trimmed to `keep.tail` only when twice that has piled up, so a chatty process is not copied at every chunk.
    if (tail.length > 2 * keep.tail) {
      tail = tail.slice(-keep.tail);
      dropped = true;
    }
  };
  const output = () => {
    if (!keep) return head;
    const t = tail.length > keep.tail ? tail.slice(-keep.tail) : tail;
    return dropped || t.length < tail.length ? `${head}\n[...]\n${t}` : head + t;
  };
  // In an error message: everything, or with a bounded output its last 4,000 characters.
  const shown = () => (keep ? output().slice(-4000) : output());
  proc.stdout!.on('data', onOut);
  proc.stderr!.on('data', onOut);
  // A program that cannot be started (ENOENT, EACCES) emits 'error' and 'close' but no 'exit'.
  proc.on('error', (e) => onOut(`\n[${name}: ${e.message}]\n`));
  // After 'exit', wait for 'close' (the output pipes drained) so output() is complete — but not forever: a child the
  // process left behind (an orphaned redis-server) can hold the pipes open.
  let ended = false;
  const exit = new Promise<number | null>((resolve) => {
    let timer: NodeJS.Timeout | undefined;
    const done = () => {
      running.delete(proc);
      clearTimeout(timer);
      ended = true;
      resolve(proc.exitCode);
    };
    proc.once('close', done);
    proc.once('exit', () => {
      running.delete(proc);
      timer = setTimeout(done, 1000);
    });
  });
  const how = () => (proc.signalCode !== null ? `killed by ${proc.signalCode}` : `exited with status ${proc.exitCode}`);
  return {
    name,
    proc,
    pid: proc.pid ?? 0,
    output,
    async waitFor(re, ms = 15_000) {
      const deadline = Date.now() + ms;
      for (;;) {
        const m = output().match(re);
        if (m) return m;
        if (ended) throw new Error(`${name} ${how()} before it printed ${re}; output:\n${shown()}`);
        if (Date.now() >= deadline) throw new Error(`${name} did not print ${re} within ${ms} ms; output:\n${shown()}`);
        await sleep(25);
      }
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

/** `script` is a project path: a `.ts` main runs on the pinned Node, a `.sh` launcher under /bin/sh. */
export function runProcess(script: string, env: Record<string, string | undefined>): Proc {
  return startProcess(script, script.endsWith('.sh') ? '/bin/sh' : NODE, [path.join(ROOT, script)], {
    env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env },
  });
}

// Ports for test servers come from 20000-32767, below Linux's ephemeral range (32768-60999): a port the kernel hands
// to some outgoing connection a moment after we released it cannot be one of ours. Each candidate is bound and
// released to check it is free now; the random start keeps parallel test processes apart, and the candidate only
// moves forward, so one process is not handed the same port twice until it has gone round the whole range.
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

/** `count` different free TCP ports on loopback. */
export async function freePorts(count: number, host = '127.0.0.1'): Promise<number[]> {
  const ports: number[] = [];
  while (ports.length < count) {
    const p = await freePort(host);
    if (!ports.includes(p)) ports.push(p);
  }
  return ports;
}

/**
 * A free UDP port on loopback (checked by binding it), e.g. for HSE_STUN_PORT. With several hosts, one port free on
 * each of them: a relay with HSE_STUN_LISTEN=127.0.0.1,::1 binds it on both.
 */
export function freeUdpPort(host: string | string[] = '127.0.0.1'): Promise<number> {
  const hosts = typeof host === 'string' ? [host] : host;
  return findPort(async (p) => {
    for (const h of hosts) if (!(await tryUdp(p, h))) return false;
    return true;
  });
}
