// Output of the long fault runs: a Markdown table on stdout (pasted into docs/reliability.md) and the raw results as
// JSON under test-artifacts/reliability/ (git-ignored), plus progress lines on stderr.
import fs from 'node:fs';
import path from 'node:path';
import { ROOT } from '../../harness/process.ts';

export function progress(msg: string): void {
  process.stderr.write(`${new Date().toISOString().slice(11, 19)} ${msg}\n`);
}

export function table(headers: string[], rows: (string | number)[][]): string {
  const line = (cells: (string | number)[]) => `| ${cells.map(String).join(' | ')} |`;
  return [line(headers), line(headers.map(() => '---')), ...rows.map(line)].join('\n');
}

/** Seconds with one decimal, or "—" for nothing to report. */
export function secs(ms: number | null | undefined): string {
  return ms === null || ms === undefined || Number.isNaN(ms) ? '—' : (ms / 1000).toFixed(1);
}

export function save(name: string, data: unknown): string {
  const dir = path.join(ROOT, 'test-artifacts', 'reliability');
  fs.mkdirSync(dir, { recursive: true });
  const file = path.join(dir, `${name}.json`);
  fs.writeFileSync(file, JSON.stringify({ when: new Date().toISOString(), ...((data as object) ?? {}) }, null, 2));
  return file;
}
