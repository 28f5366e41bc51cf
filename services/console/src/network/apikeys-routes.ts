// API keys for the remote API.
//   GET  /console/apikeys
//   POST /console/apikeys              description, days, readonly -> 200 with the key shown once | 400 with the reason
//   POST /console/apikeys/:id/revoke   -> 303
// Only administrators make or revoke keys; a key never has more than "admin", and an administrator may make a
// read-only one. Auditors see the list.
import { PageError } from '../errors.ts';
import { type ConsoleContext, type ConsoleRouter, viewerOf } from '../request/context.ts';
import { takeFlash } from '../request/flash.ts';
import { field } from '../request/form-body.ts';
import { FormProblem, formRoute } from '../request/form-route.ts';
import { API_KEY_DAYS, type ApiKeysView, apiKeysPage } from '../views/apikeys-page.ts';
import { actorOf } from './actor.ts';
import type { NetworkDeps } from './deps.ts';

export function apiKeysRoutes(router: ConsoleRouter, d: NetworkDeps): void {
  const show = async (ctx: ConsoleContext, extra: Partial<ApiKeysView> = {}): Promise<string> => {
    const keys = await d.admin.listApiKeys(actorOf(ctx));
    const flash = extra.error || extra.created ? null : takeFlash(ctx);
    return apiKeysPage({ viewer: viewerOf(ctx), keys, publicOrigin: d.cfg.publicOrigin, flash, ...extra });
  };

  router.get('/console/apikeys', d.gate, async (ctx) => {
    ctx.type = 'html';
    ctx.body = await show(ctx);
  });

  const draftOf = (form: URLSearchParams) => ({
    description: field(form, 'description').trim(),
    days: Number(field(form, 'days') || '0'),
    readOnly: field(form, 'readonly') === '1',
  });

  formRoute(router, '/console/apikeys', d, {
    role: 'admin',
    run: async (ctx, form) => {
      const { description, days, readOnly } = draftOf(form);
      if (!API_KEY_DAYS.includes(days)) throw new FormProblem('Choose how long the key is valid.');
      const created = await d.admin.createApiKey(actorOf(ctx), { description, expiresInSeconds: days * 86_400, role: readOnly ? 'readonly' : 'admin' });
      return { page: await show(ctx, { created }) };
    },
    refused: (ctx, message, form) => show(ctx, { error: message, draft: draftOf(form) }),
  });

  formRoute(router, '/console/apikeys/:id/revoke', d, {
    role: 'admin',
    run: async (ctx) => {
      const text = ctx.params.id;
      if (!/^\d{1,12}$/.test(text)) throw new PageError(404, 'Key not found', `There is no API key "${text}".`);
      const k = await d.admin.revokeApiKey(actorOf(ctx), Number(text));
      return { text: `Revoked ${k.prefix} ("${k.description}"); calls with it now get 401.`, to: '/console/apikeys' };
    },
    refused: (ctx, message) => show(ctx, { error: message }),
  });
}
