// Resource figures of server processes, read from /proc (Linux):
//   RSS  — /proc/<pid>/status VmRSS: resident memory, counting shared pages (the Node binary, libc) in every process
//          that maps them, so a sum over several processes overstates what they use together;
//   PSS  — /proc/<pid>/smaps_rollup Pss: each shared page divided among the processes sharing it, so sums add up;
//   CPU  — /proc/<pid>/stat utime+stime (fields 14, 15), in clock ticks of 1/100 s (USER_HZ on Linux).
import fs from 'node:fs';

const TICKS_PER_SECOND = 100;

export interface ProcMem {
  rssKiB: number;
  pssKiB: number;
}

function readKiB(text: string, field: string): number {
  const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(text);
  return m ? Number(m[1]) : 0;
}

export function memOf(pid: number): ProcMem {
  try {
    const rss = readKiB(fs.readFileSync(`/proc/${pid}/status`, 'utf8'), 'VmRSS');
    let pss = 0;
    try {
      pss = readKiB(fs.readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'), 'Pss');
    } catch {
      pss = rss;
    }
    return { rssKiB: rss, pssKiB: pss };
  } catch {
    return { rssKiB: 0, pssKiB: 0 };
  }
}

/** CPU seconds (user + system) the process has used so far; 0 once it is gone. */
export function cpuSecondsOf(pid: number): number {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may hold spaces; fields after it are counted from the closing parenthesis.
    const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(rest[11]) + Number(rest[12])) / TICKS_PER_SECOND;
  } catch {
    return 0;
  }
}

export function commOf(pid: number): string {
  try {
    return fs.readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
  } catch {
    return '?';
  }
}

/** Every descendant of `pid` (children, their children, ...), from /proc/<pid>/task/<tid>/children. */
export function descendantsOf(pid: number): number[] {
  const out: number[] = [];
  const walk = (p: number) => {
    let tasks: string[] = [];
    try {
      tasks = fs.readdirSync(`/proc/${p}/task`);
    } catch {
      return;
    }
    for (const t of tasks) {
      let kids = '';
      try {
        kids = fs.readFileSync(`/proc/${p}/task/${t}/children`, 'utf8').trim();
      } catch {
        continue;
      }
      for (const k of kids.split(/\s+/).filter(Boolean).map(Number)) {
        out.push(k);
        walk(k);
      }
    }
  };
  walk(pid);
  return out;
}

export interface GroupSample {
  rssKiB: number;
  pssKiB: number;
  cpuSeconds: number;
  byProcess: Record<string, ProcMem & { cpuSeconds: number }>;
}

/** One reading of a named group of processes (e.g. coordination + router + redis-server). */
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

/** Samples a group every `everyMs` and keeps the peak RSS/PSS, for phases where memory rises and falls. */
export class PeakSampler {
  peakRssKiB = 0;
  peakPssKiB = 0;
  private readonly timer: NodeJS.Timeout;
  private readonly pids: Record<string, number>;

  constructor(pids: Record<string, number>, everyMs = 250) {
    this.pids = pids;
    this.sample();
    this.timer = setInterval(() => this.sample(), everyMs);
  }

  private sample(): void {
    // RSS alone here: smaps_rollup walks every mapping and costs the server real time when read four times a second.
    let rss = 0;
    for (const pid of Object.values(this.pids)) rss += memOf(pid).rssKiB;
    this.peakRssKiB = Math.max(this.peakRssKiB, rss);
  }

  stop(): void {
    clearInterval(this.timer);
    this.sample();
  }
}
