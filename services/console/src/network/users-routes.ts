// Users of the tailnet.
//   GET  /console/users
//   POST /console/users                 name, displayName   -> 303 | 400/409 page with the reason
//   POST /console/users/:id/rename      name                -> 303 | 400/409
//   POST /console/users/:id/delete                          -> 303 | 409 while it owns machines (admin API's words)
import type Router from '@koa/router';
import type { Context } from 'koa';
import type { ConsoleState } from '../auth/require-session.ts';
import { requireAdmin } from '../auth/role.ts';
import { PageError } from '../errors.ts';
import { takeFlash } from '../request/flash.ts';
import { field } from '../request/form-body.ts';
import { formOf } from '../request/form.ts';
import { usersPage, type UsersView } from '../views/users-page.ts';
import { act, FormProblem } from './act.ts';
import { actorOf } from './actor.ts';
import type { NetworkDeps } from './deps.ts';

function userId(text: string | undefined): number {
  if (!text || !/^\d{1,12}$/.test(text)) throw new PageError(404, 'User not found', `There is no user "${text ?? ''}".`);
  return Number(text);
}

export function usersRoutes(router: Router, d: NetworkDeps): void {
  const show = async (ctx: Context, extra: Partial<UsersView> = {}): Promise<string> => {
    const users = await d.admin.listUsers(actorOf(ctx));
    return usersPage({ viewer: (ctx.state as ConsoleState).viewer!, users, flash: extra.error ? null : takeFlash(ctx), ...extra });
  };

  router.get('/console/users', d.gate, async (ctx) => {
    ctx.type = 'html';
    ctx.body = await show(ctx);
  });

  router.post('/console/users', d.gate, requireAdmin, async (ctx) => {
    const form = await formOf(ctx);
    const name = field(form, 'name').trim();
    const displayName = field(form, 'displayName').trim();
    await act(
      ctx,
      d.cfg,
      async () => {
        if (name === '') throw new FormProblem('Type a name for the user.');
        const u = await d.admin.createUser(actorOf(ctx), name, displayName || undefined);
        return { text: `Created user ${u.name}. Next: create a pre-auth key for it under Keys.`, to: '/console/users' };
      },
      (message) => show(ctx, { error: message, draft: { name, displayName } }),
    );
  });

  router.post('/console/users/:id/rename', d.gate, requireAdmin, async (ctx) => {
    const id = userId(ctx.params.id);
    const form = await formOf(ctx);
    await act(
      ctx,
      d.cfg,
      async () => {
        const name = field(form, 'name').trim();
        if (name === '') throw new FormProblem('Type the new name.');
        const u = await d.admin.renameUser(actorOf(ctx), id, name);
        return { text: `Renamed to ${u.name}.`, to: '/console/users' };
      },
      (message) => show(ctx, { error: message }),
    );
  });

  router.post('/console/users/:id/delete', d.gate, requireAdmin, async (ctx) => {
    const id = userId(ctx.params.id);
    await act(
      ctx,
      d.cfg,
      async () => {
        const u = await d.admin.deleteUser(actorOf(ctx), id);
        return { text: `Deleted user ${u.name}.`, to: '/console/users' };
      },
      (message) => show(ctx, { error: message }),
    );
  });
}
