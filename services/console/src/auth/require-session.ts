// Two gates.
// requireSession, on every console page but sign-in and static files: a live session whose account still exists (the
// same account, by id: session-check.ts), is enabled and has not had its sessions revoked since this one signed in. Pages without one redirect to the sign-in
// page (on the public URL, keeping where the person wanted to go); the API and the event stream answer 401 JSON
// instead, as scripts and EventSource expect.
// csrfGuard, on every request of the app: anything that is not GET/HEAD/OPTIONS must carry the session's CSRF token
// (form field `csrf`, or X-CSRF-Token for scripts), whatever route it is for, so a new route cannot forget it. The
// sign-in form and the buttons that start a sign-in with the identity provider are the exceptions: they have no
// session yet and check the sign-in form's own token (csrf.ts).
import type { ConsoleContext, Next } from '../request/context.ts';
import type { Config } from '../../../../shared/config.ts';
import { PageError, wantsJson } from '../errors.ts';
import { publicUrl } from '../request/public-url.ts';
import { isProviderSignInStart } from '../oidc/sign-in-paths.ts';
import { CSRF_FIELD, CSRF_HEADER, isStateChanging, tokensMatch } from '../security/csrf.ts';
import type { Accounts } from './accounts.ts';
import { currentSession, touch } from './session.ts';
import { accountOfSession } from './session-check.ts';

export const CSRF_MISMATCH =
  'This request did not carry the security token of your session, so it was refused: it may have come from another site, or from a page opened before you last signed in. Reload the page and try again.';

export function requireSession(cfg: Config, accounts: Accounts) {
  return async function sessionGate(ctx: ConsoleContext, next: Next): Promise<void> {
    const s = currentSession(ctx);
    const account = s ? await accountOfSession(accounts, s) : null;
    if (!s || !account) {
      if (ctx.session && !ctx.session.isNew) ctx.session = null; // ends a dead session server-side too
      if (wantsJson(ctx)) throw new PageError(401, 'Not signed in', 'Sign in at /console/login first (this needs a console session cookie).');
      if (isStateChanging(ctx.method)) {
        throw new PageError(403, 'Session ended', 'Your session has ended, so this change was not made. Sign in again and repeat it.');
      }
      const here = ctx.originalUrl;
      const next = here === '/console' || here === '/console/' ? '' : `?next=${encodeURIComponent(here)}`;
      ctx.redirect(publicUrl(cfg, `/console/login${next}`));
      return;
    }
    touch(ctx);
    ctx.state.viewer = { username: account.username, role: account.role, csrf: s.csrf };
    await next();
  };
}

export function csrfGuard(readForm: (ctx: ConsoleContext) => Promise<URLSearchParams>) {
  return async function csrf(ctx: ConsoleContext, next: Next): Promise<void> {
    if (!isStateChanging(ctx.method) || ctx.path === '/console/login' || isProviderSignInStart(ctx.path)) return next();
    const s = currentSession(ctx);
    // Signing out of a session that has already ended is not an attack; the handler just shows the sign-in page.
    if (!s && ctx.path === '/console/logout') return next();
    let given = ctx.get(CSRF_HEADER);
    if (given === '') {
      const form = await readForm(ctx);
      ctx.state.form = form;
      const all = form.getAll(CSRF_FIELD);
      given = all.length === 1 ? all[0] : '';
    }
    if (!s) throw new PageError(403, 'Session ended', 'Your session has ended, so this change was not made. Sign in again and repeat it.');
    if (!tokensMatch(given, s.csrf)) throw new PageError(403, 'Request refused: security token mismatch', CSRF_MISMATCH);
    await next();
  };
}
