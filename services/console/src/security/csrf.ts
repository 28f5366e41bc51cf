// CSRF tokens. A signed-in session carries one random token (created at sign-in); every state-changing request must
// send it back in the form field `csrf` (or the X-CSRF-Token header for scripts). The sign-in form has no session yet,
// so its token lives in a short-lived signed cookie instead (double submit): no Redis write for anonymous visitors,
// and a site that cannot read our pages cannot know the value. Comparisons are constant-time.
import crypto from 'node:crypto';
import type { ConsoleContext } from '../request/context.ts';

export const CSRF_FIELD = 'csrf';
export const CSRF_HEADER = 'x-csrf-token';

export function newToken(): string {
  return crypto.randomBytes(32).toString('base64url');
}

/** Constant-time equality that also hides the length of the expected value (both sides are hashed first). */
export function tokensMatch(given: string, expected: string): boolean {
  if (given === '' || expected === '') return false;
  const a = crypto.createHash('sha256').update(given).digest();
  const b = crypto.createHash('sha256').update(expected).digest();
  return crypto.timingSafeEqual(a, b);
}

export interface LoginCsrfOptions {
  cookieName: string;
  secure: boolean;
}

const LOGIN_TOKEN_MAX_AGE_MS = 60 * 60 * 1000;

/** The sign-in form's token: the one already in the (signed) cookie, else a new one set now. */
export function loginToken(ctx: ConsoleContext, opts: LoginCsrfOptions): string {
  const existing = ctx.cookies.get(opts.cookieName, { signed: true });
  if (existing && /^[A-Za-z0-9_-]{43}$/.test(existing)) return existing;
  const token = newToken();
  ctx.cookies.set(opts.cookieName, token, {
    signed: true,
    httpOnly: true,
    sameSite: 'lax',
    secure: opts.secure,
    path: '/console',
    maxAge: LOGIN_TOKEN_MAX_AGE_MS,
    overwrite: true,
  });
  return token;
}

export function loginTokenValid(ctx: ConsoleContext, opts: LoginCsrfOptions, given: string): boolean {
  const expected = ctx.cookies.get(opts.cookieName, { signed: true }) ?? '';
  return tokensMatch(given, expected);
}

export function clearLoginToken(ctx: ConsoleContext, opts: LoginCsrfOptions): void {
  ctx.cookies.set(opts.cookieName, '', { signed: true, httpOnly: true, sameSite: 'lax', secure: opts.secure, path: '/console', maxAge: 0, overwrite: true });
}

/** Methods that change state and therefore need the token. */
export function isStateChanging(method: string): boolean {
  return !['GET', 'HEAD', 'OPTIONS'].includes(method);
}
