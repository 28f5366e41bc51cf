// Reads and discards whatever is left of a request body before the console answers. A post refused before its body
// was read (not a form, too large, a CSRF refusal) would otherwise be answered while the router is still sending the
// body; the console closing the socket then turns the router's write into EPIPE and the user's answer into a 502.
import type { ConsoleContext, Next } from './context.ts';

/**
 * The answer waits for at most this much of a refused body. Past it (or when the body is declared larger) the answer
 * goes out at once and the rest is still read and thrown away as it arrives: the connection is never closed under a
 * body the router is still sending, which would cost the user the answer (a reset instead of the 413 or 415).
 */
const DRAIN_LIMIT = 1024 * 1024;

export async function drainRequestBody(ctx: ConsoleContext, next: Next): Promise<void> {
  try {
    await next();
  } finally {
    const req = ctx.req;
    const declared = Number(req.headers['content-length'] ?? 0);
    const hasBody = declared > 0 || req.headers['transfer-encoding'] !== undefined;
    if (hasBody && !req.complete && !req.destroyed) {
      // Flowing with no one keeping the data: every byte that arrives from here on is discarded.
      req.resume();
      if (declared <= DRAIN_LIMIT) {
        await new Promise<void>((resolve) => {
          let seen = 0;
          const done = () => {
            req.off('data', onData);
            resolve();
          };
          const onData = (c: Buffer) => {
            seen += c.length;
            if (seen > DRAIN_LIMIT) done();
          };
          req.on('data', onData);
          req.once('end', done);
          req.once('close', done);
          req.once('error', done);
        });
      }
    }
  }
}
