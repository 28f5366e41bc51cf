// Reading the activity log for the Logs page, the API and exports. The log is a Redis stream whose ids are
// "<ms>-<seq>", so pages are id ranges: "older" continues below the last id shown (XREVRANGE), "newer" above the
// first (XRANGE), and a time range is an id range too. Filters other than time are applied while scanning; one
// request scans at most SCAN_BUDGET entries, and says so (partial) when a sparse filter needs more than that, so a
// needle in a large log costs several clicks rather than one very slow request.
import type { Redis } from 'ioredis';
import { parseEntry, type ActivityEntry } from '../../../../shared/activity.ts';
import { K } from '../../../../shared/redis-keys.ts';
import type { Filter } from './filter.ts';

export const SCAN_BUDGET = 20_000;
const BATCH = 500;
export const MAX_PAGE = 500;
export const DEFAULT_PAGE = 50;

export const STREAM_ID_RE = /^\d{1,15}-\d{1,19}$/;

export function compareIds(a: string, b: string): number {
  const [am, as] = a.split('-').map(BigInt);
  const [bm, bs] = b.split('-').map(BigInt);
  if (am !== bm) return am < bm ? -1 : 1;
  return as === bs ? 0 : as < bs ? -1 : 1;
}

export interface PageRequest {
  /** Show entries older than this id. */
  before?: string;
  /** Show entries newer than this id. */
  after?: string;
  limit: number;
}

export interface LogPage {
  /** Newest first. */
  entries: ActivityEntry[];
  /** Cursor for the next older page (before=), or null when nothing older matches. */
  older: string | null;
  /** Cursor for the next newer page (after=), or null on the newest page. */
  newer: string | null;
  /** True when the scan budget ran out before the page filled: `older` continues the search. */
  partial: boolean;
  /** Id of the newest entry in the whole log when this page is the newest one ("" when the log is empty): where a live tail starts. */
  tailFrom: string | null;
}

type Row = [string, string[]];

/** Upper bound (inclusive id, or exclusive "(id") for scanning down from `before` and the filter's `to`. */
function upperBound(f: Filter, before?: string): string {
  const to = f.toMs !== undefined ? `${f.toMs}-18446744073709551615` : null;
  if (before && (!to || compareIds(before, to) <= 0)) return `(${before}`;
  return to ?? '+';
}

function lowerBound(f: Filter, after?: string): string {
  const from = f.fromMs !== undefined ? `${f.fromMs}-0` : null;
  if (after && (!from || compareIds(after, from) >= 0)) return `(${after}`;
  return from ?? '-';
}

async function newestId(redis: Redis): Promise<string> {
  const rows = (await redis.xrevrange(K.activity, '+', '-', 'COUNT', 1)) as Row[];
  return rows[0]?.[0] ?? '0-0';
}

export async function findPage(redis: Redis, f: Filter, req: PageRequest): Promise<LogPage> {
  const limit = Math.min(Math.max(1, req.limit), MAX_PAGE);
  if (req.after && !req.before) return findNewer(redis, f, req.after, limit);
  // Taken before the scan, so a tail started from it cannot miss an entry written while we scan.
  const tailFrom = req.before ? null : await newestId(redis);
  const found: ActivityEntry[] = [];
  let end = upperBound(f, req.before);
  const start = lowerBound(f);
  let scanned = 0;
  let lastScanned: string | null = null;
  let exhausted = false;
  while (found.length <= limit) {
    if (scanned >= SCAN_BUDGET) break;
    const rows = (await redis.xrevrange(K.activity, end, start, 'COUNT', BATCH)) as Row[];
    for (const [id, fields] of rows) {
      scanned++;
      lastScanned = id;
      const e = parseEntry(id, fields);
      if (f.test(e)) {
        found.push(e);
        if (found.length > limit) break;
      }
    }
    if (rows.length < BATCH) {
      exhausted = found.length <= limit;
      break;
    }
    end = `(${rows[rows.length - 1][0]}`;
  }
  const more = found.length > limit;
  const entries = found.slice(0, limit);
  const partial = !more && !exhausted && lastScanned !== null;
  return {
    entries,
    older: more ? entries[entries.length - 1].id : partial ? lastScanned : null,
    newer: req.before ? (entries[0]?.id ?? req.before) : null,
    partial,
    tailFrom: tailFrom,
  };
}

async function findNewer(redis: Redis, f: Filter, after: string, limit: number): Promise<LogPage> {
  const found: ActivityEntry[] = [];
  let start = lowerBound(f, after);
  const end = f.toMs !== undefined ? `${f.toMs}-18446744073709551615` : '+';
  let scanned = 0;
  let lastScanned: string | null = null;
  let exhausted = false;
  while (found.length <= limit && scanned < SCAN_BUDGET) {
    const rows = (await redis.xrange(K.activity, start, end, 'COUNT', BATCH)) as Row[];
    for (const [id, fields] of rows) {
      scanned++;
      lastScanned = id;
      const e = parseEntry(id, fields);
      if (f.test(e)) {
        found.push(e);
        if (found.length > limit) break;
      }
    }
    if (rows.length < BATCH) {
      exhausted = found.length <= limit;
      break;
    }
    start = `(${rows[rows.length - 1][0]}`;
  }
  const more = found.length > limit;
  const shown = found.slice(0, limit);
  const partial = !more && !exhausted && lastScanned !== null;
  const entries = shown.reverse();
  return {
    entries,
    older: entries.length ? entries[entries.length - 1].id : after,
    newer: more ? entries[0].id : partial ? lastScanned : null,
    partial,
    tailFrom: null,
  };
}

/** Every matching entry, newest first, up to `max`, in batches (for exports). */
export async function* findAll(redis: Redis, f: Filter, max: number): AsyncGenerator<ActivityEntry> {
  let end = upperBound(f);
  const start = lowerBound(f);
  let sent = 0;
  for (;;) {
    const rows = (await redis.xrevrange(K.activity, end, start, 'COUNT', 1000)) as Row[];
    for (const [id, fields] of rows) {
      const e = parseEntry(id, fields);
      if (!f.test(e)) continue;
      yield e;
      if (++sent >= max) return;
    }
    if (rows.length < 1000) return;
    end = `(${rows[rows.length - 1][0]}`;
  }
}

/** Entries after `after`, oldest first, at most `max` (+1 so the caller can tell there were more). */
export async function entriesAfter(redis: Redis, after: string, max: number): Promise<ActivityEntry[]> {
  const rows = (await redis.xrange(K.activity, `(${after}`, '+', 'COUNT', max + 1)) as Row[];
  return rows.map(([id, fields]) => parseEntry(id, fields));
}
