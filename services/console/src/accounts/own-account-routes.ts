// Everyone's own account, auditors included: the one change an auditor may make.
//   GET  /console/account
//   POST /console/account/password   current, password, confirm   -> 303 | 400/401/429 page with the reason
// The current-password check counts like a sign-in (auth/password-guard.ts): a stolen session cannot guess freely.
// A changed password ends the account's other sessions (sessionsNotBefore); this one continues under a new session
// id, as after a sign-in, since the person just proved the password again.
import { type ConsoleContext, type ConsoleMiddleware, type ConsoleRouter, viewerOf } from '../request/context.ts';
import type { Config } from '../../../../shared/config.ts';
import type { Accounts } from '../auth/accounts.ts';
import type { RecordActivity } from '../auth/login-routes.ts';
import { afterPasswordCheck, beforePasswordCheck, type GuardDeps } from '../auth/password-guard.ts';
import { FormProblem, formRoute } from '../request/form-route.ts';
import { takeFlash } from '../request/flash.ts';
import { field } from '../request/form-body.ts';
import { hashPassword, verifyPassword } from '../security/password-hash.ts';
import { ownAccountPage } from '../views/accounts-page.ts';
import { passwordProblem } from './password-rules.ts';

export interface OwnAccountDeps {
  cfg: Config;
  accounts: Accounts;
  gate: ConsoleMiddleware;
  record: RecordActivity;
  guard: GuardDeps;
}

export function ownAccountRoutes(router: ConsoleRouter, d: OwnAccountDeps): void {
  const show = async (ctx: ConsoleContext, error: string | null = null): Promise<string> => {
    const viewer = viewerOf(ctx);
    const account = (await d.accounts.get(viewer.username))!;
    return ownAccountPage({ viewer, account, error, flash: error ? null : takeFlash(ctx) });
  };

  router.get('/console/account', d.gate, async (ctx) => {
    ctx.type = 'html';
    ctx.body = await show(ctx);
  });

  formRoute(router, '/console/account/password', d, {
    role: 'anyone',
    run: async (ctx, form) => {
      const viewer = viewerOf(ctx);
      const account = await d.accounts.get(viewer.username);
      if (!account) throw new FormProblem('Your account no longer exists.');
      // The current password is guessed here like at sign-in (by whoever holds the session), so it has the same limits.
      const refused = await beforePasswordCheck(ctx, d.guard, account.username);
      if (refused) {
        const minutes = Math.ceil(refused.retryAfter / 60);
        throw new FormProblem(
          `Too many failed password checks ${refused.kind === 'address' ? 'from your address' : 'for this account from your network'}, so nothing was checked or changed. Try again in ${minutes} minute${minutes === 1 ? '' : 's'}.`,
          429,
        );
      }
      const currentOk = await verifyPassword(field(form, 'current'), account.passwordHash);
      await afterPasswordCheck(ctx, d.guard, account.username, currentOk);
      if (!currentOk) {
        await d.record(ctx, 'console.password_change_failed', account.username, account.username, { reason: 'wrong current password' });
        throw new FormProblem('The current password is not right, so nothing was changed.', 401);
      }
      const next = field(form, 'password');
      const problem = passwordProblem(next);
      if (problem) throw new FormProblem(problem);
      if (next !== field(form, 'confirm')) throw new FormProblem('The two new passwords differ; type the same one twice.');
      const now = Date.now();
      await d.accounts.put({ ...account, passwordHash: await hashPassword(next), passwordChangedAt: new Date(now).toISOString(), sessionsNotBefore: now });
      // This session continues under a new id: authAt = now passes the new sessionsNotBefore; the old id is gone.
      const sess = ctx.session;
      if (!sess) throw new Error('the session gate lets no request without a session through');
      sess.authAt = now;
      sess.seen = now;
      await sess.regenerate();
      await d.record(ctx, 'console.password_change', account.username, account.username, { otherSessionsEnded: true });
      return { text: 'Password changed. Your other sessions have ended.', to: '/console/account' };
    },
    refused: (ctx, message) => show(ctx, message),
  });
}
