// Reads and discards whatever is left of a request body before the console answers. A post refused before its body
// was read (not a form, too large, a CSRF refusal) would otherwise be answered while the router is still sending the
// body; the console closing the socket then turns the router's write into EPIPE and the user's answer into a 502.
import type { Context, Next } from 'koa';

/** Bodies larger than this are not drained: the connection is closed instead (the router then reports a 502). */
const DRAIN_LIMIT = 1024 * 1024;

export async function drainRequestBody(ctx: Context, next: Next): Promise<void> {
  try {
    await next();
  } finally {
    const req = ctx.req;
    const declared = Number(req.headers['content-length'] ?? 0);
    const hasBody = declared > 0 || req.headers['transfer-encoding'] !== undefined;
    if (hasBody && !req.complete && !req.destroyed && declared <= DRAIN_LIMIT) {
      await new Promise<void>((resolve) => {
        let seen = 0;
        const done = () => {
          req.off('data', onData);
          resolve();
        };
        const onData = (c: Buffer) => {
          seen += c.length;
          if (seen > DRAIN_LIMIT) {
            req.destroy();
            done();
          }
        };
        req.on('data', onData);
        req.once('end', done);
        req.once('close', done);
        req.once('error', done);
        req.resume();
      });
    }
  }
}
