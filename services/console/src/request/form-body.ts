// A small application/x-www-form-urlencoded reader with a hard size cap. The console's forms are a few short fields
// (user name, password, CSRF token), so anything over the cap is refused without being buffered: a client cannot make
// us hold megabytes per request. The one exception is the policy editor, which gets a larger cap (formLimitFor). The rest of a refused body is read and thrown away rather than left unread, because
// closing a connection with unread data resets it, and the router would then report a 502 instead of our answer.
import type { IncomingMessage } from 'node:http';

export const FORM_LIMIT_BYTES = 16 * 1024;
/**
 * The Access controls forms carry a whole policy file. 1 MiB is what the coordination service's admin API takes in one
 * request; a policy that large (thousands of rules) is past what anyone edits in a browser form.
 */
export const POLICY_FORM_LIMIT_BYTES = 1024 * 1024;

/** The size cap for the form posted to `path`. */
export function formLimitFor(path: string): number {
  return path === '/console/acls' || path.startsWith('/console/acls/') ? POLICY_FORM_LIMIT_BYTES : FORM_LIMIT_BYTES;
}

export class FormError extends Error {
  readonly status: number;
  constructor(status: number, message: string) {
    super(message);
    this.status = status;
  }
}

/** Reads and parses the body. Throws FormError 415 (not a form), 413 (too large) or 400 (aborted). */
export async function readForm(req: IncomingMessage, limit = FORM_LIMIT_BYTES): Promise<URLSearchParams> {
  const type = String(req.headers['content-type'] ?? '')
    .split(';')[0]
    .trim()
    .toLowerCase();
  if (type !== 'application/x-www-form-urlencoded') {
    req.resume();
    throw new FormError(415, 'This address takes an HTML form (application/x-www-form-urlencoded).');
  }
  const declared = req.headers['content-length'];
  if (declared !== undefined && Number(declared) > limit) {
    req.resume();
    throw new FormError(413, `The form is larger than ${limit} bytes.`);
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        // Stop buffering at once; the rest flows past with no listener keeping it.
        cleanup();
        req.resume();
        reject(new FormError(413, `The form is larger than ${limit} bytes.`));
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => {
      cleanup();
      resolve(new URLSearchParams(Buffer.concat(chunks).toString('utf8')));
    };
    const onError = () => {
      cleanup();
      reject(new FormError(400, 'The form was not received completely.'));
    };
    const cleanup = () => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      req.off('aborted', onError);
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    req.on('aborted', onError);
  });
}

/** One field as a string, "" when missing; a repeated field counts as missing so nobody sends two tokens. */
export function field(form: URLSearchParams, name: string): string {
  const all = form.getAll(name);
  return all.length === 1 ? all[0] : '';
}
