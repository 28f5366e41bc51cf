// The server side of a benchmark's resource figures: a named group of processes (e.g. coordination + router +
// redis-server) read from /proc together (test/harness/proc.ts says what each figure means), once or, for the peak,
// several times a second.
import { cpuSecondsOf, memOf, rssKiBOf, type ProcMem } from '../../test/harness/proc.ts';

export interface GroupSample {
  rssKiB: number;
  pssKiB: number;
  cpuSeconds: number;
  byProcess: Record<string, ProcMem & { cpuSeconds: number }>;
}

/** One reading of every process of the group, and their sums. */
export function sampleGroup(pids: Record<string, number>): GroupSample {
  const byProcess: GroupSample['byProcess'] = {};
  let rss = 0;
  let pss = 0;
  let cpu = 0;
  for (const [name, pid] of Object.entries(pids)) {
    const m = memOf(pid);
    const c = cpuSecondsOf(pid);
    byProcess[name] = { ...m, cpuSeconds: c };
    rss += m.rssKiB;
    pss += m.pssKiB;
    cpu += c;
  }
  return { rssKiB: rss, pssKiB: pss, cpuSeconds: cpu, byProcess };
}

/** Samples the group's summed RSS every `everyMs` and keeps the peak, for phases where memory rises and falls. */
export class PeakSampler {
  peakRssKiB = 0;
  private readonly timer: NodeJS.Timeout;
  private readonly pids: Record<string, number>;

  constructor(pids: Record<string, number>, everyMs = 250) {
    this.pids = pids;
    this.sample();
    this.timer = setInterval(() => this.sample(), everyMs);
  }

  private sample(): void {
    // RSS alone: PSS (smaps_rollup) walks every mapping and costs the server real time when read four times a second.
    let rss = 0;
    for (const pid of Object.values(this.pids)) rss += rssKiBOf(pid) ?? 0;
    this.peakRssKiB = Math.max(this.peakRssKiB, rss);
  }

  stop(): void {
    clearInterval(this.timer);
    this.sample();
  }
}
