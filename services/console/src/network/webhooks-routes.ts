// Webhooks.
//   GET  /console/webhooks
//   POST /console/webhooks                             url, events (repeated) -> 200 with the secret shown once | 400
//   POST /console/webhooks/:id/delete                  -> 303
//   POST /console/webhooks/:id/test                    -> 303 (a "test" event queued for the endpoint)
//   POST /console/webhooks/deliveries/:id/resend       -> 303
import type { WebhookEventType } from '../../../../shared/model.ts';
import { PageError } from '../errors.ts';
import { type ConsoleContext, type ConsoleRouteContext, type ConsoleRouter, viewerOf } from '../request/context.ts';
import { takeFlash } from '../request/flash.ts';
import { field } from '../request/form-body.ts';
import { formRoute } from '../request/form-route.ts';
import { type WebhooksView, webhooksPage } from '../views/webhooks-page.ts';
import { actorOf } from './actor.ts';
import type { NetworkDeps } from './deps.ts';

/** Deliveries shown per endpoint. */
const SHOWN = 15;

export function webhooksRoutes(router: ConsoleRouter, d: NetworkDeps): void {
  const show = async (ctx: ConsoleContext, extra: Partial<WebhooksView> = {}): Promise<string> => {
    const who = actorOf(ctx);
    const list = await d.admin.listWebhooks(who);
    const endpoints = await Promise.all(
      list.map(async (endpoint) => ({ endpoint, deliveries: (await d.admin.webhookDeliveries(who, endpoint.id)).slice(0, SHOWN) })),
    );
    const flash = extra.error || extra.created ? null : takeFlash(ctx);
    return webhooksPage({ viewer: viewerOf(ctx), endpoints, flash, ...extra });
  };
  const idOf = (ctx: ConsoleRouteContext): number => {
    const text = ctx.params.id;
    if (!/^\d{1,12}$/.test(text)) throw new PageError(404, 'Not found', `There is no webhook "${text}".`);
    return Number(text);
  };
  const refused = (ctx: ConsoleContext, message: string) => show(ctx, { error: message });

  router.get('/console/webhooks', d.gate, async (ctx) => {
    ctx.type = 'html';
    ctx.body = await show(ctx);
  });

  const draftOf = (form: URLSearchParams) => ({ url: field(form, 'url').trim(), events: form.getAll('events') as WebhookEventType[] });

  formRoute(router, '/console/webhooks', d, {
    role: 'admin',
    run: async (ctx, form) => {
      const { url, events } = draftOf(form);
      const created = await d.admin.createWebhook(actorOf(ctx), url, events);
      return { page: await show(ctx, { created }) };
    },
    refused: (ctx, message, form) => show(ctx, { error: message, draft: draftOf(form) }),
  });

  formRoute(router, '/console/webhooks/:id/delete', d, {
    role: 'admin',
    run: async (ctx) => ({ text: `Deleted the endpoint ${(await d.admin.deleteWebhook(actorOf(ctx), idOf(ctx))).url}.`, to: '/console/webhooks' }),
    refused,
  });

  formRoute(router, '/console/webhooks/:id/test', d, {
    role: 'admin',
    run: async (ctx) => {
      await d.admin.testWebhook(actorOf(ctx), idOf(ctx));
      return { text: 'A test event is on its way; its delivery shows below within seconds.', to: '/console/webhooks' };
    },
    refused,
  });

  formRoute(router, '/console/webhooks/deliveries/:id/resend', d, {
    role: 'admin',
    run: async (ctx) => {
      const del = await d.admin.resendDelivery(actorOf(ctx), idOf(ctx));
      return { text: `The ${del.type} event is sent again.`, to: '/console/webhooks' };
    },
    refused,
  });
}
