// Runs a server under test (ours, headscale, derper, nginx, ...) as a child process and keeps the head and tail of
// its output: a benchmark's servers log a line per node, and a 2,000-node run must not hold all of it in memory.
import { spawn, type ChildProcess } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';

const HEAD = 64 * 1024;
const TAIL = 256 * 1024;

export interface Server {
  name: string;
  proc: ChildProcess;
  pid: number;
  output(): string;
  /** Waits until the output (since start) matched `re`. */
  waitFor(re: RegExp, ms?: number): Promise<RegExpMatchArray>;
  stop(signal?: NodeJS.Signals): Promise<void>;
}

export function startServer(name: string, cmd: string, args: string[], opts: { env?: Record<string, string | undefined>; cwd?: string } = {}): Server {
  const proc = spawn(cmd, args, { env: opts.env ?? process.env, cwd: opts.cwd, stdio: ['ignore', 'pipe', 'pipe'] });
  let head = '';
  let tail = '';
  // Lines that completed a waitFor pattern are searched in this window, so a match split across chunks is found.
  let recent = '';
  const watchers: { re: RegExp; hit: (m: RegExpMatchArray) => void }[] = [];
  const onOut = (d: Buffer) => {
    const s = d.toString();
    if (head.length < HEAD) head += s.slice(0, HEAD - head.length);
    tail = (tail + s).slice(-TAIL);
    recent = (recent + s).slice(-8192);
    for (const w of [...watchers]) {
      const m = recent.match(w.re);
      if (m) {
        watchers.splice(watchers.indexOf(w), 1);
        w.hit(m);
      }
    }
  };
  proc.stdout!.on('data', onOut);
  proc.stderr!.on('data', onOut);
  proc.on('error', (e) => onOut(Buffer.from(`\n[${name}: ${e.message}]\n`)));
  const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
  const output = () => (head.length < HEAD ? head : `${head}\n[...]\n${tail}`);
  return {
    name,
    proc,
    pid: proc.pid ?? 0,
    output,
    async waitFor(re, ms = 30_000) {
      const m0 = (head + tail).match(re);
      if (m0) return m0;
      return new Promise<RegExpMatchArray>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`${name} did not print ${re} within ${ms} ms; output:\n${output().slice(-4000)}`)), ms);
        const w = {
          re,
          hit: (m: RegExpMatchArray) => {
            clearTimeout(timer);
            resolve(m);
          },
        };
        watchers.push(w);
        void exited.then(() => {
          if (!watchers.includes(w)) return;
          clearTimeout(timer);
          reject(new Error(`${name} exited (status ${proc.exitCode}, signal ${proc.signalCode}) before it printed ${re}; output:\n${output().slice(-4000)}`));
        });
      });
    },
    async stop(signal = 'SIGTERM') {
      if (proc.exitCode !== null || proc.signalCode !== null) return;
      proc.kill(signal);
      const killed = await Promise.race([exited.then(() => true), sleep(15_000).then(() => false)]);
      if (!killed) {
        proc.kill('SIGKILL');
        await exited;
      }
    },
  };
}

/** Runs a command to completion (e.g. a CLI call); rejects with its output on a non-zero status. */
export function runCommand(
  cmd: string,
  args: string[],
  opts: { env?: Record<string, string | undefined>; cwd?: string; timeoutMs?: number } = {},
): Promise<string> {
  return new Promise((resolve, reject) => {
    const p = spawn(cmd, args, { env: opts.env ?? process.env, cwd: opts.cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    p.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    p.stderr!.on('data', (d: Buffer) => (err += d.toString()));
    const timer = setTimeout(() => p.kill('SIGKILL'), opts.timeoutMs ?? 60_000);
    p.on('error', (e) => {
      clearTimeout(timer);
      reject(new Error(`${cmd}: ${e.message}`));
    });
    p.on('exit', (code) => {
      clearTimeout(timer);
      if (code === 0) resolve(out);
      else reject(new Error(`${cmd} ${args.join(' ')} exited ${code}: ${(err || out).trim().slice(0, 2000)}`));
    });
  });
}
