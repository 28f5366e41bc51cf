// Admin API for webhooks (console "Webhooks"): endpoints (URL and the events it wants; the signing secret is made here
// and returned once, when the endpoint is made), each endpoint's recent deliveries with their state, sending a test
// event, and resending a delivery. Each change in the activity log (never the secret).
import { HseError } from '../../../../shared/errors.ts';
import { WEBHOOK_EVENTS, type WebhookEndpoint, type WebhookEventType } from '../../../../shared/model.ts';
import type { WebhookStore } from '../state/webhook-store.ts';
import { type EventContext, event } from '../webhooks/events.ts';
import { type Call, id, type Routes, str } from './admin-kit.ts';

export interface WebhookRouteDeps {
  webhooks: WebhookStore;
  ctx: EventContext;
  log: (c: Call, action: string, target: string, details?: Record<string, unknown>) => Promise<unknown>;
}

/** An endpoint as listed: everything but its secret. */
export type WebhookEndpointView = Omit<WebhookEndpoint, 'secret'>;

const shown = ({ secret: _s, ...rest }: WebhookEndpoint): WebhookEndpointView => rest;

function urlOf(body: Record<string, unknown>): string {
  const raw = str(body, 'url');
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    throw new HseError(400, `"${raw}" is not a URL (for example https://hooks.example.com/tailnet)`);
  }
  if (u.protocol !== 'https:' && u.protocol !== 'http:') throw new HseError(400, 'a webhook URL starts with https:// (or http:// on a network you trust)');
  if (u.username || u.password) throw new HseError(400, 'put no user name or password in the URL; the signature authenticates each delivery');
  return u.toString();
}

function eventsOf(body: Record<string, unknown>): WebhookEventType[] {
  const v = body.events;
  if (!Array.isArray(v) || v.length === 0 || !v.every((e) => typeof e === 'string')) {
    throw new HseError(400, `"events" must list at least one of ${WEBHOOK_EVENTS.join(', ')}`);
  }
  const unknown = v.filter((e) => !(WEBHOOK_EVENTS as readonly string[]).includes(e));
  if (unknown.length > 0) throw new HseError(400, `unknown event ${unknown.join(', ')}; the events are ${WEBHOOK_EVENTS.join(', ')}`);
  return WEBHOOK_EVENTS.filter((e) => v.includes(e));
}

export function webhookRoutes(d: WebhookRouteDeps): Routes {
  const mustEndpoint = async (s: string) => {
    const e = await d.webhooks.endpoint(id(s));
    if (!e) throw new HseError(404, `no webhook endpoint with id ${s}`);
    return e;
  };
  return {
    'GET /v1/webhooks': async () => (await d.webhooks.endpoints()).map(shown),
    'POST /v1/webhooks': async (c) => {
      const e = await d.webhooks.createEndpoint({ url: urlOf(c.body), events: eventsOf(c.body), createdBy: c.actor });
      await d.log(c, 'webhook.create', e.url, { id: e.id, events: e.events });
      return e;
    },
    'DELETE /v1/webhooks/:id': async (c) => {
      const e = await d.webhooks.deleteEndpoint(id(c.params[0]));
      await d.log(c, 'webhook.delete', e.url, { id: e.id });
      return shown(e);
    },
    'GET /v1/webhooks/:id/deliveries': async (c) => d.webhooks.deliveries((await mustEndpoint(c.params[0])).id),
    'POST /v1/webhooks/:id/test': async (c) => {
      const e = await mustEndpoint(c.params[0]);
      const ev = event(d.ctx, 'test', 'This is a test event from hse', { actor: c.actor });
      const [delivery] = await d.webhooks.enqueue([{ endpointId: e.id, type: 'test', body: JSON.stringify([ev]) }], null);
      await d.log(c, 'webhook.test', e.url, { id: e.id, delivery: delivery.id });
      return delivery;
    },
    'POST /v1/webhooks/deliveries/:id/resend': async (c) => {
      const delivery = await d.webhooks.resend(id(c.params[0]));
      const e = await d.webhooks.endpoint(delivery.endpointId);
      await d.log(c, 'webhook.resend', e?.url ?? `endpoint ${delivery.endpointId}`, { delivery: delivery.id, type: delivery.type });
      return delivery;
    },
  };
}
