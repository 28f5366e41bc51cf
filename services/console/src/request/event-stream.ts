// The Server-Sent Events response every live view of the console uses (the Logs tail, activity/stream-route.ts; the
// Machines list, a machine's page and the Routes view, network/machines-stream.ts). What it does for them:
//   retry: 3000\n: connected\n\n        at once, so proxies forward the headers and the browser shows "connected"
//   : ping <time>\n\n                    every HEARTBEAT_MS, so proxies and browsers see life — after checking that the
//                                        session is still alive (signed out elsewhere, expired, account disabled)
//   event: end\ndata: {"reason":"signed-out"}\n\n   instead of the ping when it is not; the stream then ends
// A client that does not read is dropped once MAX_BUFFERED bytes wait for it, rather than buffered for: EventSource
// reconnects (the Logs tail catches up from Redis with Last-Event-ID), so a stalled tab costs a reconnect, not our
// memory. The stream is in openStreams for shutdown. X-Accel-Buffering: no asks nginx not to buffer; Caddy and Traefik
// pass text/event-stream through unbuffered.
import { PassThrough } from 'node:stream';
import type { Redis } from 'ioredis';
import type { Accounts } from '../auth/accounts.ts';
import { sessionId } from '../auth/session.ts';
import { sessionStillLive } from '../auth/session-check.ts';
import type { ConsoleContext } from './context.ts';
import { openStreams } from './open-streams.ts';

export const HEARTBEAT_MS = 15_000;
const MAX_BUFFERED = 1024 * 1024;

export interface EventStreamDeps {
  redis: Redis;
  accounts: Accounts;
}

export interface EventStreamHooks {
  /** After each heartbeat that found the session alive (a view that goes stale with time refreshes here). */
  onBeat?: () => void;
  /** Once, when the stream closes for whatever reason (client gone, signed out, shutdown, dropped). */
  onClose: () => void;
}

/** Makes this response an event stream; returns the function that sends an event (or comment) on it. */
export function openEventStream(ctx: ConsoleContext, d: EventStreamDeps, hooks: EventStreamHooks): (chunk: string) => void {
  const sid = sessionId(ctx);
  const stream = new PassThrough();
  openStreams.add(stream);
  ctx.req.socket.setTimeout(0);
  ctx.req.socket.setNoDelay(true);
  ctx.status = 200;
  ctx.type = 'text/event-stream; charset=utf-8';
  ctx.set('Cache-Control', 'no-cache');
  ctx.set('X-Accel-Buffering', 'no');
  ctx.body = stream;
  stream.write('retry: 3000\n: connected\n\n');

  const send = (chunk: string) => {
    if (stream.destroyed || stream.writableEnded) return;
    if (stream.writableLength > MAX_BUFFERED) {
      stream.destroy();
      return;
    }
    stream.write(chunk);
  };

  const beat = setInterval(() => {
    void (async () => {
      let live = true;
      try {
        live = await sessionStillLive(d.redis, d.accounts, sid);
      } catch {
        // Store trouble is not a sign-out: keep the stream, the next beat checks again.
      }
      if (stream.destroyed || stream.writableEnded) return;
      if (!live) {
        stream.end('event: end\ndata: {"reason":"signed-out"}\n\n');
        return;
      }
      send(`: ping ${new Date().toISOString()}\n\n`);
      hooks.onBeat?.();
    })();
  }, HEARTBEAT_MS);

  stream.once('close', () => {
    clearInterval(beat);
    openStreams.delete(stream);
    hooks.onClose();
  });
  ctx.res.once('close', () => stream.destroy());
  return send;
}
