// Fuzz batches with a memory reading after each. In `npm test` every fuzz property runs once (one batch); the soak
// (`node test/reliability/run-faults.ts fuzz`) sets HSE_FUZZ_BATCHES so the same properties run many times against
// the same process, and a leak shows as memory that keeps climbing from batch to batch. Each run logs one line
// "FIGURE {json}" that run-faults.ts collects for docs/reliability.md.
import { alive, sample } from './proc-stats.ts';

/** How many times each fuzz property runs (test-only knob; the image's own settings live in shared/config.ts). */
export const FUZZ_BATCHES = Math.max(1, Number(process.env.HSE_FUZZ_BATCHES ?? 1) || 1);

export interface BatchFigure {
  fuzz: string;
  target: string;
  batches: number;
  inputsPerBatch: number;
  /** RSS (MiB) after each batch. */
  rssMiB: number[];
  alive: boolean;
}

export async function batches(
  t: { log: (...v: unknown[]) => void; true: (v: boolean, m?: string) => void },
  fuzz: string,
  target: string,
  pid: number,
  inputsPerBatch: number,
  runBatch: () => Promise<void>,
): Promise<BatchFigure> {
  const rss: number[] = [];
  for (let i = 0; i < FUZZ_BATCHES; i++) {
    await runBatch();
    if (!alive(pid)) break;
    rss.push(sample(pid)?.rssMiB ?? NaN);
  }
  const figure: BatchFigure = { fuzz, target, batches: FUZZ_BATCHES, inputsPerBatch, rssMiB: rss, alive: alive(pid) };
  t.log(`FIGURE ${JSON.stringify(figure)}`);
  t.true(figure.alive, `${target} still running after fuzzing`);
  return figure;
}
