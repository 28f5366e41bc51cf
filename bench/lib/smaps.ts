// Where a process's PSS lies, from /proc/<pid>/smaps: pages of the program file itself (for Node, the binary's code
// and read-only data, shared by every process of that binary and divided among them), pages private to the process
// (anonymous mappings: the V8 heap, malloc's heap and arenas, thread stacks), and the rest (shared libraries, other
// mapped files). bench/memory.ts prints the split, which says what one more Node process costs and what it shares.
import fs from 'node:fs';

export interface PssSplit {
  programKiB: number;
  anonKiB: number;
  otherKiB: number;
}

/** Zeros once the process is gone. */
export function pssSplitOf(pid: number): PssSplit {
  const out: PssSplit = { programKiB: 0, anonKiB: 0, otherKiB: 0 };
  let text: string;
  let program: string;
  try {
    text = fs.readFileSync(`/proc/${pid}/smaps`, 'utf8');
    program = fs.readlinkSync(`/proc/${pid}/exe`);
  } catch {
    return out;
  }
  let kind: keyof PssSplit = 'otherKiB';
  for (const line of text.split('\n')) {
    // A mapping's header: "start-end perms offset dev inode [path]"; its fields follow, one per line.
    const head = /^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ \S+\s*(.*)$/.exec(line);
    if (head) {
      const file = head[1];
      kind = file === program ? 'programKiB' : file === '' || file.startsWith('[') ? 'anonKiB' : 'otherKiB';
      continue;
    }
    if (line.startsWith('Pss:')) out[kind] += Number(line.split(/\s+/)[1]);
  }
  return out;
}
