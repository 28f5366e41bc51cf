// Memory and file descriptors of a running process (read by test/harness/proc.ts), and a sampler that keeps the peak
// while an attack runs: the "memory stays bounded" figures come from here.
import { fdCountOf, rssKiBOf } from '../../harness/proc.ts';

export interface ProcSample {
  /** Resident set size, MiB. */
  rssMiB: number;
  /** Open file descriptors (sockets included). */
  fds: number;
}

/** RSS and fd count of `pid`, or null when it is gone. */
export function sample(pid: number): ProcSample | null {
  const kib = rssKiBOf(pid);
  const fds = fdCountOf(pid);
  if (kib === null || fds === null) return null;
  return { rssMiB: Math.round((kib / 1024) * 10) / 10, fds };
}

export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Samples `pid` every `everyMs` until stop(); reports before, peak and last values. */
export class Sampler {
  readonly pid: number;
  readonly before: ProcSample;
  peak: ProcSample;
  last: ProcSample;
  /** False once the process was seen gone. */
  stayedUp = true;
  private readonly timer: NodeJS.Timeout;

  constructor(pid: number, everyMs = 100) {
    this.pid = pid;
    const s = sample(pid);
    if (!s) throw new Error(`process ${pid} is not running`);
    this.before = s;
    this.peak = { ...s };
    this.last = s;
    this.timer = setInterval(() => this.tick(), everyMs);
  }

  private tick(): void {
    const s = sample(this.pid);
    if (!s) {
      this.stayedUp = false;
      return;
    }
    this.last = s;
    this.peak = { rssMiB: Math.max(this.peak.rssMiB, s.rssMiB), fds: Math.max(this.peak.fds, s.fds) };
  }

  stop(): { before: ProcSample; peak: ProcSample; last: ProcSample; stayedUp: boolean } {
    clearInterval(this.timer);
    this.tick();
    return { before: this.before, peak: this.peak, last: this.last, stayedUp: this.stayedUp && alive(this.pid) };
  }
}
