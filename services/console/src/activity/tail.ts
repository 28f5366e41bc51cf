// The live tail's one reader: a dedicated Redis connection blocks in XREAD on the activity stream and hands every new
// entry to all open event streams in this process, so a hundred open Logs tabs cost one blocked connection, not a
// hundred. It runs only while somebody listens, and it starts from an explicit id (the newest entry when it
// starts), which subscribers learn through `ready` before they read their backlog, so no entry falls between the
// backlog and the live feed.
import type { Redis } from 'ioredis';
import { parseEntry, type ActivityEntry } from '../../../../shared/activity.ts';
import type { Logger } from '../../../../shared/log.ts';
import { K } from '../../../../shared/redis-keys.ts';

/** How long one XREAD blocks; also how long the reader lingers after the last subscriber leaves. */
const BLOCK_MS = 5_000;

type Listener = (e: ActivityEntry) => void;

export interface Subscription {
  /** Resolves once the reader is positioned; entries after the resolved id will be delivered. */
  ready: Promise<string>;
  close(): void;
}

export class ActivityTail {
  private readonly connect: () => Redis;
  private readonly log: Logger;
  private conn: Redis | null = null;
  private readonly listeners = new Set<Listener>();
  private running: Promise<void> | null = null;
  private position: Promise<string> | null = null;
  private stopped = false;

  constructor(connect: () => Redis, log: Logger) {
    this.connect = connect;
    this.log = log;
  }

  get listenerCount(): number {
    return this.listeners.size;
  }

  subscribe(fn: Listener): Subscription {
    this.listeners.add(fn);
    if (!this.running) this.start();
    return {
      ready: this.position!,
      close: () => {
        this.listeners.delete(fn);
      },
    };
  }

  private start(): void {
    this.conn ??= this.connect();
    const conn = this.conn;
    let resolvePos!: (id: string) => void;
    this.position = new Promise((r) => (resolvePos = r));
    this.running = (async () => {
      let last: string | null = null;
      let failing = false;
      while (this.listeners.size > 0 && !this.stopped) {
        try {
          if (last === null) {
            const rows = (await conn.xrevrange(K.activity, '+', '-', 'COUNT', 1)) as [string, string[]][];
            last = rows[0]?.[0] ?? '0-0';
            resolvePos(last);
          }
          const res = (await conn.xread('COUNT', 500, 'BLOCK', BLOCK_MS, 'STREAMS', K.activity, last)) as [string, [string, string[]][]][] | null;
          if (failing) this.log.info('live tail reading again');
          failing = false;
          for (const [, rows] of res ?? []) {
            for (const [id, fields] of rows) {
              last = id;
              const e = parseEntry(id, fields);
              for (const l of this.listeners) {
                try {
                  l(e);
                } catch (err) {
                  this.log.warn('live tail listener failed', { error: (err as Error).message });
                }
              }
            }
          }
        } catch (err) {
          if (this.stopped) break;
          if (!failing) this.log.warn('live tail cannot read the activity log; retrying', { error: (err as Error).message });
          failing = true;
          await new Promise((r) => setTimeout(r, 1_000));
        }
      }
      this.running = null;
      // Subscribers that arrived while we were leaving find running === null only after this point.
      if (this.listeners.size > 0 && !this.stopped) this.start();
    })();
  }

  stop(): void {
    this.stopped = true;
    this.listeners.clear();
    this.conn?.disconnect();
  }
}
