// API keys for the remote API.
//   GET  /console/apikeys
//   POST /console/apikeys              description, days, readonly -> 200 with the key shown once | 400 with the reason
//   POST /console/apikeys/:id/revoke   -> 303
// Only administrators make or revoke keys; a key never has more than "admin", and an administrator may make a
// read-only one. Auditors see the list.
import type Router from '@koa/router';
import type { Context } from 'koa';
import { AdminError } from '../../../../shared/admin-client.ts';
import type { ConsoleState } from '../auth/require-session.ts';
import { requireAdmin } from '../auth/role.ts';
import { capitalise, PageError } from '../errors.ts';
import { takeFlash } from '../request/flash.ts';
import { field } from '../request/form-body.ts';
import { formOf } from '../request/form.ts';
import { API_KEY_DAYS, type ApiKeysView, apiKeysPage } from '../views/apikeys-page.ts';
import { act, FormProblem } from './act.ts';
import { actorOf } from './actor.ts';
import type { NetworkDeps } from './deps.ts';

export function apiKeysRoutes(router: Router, d: NetworkDeps): void {
  const show = async (ctx: Context, extra: Partial<ApiKeysView> = {}): Promise<string> => {
    const keys = await d.admin.listApiKeys(actorOf(ctx));
    const flash = extra.error || extra.created ? null : takeFlash(ctx);
    return apiKeysPage({ viewer: (ctx.state as ConsoleState).viewer!, keys, publicOrigin: d.cfg.publicOrigin, flash, ...extra });
  };

  router.get('/console/apikeys', d.gate, async (ctx) => {
    ctx.type = 'html';
    ctx.body = await show(ctx);
  });

  router.post('/console/apikeys', d.gate, requireAdmin, async (ctx) => {
    const form = await formOf(ctx);
    const days = Number(field(form, 'days') || '0');
    const readOnly = field(form, 'readonly') === '1';
    const description = field(form, 'description').trim();
    const draft = { description, days, readOnly };
    try {
      if (!API_KEY_DAYS.includes(days)) throw new FormProblem('Choose how long the key is valid.');
      const created = await d.admin.createApiKey(actorOf(ctx), { description, expiresInSeconds: days * 86_400, role: readOnly ? 'readonly' : 'admin' });
      ctx.type = 'html';
      ctx.body = await show(ctx, { created });
    } catch (e) {
      if (!((e instanceof AdminError && e.status < 500) || e instanceof FormProblem)) throw e;
      ctx.status = (e as AdminError | FormProblem).status;
      ctx.type = 'html';
      ctx.body = await show(ctx, { error: capitalise((e as Error).message), draft });
    }
  });

  router.post('/console/apikeys/:id/revoke', d.gate, requireAdmin, async (ctx) => {
    const text = ctx.params.id;
    if (!/^\d{1,12}$/.test(text)) throw new PageError(404, 'Key not found', `There is no API key "${text}".`);
    await act(
      ctx,
      d.cfg,
      async () => {
        const k = await d.admin.revokeApiKey(actorOf(ctx), Number(text));
        return { text: `Revoked ${k.prefix} ("${k.description}"); calls with it now get 401.`, to: '/console/apikeys' };
      },
      (message) => show(ctx, { error: message }),
    );
  });
}
