// The live tail: GET /console/logs/stream, Server-Sent Events. Takes the Logs filters, and where to start:
// the Last-Event-ID header (EventSource sends it when it reconnects) or after=<id> (the newest id the page showed).
// Events, one per new entry that passes the filter:
//   id: <entry id>\nevent: entry\ndata: <ActivityEntry JSON>\n\n
// and, on their own:
//   event: end\ndata: {"reason":"signed-out"}   the session ended; the page stops and offers to sign in again
//   event: reload\ndata: {}                      too much was missed to catch up; the page reloads instead
// plus the heartbeat of every console event stream (request/event-stream.ts). A client that falls too far behind is
// dropped; EventSource reconnects with Last-Event-ID and catches up from Redis.
import type { Redis } from 'ioredis';
import type { ActivityEntry } from '../../../../shared/activity.ts';
import type { Logger } from '../../../../shared/log.ts';
import { K } from '../../../../shared/redis-keys.ts';
import type { Accounts } from '../auth/accounts.ts';
import { PageError } from '../errors.ts';
import { openEventStream } from '../request/event-stream.ts';
import { claimStreamSlot } from '../request/open-streams.ts';
import { readFilter } from './filter.ts';
import { compareIds, entriesAfter, STREAM_ID_RE } from './query.ts';
import type { ActivityTail } from './tail.ts';
import type { ConsoleContext, ConsoleMiddleware, ConsoleRouter } from '../request/context.ts';

/** Entries a reconnecting client may catch up on; beyond that it reloads the page. */
const CATCH_UP_MAX = 500;

export interface StreamDeps {
  redis: Redis;
  accounts: Accounts;
  tail: ActivityTail;
  log: Logger;
  gate: ConsoleMiddleware;
}

function startId(ctx: ConsoleContext): string | null {
  const header = ctx.get('last-event-id');
  if (STREAM_ID_RE.test(header)) return header;
  const q = ctx.query.after;
  if (typeof q === 'string' && STREAM_ID_RE.test(q)) return q;
  return null;
}

function frame(e: ActivityEntry): string {
  return `id: ${e.id}\nevent: entry\ndata: ${JSON.stringify(e)}\n\n`;
}

export function streamRoute(router: ConsoleRouter, d: StreamDeps): void {
  router.get('/console/logs/stream', d.gate, async (ctx) => {
    const f = readFilter(ctx.query);
    if (f.errors.length) throw new PageError(400, 'Bad filter', f.errors.join(' '));
    const release = claimStreamSlot(ctx, 'live tails');
    let cursor = startId(ctx);

    // Subscribe before reading the backlog; entries arriving meanwhile wait in `queued`.
    let queued: ActivityEntry[] | null = [];
    let send: ((chunk: string) => void) | null = null;
    const deliver = (e: ActivityEntry) => {
      if (queued) {
        queued.push(e);
        return;
      }
      if (!send || compareIds(e.id, cursor!) <= 0) return;
      cursor = e.id;
      if (f.test(e)) send(frame(e));
    };
    // Registered before any await: a client that leaves while we read the backlog must not leave a stream behind.
    let gone = false;
    ctx.res.once('close', () => {
      gone = true;
      release();
    });
    const sub = d.tail.subscribe(deliver);
    let backlog: ActivityEntry[];
    try {
      await sub.ready;
      if (cursor === null) {
        const rows = (await d.redis.xrevrange(K.activity, '+', '-', 'COUNT', 1)) as [string, string[]][];
        cursor = rows[0]?.[0] ?? '0-0';
      }
      backlog = await entriesAfter(d.redis, cursor, CATCH_UP_MAX);
    } catch (e) {
      sub.close();
      release();
      throw e;
    }
    if (gone) {
      sub.close();
      release();
      return;
    }

    const out = openEventStream(ctx, d, {
      onClose: () => {
        sub.close();
        release();
      },
    });
    send = out;

    if (backlog.length > CATCH_UP_MAX) {
      out('event: reload\ndata: {}\n\n');
    } else {
      for (const e of backlog) {
        cursor = e.id;
        if (f.test(e)) out(frame(e));
      }
    }
    const waiting = queued;
    queued = null;
    for (const e of waiting) deliver(e);
  });
}
