// Console accounts, managed by administrators.
//   GET  /console/accounts
//   POST /console/accounts                          username, role (admin|auditor), password (empty: generated)
//                                                   -> 200 with a generated password shown once | 303 | 400/409
//   POST /console/accounts/:name/disable            -> 303; the account's sessions end
//   POST /console/accounts/:name/enable             -> 303
//   POST /console/accounts/:name/reset-password     -> 200 with the new password shown once; sessions end
//   POST /console/accounts/:name/delete             -> 303; sessions end
// Nobody disables, resets or deletes their own account here (own password: own-account-routes.ts), and the last
// enabled administrator stays, so the console can never lock everyone out. These changes happen in the console
// alone, so the console writes their activity entries (actor, address, target, what changed).
import { type ConsoleContext, type ConsoleMiddleware, type ConsoleRouteContext, type ConsoleRouter, viewerOf } from '../request/context.ts';
import type { Config } from '../../../../shared/config.ts';
import { accountKey, USERNAME_RE, type Account, type Accounts, type Role } from '../auth/accounts.ts';
import type { RecordActivity } from '../auth/login-routes.ts';
import { PageError } from '../errors.ts';
import { FormProblem, formRoute, type Outcome } from '../request/form-route.ts';
import { takeFlash } from '../request/flash.ts';
import { field } from '../request/form-body.ts';
import { generatePassword, hashPassword } from '../security/password-hash.ts';
import { accountsPage, type AccountsView } from '../views/accounts-page.ts';
import { passwordProblem } from './password-rules.ts';

export interface AccountsDeps {
  cfg: Config;
  accounts: Accounts;
  gate: ConsoleMiddleware;
  record: RecordActivity;
}

export function accountsRoutes(router: ConsoleRouter, d: AccountsDeps): void {
  const show = async (ctx: ConsoleContext, extra: Partial<AccountsView> = {}): Promise<string> => {
    const accounts = await d.accounts.list();
    const flash = extra.error || extra.secret ? null : takeFlash(ctx);
    return accountsPage({ viewer: viewerOf(ctx), accounts, flash, ...extra });
  };

  const done = (text: string): Outcome => ({ text, to: '/console/accounts' });

  /** The account a change is about; never the viewer's own, and never the last enabled administrator's removal. */
  const target = async (ctx: ConsoleRouteContext, opts: { removesAdmin: boolean }): Promise<Account> => {
    const name = ctx.params.name ?? '';
    const a = USERNAME_RE.test(name) ? await d.accounts.get(name) : null;
    if (!a) throw new PageError(404, 'Account not found', `There is no console account "${name}". It may have been deleted a moment ago.`);
    if (accountKey(a.username) === accountKey(viewerOf(ctx).username)) {
      throw new FormProblem(
        'You cannot do this to your own account here. Change your own password under My account; another administrator can disable or delete your account.',
        409,
      );
    }
    if (opts.removesAdmin && a.role === 'admin' && !a.disabled) {
      const others = (await d.accounts.list()).filter((x) => x.role === 'admin' && !x.disabled && accountKey(x.username) !== accountKey(a.username));
      if (others.length === 0) throw new FormProblem(`${a.username} is the last enabled administrator; create or enable another administrator first.`, 409);
    }
    return a;
  };

  router.get('/console/accounts', d.gate, async (ctx) => {
    ctx.type = 'html';
    ctx.body = await show(ctx);
  });

  formRoute(router, '/console/accounts', d, {
    role: 'admin',
    run: async (ctx, form) => {
      const username = field(form, 'username').trim();
      const roleText = field(form, 'role');
      const typed = field(form, 'password');
      if (!USERNAME_RE.test(username)) throw new FormProblem('A user name is 1 to 64 letters, digits and . _ @ - (no spaces).');
      if (roleText !== 'admin' && roleText !== 'auditor') throw new FormProblem('Choose a role: administrator or auditor.');
      const role: Role = roleText;
      if (typed !== '') {
        const problem = passwordProblem(typed);
        if (problem) throw new FormProblem(problem);
      }
      const password = typed || generatePassword();
      const now = new Date().toISOString();
      const created = await d.accounts.createIfMissing({
        username,
        role,
        passwordHash: await hashPassword(password),
        disabled: false,
        createdAt: now,
        createdBy: viewerOf(ctx).username,
        passwordChangedAt: now,
        sessionsNotBefore: 0,
      });
      if (!created) throw new FormProblem(`A console account named "${username}" already exists (names ignore case).`, 409);
      await d.record(ctx, 'console.account_create', viewerOf(ctx).username, username, { role, password: typed ? 'set by the administrator' : 'generated' });
      if (typed) return done(`Created the ${role === 'admin' ? 'administrator' : 'auditor'} account ${username}.`);
      return { page: await show(ctx, { secret: { username, password, reason: 'created' } }) };
    },
    refused: (ctx, message, form) => show(ctx, { error: message, draft: { username: field(form, 'username').trim(), role: field(form, 'role') } }),
  });

  const refused = (ctx: ConsoleContext, message: string) => show(ctx, { error: message });

  formRoute(router, '/console/accounts/:name/disable', d, {
    role: 'admin',
    run: async (ctx) => {
      const a = await target(ctx, { removesAdmin: true });
      if (a.disabled) return done(`${a.username} was already disabled.`);
      // Bumping sessionsNotBefore too means enabling the account later does not bring old sessions back.
      await d.accounts.put({ ...a, disabled: true, sessionsNotBefore: Date.now() });
      await d.record(ctx, 'console.account_disable', viewerOf(ctx).username, a.username, { role: a.role, sessionsEnded: true });
      return done(`Disabled ${a.username}; their sessions have ended.`);
    },
    refused,
  });

  formRoute(router, '/console/accounts/:name/enable', d, {
    role: 'admin',
    run: async (ctx) => {
      const a = await target(ctx, { removesAdmin: false });
      if (!a.disabled) return done(`${a.username} was already enabled.`);
      await d.accounts.put({ ...a, disabled: false });
      await d.record(ctx, 'console.account_enable', viewerOf(ctx).username, a.username, { role: a.role });
      return done(`Enabled ${a.username}; they can sign in again.`);
    },
    refused,
  });

  formRoute(router, '/console/accounts/:name/reset-password', d, {
    role: 'admin',
    run: async (ctx) => {
      const a = await target(ctx, { removesAdmin: false });
      const password = generatePassword();
      const now = Date.now();
      await d.accounts.put({ ...a, passwordHash: await hashPassword(password), passwordChangedAt: new Date(now).toISOString(), sessionsNotBefore: now });
      await d.record(ctx, 'console.password_reset', viewerOf(ctx).username, a.username, { sessionsEnded: true, password: 'generated' });
      return { page: await show(ctx, { secret: { username: a.username, password, reason: 'reset' } }) };
    },
    refused,
  });

  formRoute(router, '/console/accounts/:name/delete', d, {
    role: 'admin',
    run: async (ctx) => {
      const a = await target(ctx, { removesAdmin: true });
      // Its sessions are bound to its id (auth/accounts.ts), which no later account gets: the session gate refuses
      // them at their next request, even once another account takes the name.
      await d.accounts.delete(a.username);
      await d.record(ctx, 'console.account_delete', viewerOf(ctx).username, a.username, { role: a.role, sessionsEnded: true });
      return done(`Deleted the account ${a.username}.`);
    },
    refused,
  });
}
