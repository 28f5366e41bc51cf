// Runs wrk (Debian's package, HTTP/1.1 keep-alive load generator) and reads its summary:
//   "Requests/sec:  12345.67", the --latency distribution ("50%  1.23ms" ... "99%  4.56ms"),
//   "Non-2xx or 3xx responses: N", "Socket errors: connect N, read N, write N, timeout N".
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

const run = promisify(execFile);

export interface WrkResult {
  rps: number;
  p50Ms: number;
  p99Ms: number;
  errors: number;
  raw: string;
}

function toMs(v: string, unit: string): number {
  const n = Number(v);
  return unit === 'us' ? n / 1000 : unit === 's' ? n * 1000 : n;
}

export async function wrk(url: string, o: { connections: number; seconds: number; threads?: number }): Promise<WrkResult> {
  const { stdout: raw } = await run('wrk', [`-t${o.threads ?? 1}`, `-c${o.connections}`, `-d${o.seconds}s`, '--latency', url], {
    timeout: (o.seconds + 30) * 1000,
    killSignal: 'SIGKILL',
  });
  const rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(raw)?.[1] ?? NaN);
  const pct = (p: string) => {
    const m = new RegExp(`^\\s+${p}%\\s+([\\d.]+)(us|ms|s)\\s*$`, 'm').exec(raw);
    return m ? toMs(m[1], m[2]) : NaN;
  };
  const non2xx = Number(/Non-2xx or 3xx responses:\s+(\d+)/.exec(raw)?.[1] ?? 0);
  const sock = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(raw);
  const errors = non2xx + (sock ? sock.slice(1).reduce((s, x) => s + Number(x), 0) : 0);
  return { rps, p50Ms: pct('50'), p99Ms: pct('99'), errors, raw };
}
