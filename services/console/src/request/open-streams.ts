// Every open event stream of this console process (the Logs tail, the live Machines and Routes views), so shutdown can
// end them all at once: browsers reconnect to the next process on their own.
//
// And how many may be open, by whom. The process holds at most MAX_STREAMS; one session at most MAX_PER_SESSION and
// one account (all its sessions together) at most MAX_PER_ACCOUNT, so no single signed-in person, even an auditor,
// can take the slots the others need for their live log and live Machines view.
import type { PassThrough } from 'node:stream';
import type { ConsoleContext } from './context.ts';
import { currentSession, sessionId } from '../auth/session.ts';
import { PageError } from '../errors.ts';

export const openStreams = new Set<PassThrough>();

/** Open streams per console process. Each is cheap, but not free. */
export const MAX_STREAMS = 500;
/** A person has a few tabs open (Logs, Machines, a machine's page); a dozen is already a lot. */
export const MAX_PER_SESSION = 12;
/** A few people or browsers sharing an account; far below MAX_STREAMS, so the rest stays for other accounts. */
export const MAX_PER_ACCOUNT = 30;

let total = 0;
const bySession = new Map<string, number>();
const byAccount = new Map<string, number>();

function bump(m: Map<string, number>, key: string, by: number): void {
  const n = (m.get(key) ?? 0) + by;
  if (n <= 0) m.delete(key);
  else m.set(key, n);
}

/**
 * Takes a stream slot for this request's session and account, or throws the refusal (429 for the session's or the
 * account's share, 503 when the whole process is full). Returns the release, safe to call more than once; call it when
 * the stream ends or the request fails before it starts.
 */
export function claimStreamSlot(ctx: ConsoleContext, what: string): () => void {
  const s = currentSession(ctx);
  const session = sessionId(ctx) ?? '';
  const account = s?.accountId ?? '';
  if ((bySession.get(session) ?? 0) >= MAX_PER_SESSION) {
    throw new PageError(429, `Too many ${what}`, `This browser session already has ${MAX_PER_SESSION} ${what} open; close some tabs and retry.`, {
      'Retry-After': '30',
    });
  }
  if ((byAccount.get(account) ?? 0) >= MAX_PER_ACCOUNT) {
    throw new PageError(
      429,
      `Too many ${what}`,
      `Your account already has ${MAX_PER_ACCOUNT} ${what} open (all its sessions together); close some and retry.`,
      {
        'Retry-After': '30',
      },
    );
  }
  if (total >= MAX_STREAMS) {
    throw new PageError(503, `Too many ${what}`, `Too many ${what} are open on this console; close some tabs and retry.`, { 'Retry-After': '30' });
  }
  total++;
  bump(bySession, session, 1);
  bump(byAccount, account, 1);
  let released = false;
  return () => {
    if (released) return;
    released = true;
    total--;
    bump(bySession, session, -1);
    bump(byAccount, account, -1);
  };
}
