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
import type Router from '@koa/router';
import type { Context, Middleware } from 'koa';
import type { Config } from '../../../../shared/config.ts';
import { accountKey, USERNAME_RE, type Account, type Accounts, type Role } from '../auth/accounts.ts';
import type { RecordActivity } from '../auth/login-routes.ts';
import type { ConsoleState } from '../auth/require-session.ts';
import { requireAdmin } from '../auth/role.ts';
import { PageError } from '../errors.ts';
import { FormProblem } from '../network/act.ts';
import { setFlash, takeFlash } from '../request/flash.ts';
import { field } from '../request/form-body.ts';
import { formOf } from '../request/form.ts';
import { publicUrl } from '../request/public-url.ts';
import { generatePassword, hashPassword } from '../security/password-hash.ts';
import { accountsPage, type AccountsView } from '../views/accounts-page.ts';
import { passwordProblem } from './password-rules.ts';

export interface AccountsDeps {
  cfg: Config;
  accounts: Accounts;
  gate: Middleware;
  record: RecordActivity;
}

export function accountsRoutes(router: Router, d: AccountsDeps): void {
  const viewerOf = (ctx: Context) => (ctx.state as ConsoleState).viewer!;

  const show = async (ctx: Context, extra: Partial<AccountsView> = {}): Promise<string> => {
    const accounts = await d.accounts.list();
    const flash = extra.error || extra.secret ? null : takeFlash(ctx);
    return accountsPage({ viewer: viewerOf(ctx), accounts, flash, ...extra });
  };

  /** Runs a change; a FormProblem shows the page again with the reason. */
  const change = async (ctx: Context, run: () => Promise<void>, draft?: AccountsView['draft']): Promise<void> => {
    try {
      await run();
    } catch (e) {
      if (!(e instanceof FormProblem)) throw e;
      ctx.status = e.status;
      ctx.type = 'html';
      ctx.body = await show(ctx, { error: e.message, draft });
    }
  };

  const done = (ctx: Context, text: string) => {
    setFlash(ctx, 'ok', text);
    ctx.status = 303;
    ctx.redirect(publicUrl(d.cfg, '/console/accounts'));
  };

  /** The account a change is about; never the viewer's own, and never the last enabled administrator's removal. */
  const target = async (ctx: Context, opts: { removesAdmin: boolean }): Promise<Account> => {
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

  router.post('/console/accounts', d.gate, requireAdmin, async (ctx) => {
    const form = await formOf(ctx);
    const username = field(form, 'username').trim();
    const roleText = field(form, 'role');
    const typed = field(form, 'password');
    await change(
      ctx,
      async () => {
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
        if (typed) {
          done(ctx, `Created the ${role === 'admin' ? 'administrator' : 'auditor'} account ${username}.`);
          return;
        }
        ctx.type = 'html';
        ctx.body = await show(ctx, { secret: { username, password, reason: 'created' } });
      },
      { username, role: roleText },
    );
  });

  router.post('/console/accounts/:name/disable', d.gate, requireAdmin, async (ctx) => {
    await change(ctx, async () => {
      const a = await target(ctx, { removesAdmin: true });
      if (a.disabled) return done(ctx, `${a.username} was already disabled.`);
      // Bumping sessionsNotBefore too means enabling the account later does not bring old sessions back.
      await d.accounts.put({ ...a, disabled: true, sessionsNotBefore: Date.now() });
      await d.record(ctx, 'console.account_disable', viewerOf(ctx).username, a.username, { role: a.role, sessionsEnded: true });
      done(ctx, `Disabled ${a.username}; their sessions have ended.`);
    });
  });

  router.post('/console/accounts/:name/enable', d.gate, requireAdmin, async (ctx) => {
    await change(ctx, async () => {
      const a = await target(ctx, { removesAdmin: false });
      if (!a.disabled) return done(ctx, `${a.username} was already enabled.`);
      await d.accounts.put({ ...a, disabled: false });
      await d.record(ctx, 'console.account_enable', viewerOf(ctx).username, a.username, { role: a.role });
      done(ctx, `Enabled ${a.username}; they can sign in again.`);
    });
  });

  router.post('/console/accounts/:name/reset-password', d.gate, requireAdmin, async (ctx) => {
    await change(ctx, async () => {
      const a = await target(ctx, { removesAdmin: false });
      const password = generatePassword();
      const now = Date.now();
      await d.accounts.put({ ...a, passwordHash: await hashPassword(password), passwordChangedAt: new Date(now).toISOString(), sessionsNotBefore: now });
      await d.record(ctx, 'console.password_reset', viewerOf(ctx).username, a.username, { sessionsEnded: true, password: 'generated' });
      ctx.type = 'html';
      ctx.body = await show(ctx, { secret: { username: a.username, password, reason: 'reset' } });
    });
  });

  router.post('/console/accounts/:name/delete', d.gate, requireAdmin, async (ctx) => {
    await change(ctx, async () => {
      const a = await target(ctx, { removesAdmin: true });
      // Its sessions are bound to its id (auth/accounts.ts), which no later account gets: the session gate refuses
      // them at their next request, even once another account takes the name.
      await d.accounts.delete(a.username);
      await d.record(ctx, 'console.account_delete', viewerOf(ctx).username, a.username, { role: a.role, sessionsEnded: true });
      done(ctx, `Deleted the account ${a.username}.`);
    });
  });
}
