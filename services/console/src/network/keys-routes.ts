// Pre-auth keys.
//   GET  /console/keys
//   POST /console/keys               user | newUser, reusable, ephemeral, lifetime (seconds)
//                                    -> 200 with the key shown once (never stored readable, never redirected through
//                                       the session) | 400/404 page with the reason
//   POST /console/keys/:id/expire    -> 303
import type Router from '@koa/router';
import type { Context } from 'koa';
import { AdminError } from '../../../../shared/admin-client.ts';
import type { ConsoleState } from '../auth/require-session.ts';
import { requireAdmin } from '../auth/role.ts';
import { capitalise, PageError } from '../errors.ts';
import { takeFlash } from '../request/flash.ts';
import { field } from '../request/form-body.ts';
import { formOf } from '../request/form.ts';
import { keysPage, LIFETIMES, type KeysView } from '../views/keys-page.ts';
import { act, FormProblem } from './act.ts';
import { actorOf } from './actor.ts';
import type { NetworkDeps } from './deps.ts';
import { chosenUser } from './user-choice.ts';

export function keysRoutes(router: Router, d: NetworkDeps): void {
  const show = async (ctx: Context, extra: Partial<KeysView> = {}): Promise<string> => {
    const who = actorOf(ctx);
    const [keys, users] = await Promise.all([d.admin.listPreAuthKeys(who), d.admin.listUsers(who)]);
    const flash = extra.error || extra.created ? null : takeFlash(ctx);
    return keysPage({ viewer: (ctx.state as ConsoleState).viewer!, keys, users, publicOrigin: d.cfg.publicOrigin, flash, ...extra });
  };

  router.get('/console/keys', d.gate, async (ctx) => {
    ctx.type = 'html';
    ctx.body = await show(ctx);
  });

  router.post('/console/keys', d.gate, requireAdmin, async (ctx) => {
    const form = await formOf(ctx);
    const reusable = field(form, 'reusable') === '1';
    const ephemeral = field(form, 'ephemeral') === '1';
    const lifetime = Number(field(form, 'lifetime') || '0');
    const draft = { user: field(form, 'user'), reusable, ephemeral, lifetime };
    try {
      if (!LIFETIMES.some((l) => l.seconds === lifetime)) throw new FormProblem('Choose how long the key is valid.');
      const user = await chosenUser(d.admin, actorOf(ctx), form);
      const created = await d.admin.createPreAuthKey(actorOf(ctx), { user: user.ref, reusable, ephemeral, expiresInSeconds: lifetime });
      ctx.type = 'html';
      ctx.body = await show(ctx, { created });
    } catch (e) {
      if (!((e instanceof AdminError && e.status < 500) || e instanceof FormProblem)) throw e;
      ctx.status = (e as AdminError | FormProblem).status;
      ctx.type = 'html';
      ctx.body = await show(ctx, { error: capitalise((e as Error).message), draft });
    }
  });

  router.post('/console/keys/:id/expire', d.gate, requireAdmin, async (ctx) => {
    const text = ctx.params.id;
    if (!/^\d{1,12}$/.test(text)) throw new PageError(404, 'Key not found', `There is no pre-auth key "${text}".`);
    await act(
      ctx,
      d.cfg,
      async () => {
        const k = await d.admin.expirePreAuthKey(actorOf(ctx), Number(text));
        return { text: `Expired ${k.prefix}; no new device can use it.`, to: '/console/keys' };
      },
      (message) => show(ctx, { error: message }),
    );
  });
}
