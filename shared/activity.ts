// The activity log: who did what, from which client address, to what. Every process writes through record(); the
// console reads, filters, exports and tails it. Stored as a Redis stream, whose entry ids are the UTC time in
// milliseconds, so paging and time ranges are range queries. Size is bounded by HSE_ACTIVITY_MAX_ENTRIES (trimmed on
// every write) and age by HSE_ACTIVITY_RETENTION_DAYS (trimmed by prune()).
import type { Redis } from 'ioredis';
import { K } from './redis-keys.ts';

export interface ActivityInput {
  /** Dotted verb, e.g. "console.signin", "console.signin_failed", "node.register", "node.delete". */
  action: string;
  /** Console account, "device:<hostname>" (a client registering), "cli", or "system" (the relay's refusals, timers). */
  actor: string;
  /** The client address as the router resolved it; "" when there is none (CLI, background jobs). */
  ip: string;
  /** What the action was done to, e.g. a node name or user name. */
  target?: string;
  /** Free-form details (what changed). No secrets. */
  details?: Record<string, unknown>;
}

export interface ActivityEntry {
  id: string;
  /** ISO 8601 UTC. */
  time: string;
  action: string;
  actor: string;
  ip: string;
  target: string;
  details: Record<string, unknown>;
}

export interface ActivityLimits {
  maxEntries: number;
  retentionDays: number;
}

/**
 * The activity-log writer: built once per process with the retention limits and passed to whatever records entries,
 * so every writer trims the same way.
 */
export class ActivityLog {
  readonly redis: Redis;
  readonly limits: ActivityLimits;
  constructor(redis: Redis, limits: ActivityLimits) {
    this.redis = redis;
    this.limits = limits;
  }

  /** Appends an entry (trimming the stream to HSE_ACTIVITY_MAX_ENTRIES, approximately) and returns its id. */
  async record(e: ActivityInput): Promise<string> {
    const id = await this.redis.xadd(
      K.activity,
      'MAXLEN',
      '~',
      String(this.limits.maxEntries),
      '*',
      'action',
      e.action,
      'actor',
      e.actor,
      'ip',
      e.ip,
      'target',
      e.target ?? '',
      'details',
      JSON.stringify(e.details ?? {}),
    );
    return id as string;
  }

  /** Drops entries older than the retention period. Cheap; run at start and hourly. */
  async prune(now = Date.now()): Promise<number> {
    const minId = `${now - this.limits.retentionDays * 86_400_000}-0`;
    return (await this.redis.xtrim(K.activity, 'MINID', '~', minId)) as number;
  }
}

/** The retention limits from the settings. */
export function activityLimits(cfg: { activityMaxEntries: number; activityRetentionDays: number }): ActivityLimits {
  return { maxEntries: cfg.activityMaxEntries, retentionDays: cfg.activityRetentionDays };
}

export function parseEntry(id: string, fields: string[]): ActivityEntry {
  const m: Record<string, string> = {};
  for (let i = 0; i + 1 < fields.length; i += 2) m[fields[i]] = fields[i + 1];
  let details: Record<string, unknown> = {};
  try {
    details = JSON.parse(m.details ?? '{}') as Record<string, unknown>;
  } catch {
    details = { raw: m.details };
  }
  return {
    id,
    time: new Date(Number(id.split('-')[0])).toISOString(),
    action: m.action ?? '',
    actor: m.actor ?? '',
    ip: m.ip ?? '',
    target: m.target ?? '',
    details,
  };
}

/** Newest first, `count` entries with ids at most `before` (exclusive when given). */
export async function listRecent(redis: Redis, count: number, before?: string, after?: string): Promise<ActivityEntry[]> {
  const end = before ? `(${before}` : '+';
  const start = after ? `(${after}` : '-';
  const rows = (await redis.xrevrange(K.activity, end, start, 'COUNT', count)) as [string, string[]][];
  return rows.map(([id, f]) => parseEntry(id, f));
}
