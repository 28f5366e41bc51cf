// The backoff between restarts of a process that keeps exiting soon after it starts. The supervisor (pm2) restarts an
// exited process at once (ecosystem.config.js says why it has no restart delay of its own); each process waits here,
// before it starts serving, when its previous start was recent and did not end in a clean stop:
//
//   previous start less than RESET_AFTER_MS ago, and not stopped cleanly -> wait FIRST_MS, then ×1.5 each time, to MAX_MS
//   otherwise (first start, ran long enough, or a clean stop)            -> no wait
//
// One small file per process in the private run directory, <name>.start: JSON { at, waitedMs }. A clean stop
// (SIGTERM/SIGINT handled, exit 0) removes it, so a deliberate restart is never slowed down.
import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

export const FIRST_MS = 500;
export const MAX_MS = 15_000;
export const RESET_AFTER_MS = 30_000;

interface Record {
  at: number;
  waitedMs: number;
}

function file(runDir: string, name: string): string {
  return path.join(runDir, `${name}.start`);
}

function read(runDir: string, name: string): Record | null {
  try {
    const r = JSON.parse(fs.readFileSync(file(runDir, name), 'utf8')) as Partial<Record>;
    return typeof r.at === 'number' && typeof r.waitedMs === 'number' ? (r as Record) : null;
  } catch {
    return null;
  }
}

/** How long this start waits, and notes it as the latest start. */
export function restartDelay(runDir: string, name: string, now = Date.now()): number {
  const prev = read(runDir, name);
  let wait = 0;
  if (prev !== null && now - prev.at < RESET_AFTER_MS) wait = prev.waitedMs === 0 ? FIRST_MS : Math.min(MAX_MS, Math.floor(prev.waitedMs * 1.5));
  try {
    // Noted as starting once the wait is over, so the wait itself does not count as running.
    fs.writeFileSync(file(runDir, name), JSON.stringify({ at: now + wait, waitedMs: wait }), { mode: 0o600 });
  } catch {
    // An unwritable run directory only loses the backoff; the process itself reports the directory when it listens.
  }
  return wait;
}

/** Waits out the backoff, saying so on stderr when there is one. */
export async function waitAfterQuickExit(runDir: string, name: string): Promise<void> {
  const wait = restartDelay(runDir, name);
  if (wait === 0) return;
  process.stderr.write(
    `${new Date().toISOString()} WARN  ${name}: started again soon after an unclean exit; waiting ${wait} ms before starting (restart backoff)\n`,
  );
  await sleep(wait);
}

/** A clean stop: the next start is not a restart after a failure. */
export function stoppedCleanly(runDir: string, name: string): void {
  try {
    fs.rmSync(file(runDir, name), { force: true });
  } catch {
    // No run directory to clean (it could not be created): nothing was noted either.
  }
}
