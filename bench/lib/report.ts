// What every benchmark prints: the machine, the versions of everything compared, and a plain-text table; plus the
// statistics the tables use. Percentiles are nearest-rank on the sorted samples.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';

export function percentile(values: number[], p: number): number {
  if (values.length === 0) return NaN;
  const s = [...values].sort((a, b) => a - b);
  const rank = Math.ceil((p / 100) * s.length);
  return s[Math.min(s.length - 1, Math.max(0, rank - 1))];
}

export const median = (values: number[]): number => percentile(values, 50);

/** First non-empty line a command prints on stdout or stderr (nginx -v and wrk --version use stderr). */
function firstLine(cmd: string, args: string[]): string {
  const r = spawnSync(cmd, args, { encoding: 'utf8', timeout: 10_000 });
  if ((r.error as NodeJS.ErrnoException | undefined)?.code === 'ENOENT') return 'not installed';
  return (
    `${r.stdout ?? ''}\n${r.stderr ?? ''}`
      .split('\n')
      .map((l) => l.trim())
      .find((l) => l !== '') ?? 'unknown'
  );
}

/** Version strings of tools a benchmark uses, by name. */
export function versions(tools: Record<string, [string, string[]]>): Record<string, string> {
  const out: Record<string, string> = { node: process.version };
  for (const [name, [cmd, args]] of Object.entries(tools)) out[name] = firstLine(cmd, args);
  return out;
}

export function machineLines(): string[] {
  const cpus = os.cpus();
  let kernel = os.release();
  let distro = '';
  try {
    distro = /^PRETTY_NAME="?([^"\n]*)/m.exec(fs.readFileSync('/etc/os-release', 'utf8'))?.[1] ?? '';
  } catch {
    // not Linux-like; leave it out
  }
  kernel = `${os.type()} ${kernel}`;
  return [
    `machine: ${cpus[0]?.model ?? 'unknown CPU'}, ${cpus.length} cores (${os.availableParallelism()} usable), ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB RAM, ${kernel}${distro ? `, ${distro}` : ''}`,
    `load average at start: ${os
      .loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')} (other work on the machine skews every figure)`,
  ];
}

export function header(title: string, tools: Record<string, [string, string[]]>): string {
  const v = versions(tools);
  return [
    `# ${title}`,
    `date: ${new Date().toISOString()}`,
    ...machineLines(),
    `versions: ${Object.entries(v)
      .map(([k, x]) => `${k} ${x}`)
      .join('; ')}`,
    '',
  ].join('\n');
}

/** A table with a header row; columns sized to fit, numbers right-aligned. */
export function table(head: string[], rows: (string | number)[][]): string {
  const cells = rows.map((r) => r.map((c) => String(c)));
  const widths = head.map((h, i) => Math.max(h.length, ...cells.map((r) => (r[i] ?? '').length)));
  const numeric = head.map((_, i) => cells.every((r) => /^[-+~≈<>]?[\d.,]+\s*[a-zA-Z%/×]*$|^[–-]$/.test(r[i] ?? '')));
  const line = (r: string[]) => `| ${r.map((c, i) => (numeric[i] ? c.padStart(widths[i]) : c.padEnd(widths[i]))).join(' | ')} |`;
  const sep = `|${widths.map((w, i) => (numeric[i] ? `${'-'.repeat(w + 1)}:` : `${'-'.repeat(w + 2)}`)).join('|')}|`;
  return [line(head), sep, ...cells.map(line)].join('\n');
}

/** "ours / theirs" as "0.42×"; "–" when either is missing. */
export function ratio(ours: number, theirs: number): string {
  if (!Number.isFinite(ours) || !Number.isFinite(theirs) || theirs === 0) return '–';
  const r = ours / theirs;
  return `${r >= 10 ? r.toFixed(0) : r >= 1 ? r.toFixed(2) : r.toFixed(3)}×`;
}

/** Infinity stands for "did not happen within the benchmark's time limit". */
export function fmtMs(ms: number): string {
  if (ms === Infinity) return 'timed out';
  if (!Number.isFinite(ms)) return '–';
  if (ms >= 10_000) return `${(ms / 1000).toFixed(1)} s`;
  if (ms >= 1000) return `${(ms / 1000).toFixed(2)} s`;
  if (ms >= 10) return `${ms.toFixed(0)} ms`;
  return `${ms.toFixed(1)} ms`;
}

export function fmtMiB(kib: number): string {
  return Number.isFinite(kib) ? `${(kib / 1024).toFixed(1)} MiB` : '–';
}

export function fmtNum(n: number, digits = 0): string {
  return Number.isFinite(n) ? n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits }) : '–';
}
