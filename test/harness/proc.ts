// What a running process uses, read from /proc (Linux): for tests that check memory and file descriptors stay
// bounded, and for the benchmarks' resource figures.
//   RSS  — /proc/<pid>/status VmRSS: resident memory, counting shared pages (the Node binary, libc) in every process
//          that maps them, so a sum over several processes overstates what they use together;
//   PSS  — /proc/<pid>/smaps_rollup Pss: each shared page divided among the processes sharing it, so sums add up
//          (reading it walks every mapping: it costs the process being measured real time);
//   CPU  — /proc/<pid>/stat utime+stime (fields 14, 15), in clock ticks of 1/100 s (USER_HZ on Linux);
//   fds  — the entries of /proc/<pid>/fd (sockets included).
import fs from 'node:fs';

const TICKS_PER_SECOND = 100;

function readKiB(text: string, field: string): number | null {
  const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(text);
  return m ? Number(m[1]) : null;
}

/** Resident memory in KiB; null once the process is gone (a zombie has no VmRSS either). */
export function rssKiBOf(pid: number): number | null {
  try {
    return readKiB(fs.readFileSync(`/proc/${pid}/status`, 'utf8'), 'VmRSS');
  } catch {
    return null;
  }
}

export interface ProcMem {
  rssKiB: number;
  pssKiB: number;
}

/** RSS and PSS in KiB (PSS = RSS where smaps_rollup cannot be read); zeros once the process is gone. */
export function memOf(pid: number): ProcMem {
  const rss = rssKiBOf(pid);
  if (rss === null) return { rssKiB: 0, pssKiB: 0 };
  let pss: number | null = null;
  try {
    pss = readKiB(fs.readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'), 'Pss');
  } catch {
    // an older kernel, or the process just went away
  }
  return { rssKiB: rss, pssKiB: pss ?? rss };
}

/** Open file descriptors; null once the process is gone. */
export function fdCountOf(pid: number): number | null {
  try {
    return fs.readdirSync(`/proc/${pid}/fd`).length;
  } catch {
    return null;
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

/** The command name the kernel keeps (15 characters at most, e.g. "redis-server"); "?" once the process is gone. */
export function commOf(pid: number): string {
  try {
    return fs.readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
  } catch {
    return '?';
  }
}

/** The command line, arguments joined by spaces; "" once the process is gone. */
export function cmdlineOf(pid: number): string {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ').trim();
  } catch {
    return '';
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
