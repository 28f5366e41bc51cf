// The live tail: GET /console/logs/stream, Server-Sent Events. Takes the Logs filters, and where to start:
// the Last-Event-ID header (EventSource sends it when it reconnects) or after=<id> (the newest id the page showed).
// Events, one per new entry that passes the filter:
//   id: <entry id>\nevent: entry\ndata: <ActivityEntry JSON>\n\n
// and, on their own:
//   event: end\ndata: {"reason":"signed-out"}   the session ended; the page stops and offers to sign in again
//   event: reload\ndata: {}                      too much was missed to catch up; the page reloads instead
//   : ping                                       a comment every HEARTBEAT_MS, so proxies and browsers see life
// X-Accel-Buffering: no asks nginx not to buffer; Caddy and Traefik pass text/event-stream through unbuffered.
import type Router from '@koa/router';
import type { Context, Middleware } from 'koa';
import type { Redis } from 'ioredis';
import { PassThrough } from 'node:stream';
import type { ActivityEntry } from '../../../../shared/activity.ts';
import type { Logger } from '../../../../shared/log.ts';
import { K } from '../../../../shared/redis-keys.ts';
import type { Accounts } from '../auth/accounts.ts';
import { sessionId } from '../auth/session.ts';
import { sessionStillLive } from '../auth/session-check.ts';
import { PageError } from '../errors.ts';
import { claimStreamSlot, openStreams } from '../request/open-streams.ts';
import { readFilter } from './filter.ts';
import { compareIds, entriesAfter, STREAM_ID_RE } from './query.ts';
import type { ActivityTail } from './tail.ts';

export const HEARTBEAT_MS = 15_000;
/** Entries a reconnecting client may catch up on; beyond that it reloads the page. */
const CATCH_UP_MAX = 500;
/**
 * Bytes a stream may have waiting for a client that does not read. Past this it is closed; EventSource reconnects with
 * Last-Event-ID and catches up from Redis, so a stalled tab costs a reconnect, not our memory.
 */
const MAX_BUFFERED = 1024 * 1024;

export interface StreamDeps {
  redis: Redis;
  accounts: Accounts;
  tail: ActivityTail;
  log: Logger;
  gate: Middleware;
}

function startId(ctx: Context): string | null {
  const header = ctx.get('last-event-id');
  if (STREAM_ID_RE.test(header)) return header;
  const q = ctx.query.after;
  if (typeof q === 'string' && STREAM_ID_RE.test(q)) return q;
  return null;
}

function frame(e: ActivityEntry): string {
  return `id: ${e.id}\nevent: entry\ndata: ${JSON.stringify(e)}\n\n`;
}

export function streamRoute(router: Router, d: StreamDeps): void {
  router.get('/console/logs/stream', d.gate, async (ctx) => {
    const f = readFilter(ctx.query);
    if (f.errors.length) throw new PageError(400, 'Bad filter', f.errors.join(' '));
    const release = claimStreamSlot(ctx, 'live tails');
    const sid = sessionId(ctx);
    let cursor = startId(ctx);

    // Subscribe before reading the backlog; entries arriving meanwhile wait in `queued`.
    let queued: ActivityEntry[] | null = [];
    let out: PassThrough | null = null;
    const deliver = (e: ActivityEntry) => {
      if (queued) {
        queued.push(e);
        return;
      }
      if (!out || compareIds(e.id, cursor!) <= 0) return;
      cursor = e.id;
      if (f.test(e)) send(frame(e));
    };
    const send = (chunk: string) => {
      if (!out || out.destroyed) return;
      if (out.writableLength > MAX_BUFFERED) {
        out.destroy();
        return;
      }
      out.write(chunk);
    };
    // Registered before any await: a client that leaves while we read the backlog must not leave a stream behind.
    let gone = false;
    ctx.res.once('close', () => {
      gone = true;
      out?.destroy();
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

    out = new PassThrough();
    const stream = out;
    openStreams.add(stream);
    ctx.req.socket.setTimeout(0);
    ctx.req.socket.setNoDelay(true);
    ctx.status = 200;
    ctx.type = 'text/event-stream; charset=utf-8';
    ctx.set('Cache-Control', 'no-cache');
    ctx.set('X-Accel-Buffering', 'no');
    ctx.body = stream;
    // The first bytes go out at once, so proxies forward the headers and the browser shows the tail as connected.
    stream.write(`retry: 3000\n: connected\n\n`);

    if (backlog.length > CATCH_UP_MAX) {
      send('event: reload\ndata: {}\n\n');
    } else {
      for (const e of backlog) {
        cursor = e.id;
        if (f.test(e)) send(frame(e));
      }
    }
    const waiting = queued;
    queued = null;
    for (const e of waiting) deliver(e);

    // Heartbeat, and a check that the session is still alive (signed out elsewhere, expired, account disabled).
    const beat = setInterval(() => {
      void (async () => {
        let live = true;
        try {
          live = await sessionStillLive(d.redis, d.accounts, sid);
        } catch {
          // Store trouble is not a sign-out: keep the stream, the next beat checks again.
        }
        if (!live) {
          stream.end('event: end\ndata: {"reason":"signed-out"}\n\n');
          return;
        }
        send(`: ping ${new Date().toISOString()}\n\n`);
      })();
    }, HEARTBEAT_MS);

    const cleanup = () => {
      clearInterval(beat);
      sub.close();
      openStreams.delete(stream);
      release();
    };
    stream.once('close', cleanup);
  });
}
