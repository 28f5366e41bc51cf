// Pieces every admin-API route module uses: what a call carries, how a handler looks, and the body field readers.
import type { IncomingMessage } from 'node:http';
import { HseError } from '../../../../shared/errors.ts';

export interface Call {
  params: string[];
  body: Record<string, unknown>;
  actor: string;
  ip: string;
}

export type Handler = (c: Call) => Promise<unknown>;

/** Routes as "METHOD /path/:id" → handler; ":id" matches one path segment, passed in `params`. */
export type Routes = Record<string, Handler>;

/** Large enough for a big policy file (hundreds of rules with comments); the socket is private. */
const MAX_BODY = 1024 * 1024;

export async function readBody(req: IncomingMessage): Promise<Record<string, unknown>> {
  const chunks: Buffer[] = [];
  let n = 0;
  for await (const c of req as AsyncIterable<Buffer>) {
    n += c.length;
    if (n > MAX_BODY) throw new HseError(413, 'request body too large');
    chunks.push(c);
  }
  if (n === 0) return {};
  try {
    const v = JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown;
    if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new Error();
    return v as Record<string, unknown>;
  } catch {
    throw new HseError(400, 'request body must be a JSON object');
  }
}

export function str(b: Record<string, unknown>, k: string): string {
  const v = b[k];
  if (typeof v !== 'string' || v.trim() === '') throw new HseError(400, `"${k}" is required`);
  return v.trim();
}

export function id(s: string): number {
  if (!/^\d{1,12}$/.test(s)) throw new HseError(400, `"${s}" is not an id`);
  return Number(s);
}
