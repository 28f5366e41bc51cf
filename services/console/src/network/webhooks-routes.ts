// Webhooks.
//   GET  /console/webhooks
//   POST /console/webhooks                             url, events (repeated) -> 200 with the secret shown once | 400
//   POST /console/webhooks/:id/delete                  -> 303
//   POST /console/webhooks/:id/test                    -> 303 (a "test" event queued for the endpoint)
//   POST /console/webhooks/deliveries/:id/resend       -> 303
import type Router from '@koa/router';
import type { Context } from 'koa';
import { AdminError } from '../../../../shared/admin-client.ts';
import type { WebhookEventType } from '../../../../shared/model.ts';
import type { ConsoleState } from '../auth/require-session.ts';
import { requireAdmin } from '../auth/role.ts';
import { capitalise, PageError } from '../errors.ts';
import { takeFlash } from '../request/flash.ts';
import { field } from '../request/form-body.ts';
import { formOf } from '../request/form.ts';
import { type WebhooksView, webhooksPage } from '../views/webhooks-page.ts';
import { act } from './act.ts';
import { actorOf } from './actor.ts';
import type { NetworkDeps } from './deps.ts';

/** Deliveries shown per endpoint. */
const SHOWN = 15;

export function webhooksRoutes(router: Router, d: NetworkDeps): void {
  const show = async (ctx: Context, extra: Partial<WebhooksView> = {}): Promise<string> => {
    const who = actorOf(ctx);
    const list = await d.admin.listWebhooks(who);
    const endpoints = await Promise.all(
      list.map(async (endpoint) => ({ endpoint, deliveries: (await d.admin.webhookDeliveries(who, endpoint.id)).slice(0, SHOWN) })),
    );
    const flash = extra.error || extra.created ? null : takeFlash(ctx);
    return webhooksPage({ viewer: (ctx.state as ConsoleState).viewer!, endpoints, flash, ...extra });
  };
  const idOf = (ctx: Context): number => {
    const text = ctx.params.id;
    if (!/^\d{1,12}$/.test(text)) throw new PageError(404, 'Not found', `There is no webhook "${text}".`);
    return Number(text);
  };

  router.get('/console/webhooks', d.gate, async (ctx) => {
    ctx.type = 'html';
    ctx.body = await show(ctx);
  });

  router.post('/console/webhooks', d.gate, requireAdmin, async (ctx) => {
    const form = await formOf(ctx);
    const url = field(form, 'url').trim();
    const events = form.getAll('events') as WebhookEventType[];
    try {
      const created = await d.admin.createWebhook(actorOf(ctx), url, events);
      ctx.type = 'html';
      ctx.body = await show(ctx, { created });
    } catch (e) {
      if (!(e instanceof AdminError && e.status < 500)) throw e;
      ctx.status = e.status;
      ctx.type = 'html';
      ctx.body = await show(ctx, { error: capitalise(e.message), draft: { url, events } });
    }
  });

  router.post('/console/webhooks/:id/delete', d.gate, requireAdmin, async (ctx) => {
    const id = idOf(ctx);
    await act(
      ctx,
      d.cfg,
      async () => ({ text: `Deleted the endpoint ${(await d.admin.deleteWebhook(actorOf(ctx), id)).url}.`, to: '/console/webhooks' }),
      (message) => show(ctx, { error: message }),
    );
  });

  router.post('/console/webhooks/:id/test', d.gate, requireAdmin, async (ctx) => {
    const id = idOf(ctx);
    await act(
      ctx,
      d.cfg,
      async () => {
        await d.admin.testWebhook(actorOf(ctx), id);
        return { text: 'A test event is on its way; its delivery shows below within seconds.', to: '/console/webhooks' };
      },
      (message) => show(ctx, { error: message }),
    );
  });

  router.post('/console/webhooks/deliveries/:id/resend', d.gate, requireAdmin, async (ctx) => {
    const id = idOf(ctx);
    await act(
      ctx,
      d.cfg,
      async () => {
        const del = await d.admin.resendDelivery(actorOf(ctx), id);
        return { text: `The ${del.type} event is sent again.`, to: '/console/webhooks' };
      },
      (message) => show(ctx, { error: message }),
    );
  });
}
