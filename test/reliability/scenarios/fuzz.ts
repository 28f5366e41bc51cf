// The fuzz soak: the same property tests as npm test (test/reliability/fuzz-*.test.ts), each property run many times
// against one process, with its memory read after every batch. A parser that leaks shows as memory that keeps
// climbing batch after batch; a crash shows as a dead process.
import { spawn } from 'node:child_process';
import path from 'node:path';
import { NODE, ROOT } from '../../harness/process.ts';
import type { BatchFigure } from '../lib/fuzz-batches.ts';
import { progress, save, table } from '../lib/report.ts';

export async function runFuzzSoak(opts: { batches: number }): Promise<string> {
  const files = ['fuzz-router', 'fuzz-coordination', 'fuzz-relay', 'fuzz-console'].map((f) => `test/reliability/${f}.test.ts`);
  progress(`ava ${files.join(' ')} with HSE_FUZZ_BATCHES=${opts.batches}`);
  const out = await new Promise<{ code: number | null; text: string }>((resolve) => {
    const p = spawn(NODE, [path.join(ROOT, 'node_modules/ava/entrypoints/cli.mjs'), '--verbose', '--timeout=20m', '--concurrency=1', ...files], {
      cwd: ROOT,
      env: { ...process.env, PATH: `${path.join(ROOT, 'node_modules/.bin')}:${process.env.PATH}`, HSE_FUZZ_BATCHES: String(opts.batches) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let text = '';
    p.stdout.on('data', (d: Buffer) => (text += d.toString()));
    p.stderr.on('data', (d: Buffer) => (text += d.toString()));
    p.on('exit', (code) => resolve({ code, text }));
  });
  const figures = [...out.text.matchAll(/FIGURE (\{.*\})/g)].map((m) => JSON.parse(m[1]) as BatchFigure);
  const summary = out.text
    .split('\n')
    .filter((l) => /tests? (passed|failed)|known failure|uncaught|✘/.test(l))
    .map((l) => l.trim());
  const file = save('fuzz', { batches: opts.batches, exitCode: out.code, summary, figures });
  const growth = (r: number[]) => (r.length > 1 ? (r[r.length - 1] - r[0]).toFixed(1) : '—');
  return [
    `Fuzz soak: every property ${opts.batches} times against the same process; RSS after each batch. ava: ${summary.join('; ')} (exit ${out.code}). Raw: ${file}`,
    '',
    table(
      ['input', 'process', 'inputs', 'RSS after batch 1 (MiB)', 'RSS after the last', 'growth from batch 1', 'still running'],
      figures.map((f) => [
        f.fuzz,
        f.target,
        f.batches * f.inputsPerBatch,
        f.rssMiB[0] ?? '—',
        f.rssMiB[f.rssMiB.length - 1] ?? '—',
        growth(f.rssMiB),
        f.alive ? 'yes' : 'NO',
      ]),
    ),
  ].join('\n');
}
