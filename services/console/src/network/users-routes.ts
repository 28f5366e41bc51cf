// Users of the tailnet.
//   GET  /console/users
//   POST /console/users                 name, displayName   -> 303 | 400/409 page with the reason
//   POST /console/users/:id/rename      name                -> 303 | 400/409
//   POST /console/users/:id/delete                          -> 303 | 409 while it owns machines (admin API's words)
import { type ConsoleContext, type ConsoleRouter, viewerOf } from '../request/context.ts';
import { PageError } from '../errors.ts';
import { takeFlash } from '../request/flash.ts';
import { field } from '../request/form-body.ts';
import { FormProblem, formRoute } from '../request/form-route.ts';
import { usersPage, type UsersView } from '../views/users-page.ts';
import { actorOf } from './actor.ts';
import type { NetworkDeps } from './deps.ts';

function userId(text: string | undefined): number {
  if (!text || !/^\d{1,12}$/.test(text)) throw new PageError(404, 'User not found', `There is no user "${text ?? ''}".`);
  return Number(text);
}

export function usersRoutes(router: ConsoleRouter, d: NetworkDeps): void {
  const show = async (ctx: ConsoleContext, extra: Partial<UsersView> = {}): Promise<string> => {
    const users = await d.admin.listUsers(actorOf(ctx));
    return usersPage({ viewer: viewerOf(ctx), users, flash: extra.error ? null : takeFlash(ctx), ...extra });
  };

  router.get('/console/users', d.gate, async (ctx) => {
    ctx.type = 'html';
    ctx.body = await show(ctx);
  });

  formRoute(router, '/console/users', d, {
    role: 'admin',
    run: async (ctx, form) => {
      const name = field(form, 'name').trim();
      const displayName = field(form, 'displayName').trim();
      if (name === '') throw new FormProblem('Type a name for the user.');
      const u = await d.admin.createUser(actorOf(ctx), name, displayName || undefined);
      return { text: `Created user ${u.name}. Next: create a pre-auth key for it under Keys.`, to: '/console/users' };
    },
    refused: (ctx, message, form) => show(ctx, { error: message, draft: { name: field(form, 'name').trim(), displayName: field(form, 'displayName').trim() } }),
  });

  formRoute(router, '/console/users/:id/rename', d, {
    role: 'admin',
    run: async (ctx, form) => {
      const id = userId(ctx.params.id);
      const name = field(form, 'name').trim();
      if (name === '') throw new FormProblem('Type the new name.');
      const u = await d.admin.renameUser(actorOf(ctx), id, name);
      return { text: `Renamed to ${u.name}.`, to: '/console/users' };
    },
    refused: (ctx, message) => show(ctx, { error: message }),
  });

  formRoute(router, '/console/users/:id/delete', d, {
    role: 'admin',
    run: async (ctx) => {
      const u = await d.admin.deleteUser(actorOf(ctx), userId(ctx.params.id));
      return { text: `Deleted user ${u.name}.`, to: '/console/users' };
    },
    refused: (ctx, message) => show(ctx, { error: message }),
  });
}
