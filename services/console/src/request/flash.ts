// One-time notices carried across a redirect (post, redirect, get): "Machine renamed", "User deleted". Kept in the
// server-side session, shown by the next page and then dropped. Never holds secrets: a new pre-auth key or password
// is shown in the answer to the POST itself, so it never rests in Redis.
import type { ConsoleContext } from './context.ts';

export interface Flash {
  kind: 'ok' | 'error';
  text: string;
}

export function setFlash(ctx: ConsoleContext, kind: Flash['kind'], text: string): void {
  const s = ctx.session;
  if (s) s.flash = { kind, text };
}

export function takeFlash(ctx: ConsoleContext): Flash | null {
  const s = ctx.session;
  const f = s?.flash;
  if (!f) return null;
  delete s.flash;
  return typeof f.text === 'string' && (f.kind === 'ok' || f.kind === 'error') ? f : null;
}
