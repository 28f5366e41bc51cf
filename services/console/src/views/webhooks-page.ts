// Webhooks: endpoints (URL and the events each wants; the signing secret is shown once, when the endpoint is made) and,
// under each, its recent deliveries with their state — delivered, waiting for the next attempt, or given up after a
// day — the receiver's last answer, and buttons to resend one or to send a test event.
import type { WebhookEndpointView } from '../../../../shared/admin-client.ts';
import { WEBHOOK_EVENTS, type WebhookDelivery, type WebhookEndpoint } from '../../../../shared/model.ts';
import type { Flash } from '../request/flash.ts';
import { relative, utc } from './format.ts';
import { html, type Html } from './html.ts';
import { page, type Viewer } from './layout.ts';
import { commandBox, confirmAction, csrfField, emptyState, errorBanner, flashBanner, pageHead, readOnlyNote } from './parts.ts';

/** What each event means, for the form. */
export const EVENT_HINTS: Record<(typeof WEBHOOK_EVENTS)[number], string> = {
  nodeCreated: 'a machine joined the tailnet',
  nodeNeedsApproval: 'a device waits for an administrator to approve it',
  nodeApproved: 'an administrator approved a device',
  nodeDeleted: 'a machine was removed (by someone, or an ephemeral one after it left)',
  nodeKeyExpiringInOneDay: "a machine's key expires within a day",
  nodeKeyExpired: "a machine's key expired",
  routesNeedApproval: 'a machine advertises routes no autoApprovers rule approves (hse only)',
  policyUpdate: 'the tailnet policy file changed',
  userCreated: 'a tailnet user was made',
  userDeleted: 'a tailnet user was deleted',
};

export interface WebhooksView {
  viewer: Viewer;
  endpoints: { endpoint: WebhookEndpointView; deliveries: WebhookDelivery[] }[];
  flash?: Flash | null;
  error?: string | null;
  created?: WebhookEndpoint | null;
  draft?: { url?: string; events?: string[] };
}

function deliveryState(d: WebhookDelivery, now: number): Html {
  if (d.status === 'delivered') return html`<span class="badge good">delivered</span>`;
  if (d.status === 'failed') return html`<span class="badge bad">failed</span>`;
  return d.attempts === 0
    ? html`<span class="badge plain">queued</span>`
    : html`<span class="badge warn">retrying</span><span class="sub">next ${d.nextAttempt ? relative(d.nextAttempt, now) : ''}</span>`;
}

function deliveryRow(d: WebhookDelivery, v: WebhooksView, now: number): Html {
  return html`<tr data-delivery="${d.id}" data-type="${d.type}" data-status="${d.status}">
  <td data-label="Event">${d.type}</td>
  <td data-label="State">${deliveryState(d, now)}</td>
  <td data-label="Attempts">${d.attempts}</td>
  <td data-label="Last answer">${d.lastStatus ?? (d.lastError ? '—' : '')}${d.lastError ? html`<span class="sub">${d.lastError}</span>` : ''}</td>
  <td data-label="Created" class="time" title="${utc(d.created)}">${utc(d.created)}</td>
  ${
    v.viewer.role === 'admin'
      ? html`<td data-label="Actions" class="row-actions"><form method="post" action="/console/webhooks/deliveries/${d.id}/resend">${csrfField(v.viewer)}<button type="submit" class="button subtle">Resend</button></form></td>`
      : ''
  }
</tr>`;
}

function endpointCard(e: { endpoint: WebhookEndpointView; deliveries: WebhookDelivery[] }, v: WebhooksView, now: number): Html {
  const ep = e.endpoint;
  const admin = v.viewer.role === 'admin';
  return html`<section class="card webhook" data-endpoint="${ep.id}">
  <h2 class="mono">${ep.url}</h2>
  <p class="muted">${ep.events.join(', ')} · made by ${ep.createdBy} ${utc(ep.created)}</p>
  ${
    admin
      ? html`<div class="head-actions"><form method="post" action="/console/webhooks/${ep.id}/test">${csrfField(v.viewer)}<button type="submit" class="button subtle">Send test event</button></form>
  ${confirmAction({ viewer: v.viewer, action: `/console/webhooks/${ep.id}/delete`, label: 'Delete…', question: html`Delete the endpoint <span class="mono">${ep.url}</span>? Its waiting deliveries are dropped.`, confirmLabel: 'Delete endpoint' })}</div>`
      : ''
  }
  ${
    e.deliveries.length === 0
      ? html`<p class="muted">No deliveries yet.</p>`
      : html`<div class="table-wrap"><table class="data deliveries">
  <thead><tr><th scope="col">Event</th><th scope="col">State</th><th scope="col">Attempts</th><th scope="col">Last answer</th><th scope="col">Created (UTC)</th>${admin ? html`<th scope="col"><span class="visually-hidden">Actions</span></th>` : ''}</tr></thead>
  <tbody>${e.deliveries.map((d) => deliveryRow(d, v, now))}</tbody>
</table></div>`
  }
</section>`;
}

function createdBox(e: WebhookEndpoint): Html {
  return html`<section class="card created-key" id="created-secret" role="status">
  <h2>Endpoint added — copy its secret now</h2>
  <p>Every delivery to <span class="mono">${e.url}</span> carries <code>Tailscale-Webhook-Signature: t=&lt;unix time&gt;,v1=&lt;hex HMAC-SHA256 of "t.body"&gt;</code> made with this secret, as Tailscale signs its webhooks. It is shown only now.</p>
  ${commandBox('new-secret', e.secret, 'Copy secret')}
</section>`;
}

function createForm(v: WebhooksView): Html {
  const chosen = v.draft?.events ?? ['nodeCreated', 'nodeNeedsApproval', 'nodeDeleted'];
  return html`<form method="post" action="/console/webhooks" class="card create-form" id="create">
  ${csrfField(v.viewer)}
  <h2>New endpoint</h2>
  <div class="form-row"><label>URL<input name="url" type="url" required placeholder="https://hooks.example.com/tailnet" value="${v.draft?.url ?? ''}"></label></div>
  <div class="checks">${WEBHOOK_EVENTS.map(
    (ev) =>
      html`<label class="check"><input type="checkbox" name="events" value="${ev}"${chosen.includes(ev) ? html` checked` : ''}><span><strong>${ev}</strong><span class="hint">${EVENT_HINTS[ev]}</span></span></label>`,
  )}</div>
  <button type="submit" class="button primary">Add endpoint</button>
</form>`;
}

export function webhooksPage(v: WebhooksView, now = Date.now()): string {
  const admin = v.viewer.role === 'admin';
  return page({
    title: 'Webhooks',
    viewer: v.viewer,
    active: 'webhooks',
    scripts: ['copy.js'],
    body: html`${pageHead({ title: 'Webhooks', subtitle: 'Events of the tailnet sent to your endpoints, signed, retried for a day until they are received.' })}
${flashBanner(v.flash)}
${errorBanner(v.error)}
${v.created ? createdBox(v.created) : ''}
${admin ? createForm(v) : readOnlyNote('webhooks')}
${
  v.endpoints.length === 0
    ? emptyState({ title: 'No endpoints yet', body: html`<p>${admin ? 'Add one above.' : 'An administrator adds endpoints here.'}</p>` })
    : v.endpoints.map((e) => endpointCard(e, v, now))
}`,
  });
}
