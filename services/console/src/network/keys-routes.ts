// Pre-auth keys.
//   GET  /console/keys
//   POST /console/keys               user | newUser, reusable, ephemeral, lifetime (seconds)
//                                    -> 200 with the key shown once (never stored readable, never redirected through
//                                       the session) | 400/404 page with the reason
//   POST /console/keys/:id/expire    -> 303
import { type ConsoleContext, type ConsoleRouter, viewerOf } from '../request/context.ts';
import { PageError } from '../errors.ts';
import { takeFlash } from '../request/flash.ts';
import { field } from '../request/form-body.ts';
import { FormProblem, formRoute } from '../request/form-route.ts';
import { keysPage, LIFETIMES, type KeysView } from '../views/keys-page.ts';
import { actorOf } from './actor.ts';
import type { NetworkDeps } from './deps.ts';
import { chosenUser } from './user-choice.ts';

export function keysRoutes(router: ConsoleRouter, d: NetworkDeps): void {
  const show = async (ctx: ConsoleContext, extra: Partial<KeysView> = {}): Promise<string> => {
    const who = actorOf(ctx);
    const [keys, users] = await Promise.all([d.admin.listPreAuthKeys(who), d.admin.listUsers(who)]);
    const flash = extra.error || extra.created ? null : takeFlash(ctx);
    return keysPage({ viewer: viewerOf(ctx), keys, users, publicOrigin: d.cfg.publicOrigin, flash, ...extra });
  };

  router.get('/console/keys', d.gate, async (ctx) => {
    ctx.type = 'html';
    ctx.body = await show(ctx);
  });

  const draftOf = (form: URLSearchParams) => ({
    user: field(form, 'user'),
    reusable: field(form, 'reusable') === '1',
    ephemeral: field(form, 'ephemeral') === '1',
    lifetime: Number(field(form, 'lifetime') || '0'),
  });

  formRoute(router, '/console/keys', d, {
    role: 'admin',
    run: async (ctx, form) => {
      const { reusable, ephemeral, lifetime } = draftOf(form);
      if (!LIFETIMES.some((l) => l.seconds === lifetime)) throw new FormProblem('Choose how long the key is valid.');
      const user = await chosenUser(d.admin, actorOf(ctx), form);
      const created = await d.admin.createPreAuthKey(actorOf(ctx), { user: user.ref, reusable, ephemeral, expiresInSeconds: lifetime });
      return { page: await show(ctx, { created }) };
    },
    refused: (ctx, message, form) => show(ctx, { error: message, draft: draftOf(form) }),
  });

  formRoute(router, '/console/keys/:id/expire', d, {
    role: 'admin',
    run: async (ctx) => {
      const text = ctx.params.id;
      if (!/^\d{1,12}$/.test(text)) throw new PageError(404, 'Key not found', `There is no pre-auth key "${text}".`);
      const k = await d.admin.expirePreAuthKey(actorOf(ctx), Number(text));
      return { text: `Expired ${k.prefix}; no new device can use it.`, to: '/console/keys' };
    },
    refused: (ctx, message) => show(ctx, { error: message }),
  });
}
