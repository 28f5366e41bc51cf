// Sign-in and sign-out.
//   GET  /console/login    the form (already signed in: straight to the console)
//   POST /console/login    username, password, csrf, next   -> 303 to next | 401 form again | 403 | 429
//   POST /console/logout   csrf                             -> session destroyed server-side, 303 to the form
// The CSRF token of sign-out is checked by csrfGuard (require-session.ts) like every other change; signing out of a
// session that already ended just lands on the sign-in page.
// Every outcome that matters to an operator goes to the activity log: sign-in, failed sign-in (with the user name
// that was tried, never the password), the first refusal of a rate-limited address, an account locked against the
// networks its failures came from and the first refusal of each (password-guard.ts), and sign-out.
import type { ConsoleContext, ConsoleRouter } from '../request/context.ts';
import type { Config } from '../../../../shared/config.ts';
import type { Logger } from '../../../../shared/log.ts';
import { PageError } from '../errors.ts';
import { field, readForm } from '../request/form-body.ts';
import { publicUrl, safeNext } from '../request/public-url.ts';
import { loginToken, loginTokenValid, type LoginCsrfOptions } from '../security/csrf.ts';
import { decoyHash, verifyPassword } from '../security/password-hash.ts';
import { accountLockedPage, type LoginView, loginPage, rateLimitedPage, type SignInChoices } from '../views/login-page.ts';
import type { AccountThrottle } from './account-throttle.ts';
import { USERNAME_RE, type Accounts } from './accounts.ts';
import { afterPasswordCheck, beforePasswordCheck } from './password-guard.ts';
import { currentSession } from './session.ts';
import type { SigninLimiter } from './signin-limit.ts';
import { startSession } from './start-session.ts';
import { counter } from '../../../../shared/metrics.ts';

/** Password sign-ins by result: ok, failed (wrong name or password, disabled account), limited (refused unchecked). */
const signins = counter('hse_console_signins_total', 'Console password sign-ins by result: ok, failed, limited (refused by the rate limits before checking).', [
  'result',
]);

export type RecordActivity = (ctx: ConsoleContext, action: string, actor: string, target?: string, details?: { [k: string]: unknown }) => Promise<void>;

export interface LoginDeps {
  cfg: Config;
  accounts: Accounts;
  limiter: SigninLimiter;
  throttle: AccountThrottle;
  record: RecordActivity;
  clientIp: (ctx: ConsoleContext) => string;
  loginCsrf: LoginCsrfOptions;
  log: Logger;
  /** The identity provider's button, and whether passwords are offered beside it (oidc/oidc-routes.ts). */
  choices: SignInChoices;
}

/** What a person typed as user name, made safe to store and show: no control characters, bounded length. */
export function attemptedName(text: string): string {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: removing control characters is the point
  return text.replace(/[\u0000-\u001f\u007f]/g, '').slice(0, 64);
}

export function loginRoutes(router: ConsoleRouter, d: LoginDeps): void {
  const form = (v: LoginView) => loginPage({ ...v, choices: d.choices });
  router.get('/console/login', async (ctx) => {
    if (currentSession(ctx)) {
      ctx.redirect(publicUrl(d.cfg, safeNext(ctx.query.next)));
      return;
    }
    const notice = ctx.query.signed_out === '1' ? 'You have signed out.' : undefined;
    ctx.type = 'html';
    ctx.body = form({ csrf: loginToken(ctx, d.loginCsrf), next: safeNext(ctx.query.next), notice });
  });

  router.post('/console/login', async (ctx) => {
    const sent = await readForm(ctx.req);
    const next = safeNext(field(sent, 'next'));
    const username = attemptedName(field(sent, 'username').trim());
    const password = field(sent, 'password');
    const ip = d.clientIp(ctx);
    if (!d.choices.passwords) {
      throw new PageError(
        403,
        'Passwords are switched off',
        `This console signs people in with ${d.choices.provider?.name ?? 'the identity provider'} only (HSE_OIDC_CONSOLE_PASSWORDS=off). Open the sign-in page and use its button.`,
      );
    }
    if (!loginTokenValid(ctx, d.loginCsrf, field(sent, 'csrf'))) {
      // A fresh token comes with the page this links to; the old one may simply have expired.
      throw new PageError(
        403,
        'Sign-in refused: security token mismatch',
        'The sign-in form had no valid security token: it was open too long, your browser blocked its cookie, or it was sent from another site. Open the sign-in page again and retry.',
      );
    }
    const refused = await beforePasswordCheck(ctx, d, username);
    if (refused) {
      signins.inc({ result: 'limited' });
      ctx.status = 429;
      ctx.type = 'html';
      const csrf = loginToken(ctx, d.loginCsrf);
      ctx.body =
        refused.kind === 'address'
          ? rateLimitedPage({ csrf, next, ip, retryAfter: refused.retryAfter, username, choices: d.choices })
          : accountLockedPage({ csrf, next, retryAfter: refused.retryAfter, username, choices: d.choices });
      return;
    }
    const account = USERNAME_RE.test(username) ? await d.accounts.get(username) : null;
    // Hash even for an unknown name, so the answer takes as long either way and does not reveal which names exist.
    const ok = await verifyPassword(password, account?.passwordHash ?? (await decoyHash()));
    await afterPasswordCheck(ctx, d, username, account !== null && ok && !account.disabled);
    if (!account || !ok || account.disabled) {
      const reason = !account ? 'unknown account' : !ok ? 'wrong password' : 'account disabled';
      signins.inc({ result: 'failed' });
      await d.record(ctx, 'console.signin_failed', username, username, { reason });
      ctx.status = 401;
      ctx.type = 'html';
      ctx.body = form({ csrf: loginToken(ctx, d.loginCsrf), next, username, error: 'That user name and password do not match an enabled account.' });
      return;
    }
    await startSession(ctx, account, ip, d.loginCsrf);
    signins.inc({ result: 'ok' });
    await d.record(ctx, 'console.signin', account.username, account.username, { role: account.role });
    ctx.status = 303;
    ctx.redirect(publicUrl(d.cfg, next));
  });

  router.post('/console/logout', async (ctx) => {
    // csrfGuard (app.ts) has checked the session's token when there is a session.
    const s = currentSession(ctx);
    if (!s) {
      // Already signed out (expired, or another tab signed out): nothing to end.
      ctx.status = 303;
      ctx.redirect(publicUrl(d.cfg, '/console/login?signed_out=1'));
      return;
    }
    const account = await d.accounts.get(s.account);
    await d.record(ctx, 'console.signout', account?.username ?? s.account, account?.username ?? s.account);
    // Deletes the Redis record (autoCommit after this handler) and expires the cookie.
    ctx.session = null;
    ctx.status = 303;
    ctx.redirect(publicUrl(d.cfg, '/console/login?signed_out=1'));
  });
}
