// Every open event stream of this console process (the Logs tail, the live machine views), so shutdown can end them
// all at once: browsers reconnect to the next process on their own.
import type { PassThrough } from 'node:stream';

export const openStreams = new Set<PassThrough>();

/** Open streams per console process. Each is cheap, but not free. */
export const MAX_STREAMS = 500;
