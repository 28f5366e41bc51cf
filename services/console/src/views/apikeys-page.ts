// API keys for the remote API (/api/v2, Tailscale's shape): a form to make one (what it is for, how long it lasts,
// full or read-only access), the list with each key's last use (time and address), and revoke. A new key is shown
// exactly once, in the answer to the form, with a copy button and a ready curl command.
import type { ApiKeyView } from '../../../../shared/model.ts';
import type { Flash } from '../request/flash.ts';
import { relative, utc } from './format.ts';
import { html, type Html } from './html.ts';
import { page, type Viewer } from './layout.ts';
import { commandBox, confirmAction, csrfField, emptyState, errorBanner, flashBanner, pageHead, readOnlyNote } from './parts.ts';

/** Lifetimes offered, in days (the admin API takes one day to a year). */
export const API_KEY_DAYS = [7, 30, 90, 365];
export const DEFAULT_API_KEY_DAYS = 90;

export interface ApiKeysView {
  viewer: Viewer;
  keys: ApiKeyView[];
  publicOrigin: string;
  flash?: Flash | null;
  error?: string | null;
  created?: (ApiKeyView & { key: string }) | null;
  draft?: { description?: string; days?: number; readOnly?: boolean };
}

function state(k: ApiKeyView): 'revoked' | 'expired' | 'active' {
  if (k.revoked) return 'revoked';
  return k.expired ? 'expired' : 'active';
}

function keyRow(k: ApiKeyView, v: ApiKeysView, now: number): Html {
  const s = state(k);
  const admin = v.viewer.role === 'admin';
  return html`<tr data-id="${k.id}" data-prefix="${k.prefix}" data-state="${s}">
  <td data-label="Key" class="mono key-prefix">${k.prefix}-…</td>
  <td data-label="For">${k.description}</td>
  <td data-label="Access"><span class="badge plain">${k.role === 'readonly' ? 'read-only' : 'full'}</span></td>
  <td data-label="State">${s === 'active' ? html`<span class="badge good">active</span>` : html`<span class="badge bad">${s}</span>`}</td>
  <td data-label="Expires" title="${utc(k.expiration)}">${relative(k.expiration, now)}</td>
  <td data-label="Last used" class="time">${k.lastUsed ? html`<span title="${utc(k.lastUsed.time)}">${utc(k.lastUsed.time)}</span><span class="sub">from ${k.lastUsed.ip || 'unknown'}</span>` : 'never'}</td>
  <td data-label="Created" class="time"><span title="${utc(k.created)}">${utc(k.created)}</span><span class="sub">by ${k.createdBy}</span></td>
  ${
    admin
      ? html`<td data-label="Actions" class="row-actions">${
          s === 'active'
            ? confirmAction({
                viewer: v.viewer,
                action: `/console/apikeys/${k.id}/revoke`,
                label: 'Revoke…',
                question: html`Revoke <span class="mono">${k.prefix}</span> ("${k.description}") now? Scripts using it get 401 from the next call.`,
                confirmLabel: 'Revoke key',
              })
            : ''
        }</td>`
      : ''
  }
</tr>`;
}

function createdBox(k: ApiKeyView & { key: string }, publicOrigin: string): Html {
  return html`<section class="card created-key" id="created-key" role="status">
  <h2>API key created — copy it now</h2>
  <p>This is the only time the whole key is shown; only its prefix is kept readable. It gives ${k.role === 'readonly' ? 'read-only' : 'full'} access to the remote API until ${utc(k.expiration)}.</p>
  <p class="field-label">Key</p>
  ${commandBox('new-key', k.key, 'Copy key')}
  <p class="field-label">Try it</p>
  ${commandBox('new-command', `curl -H "Authorization: Bearer ${k.key}" ${publicOrigin}/api/v2/tailnet/-/devices`, 'Copy command')}
</section>`;
}

function createForm(v: ApiKeysView): Html {
  const d = v.draft ?? {};
  const days = d.days ?? DEFAULT_API_KEY_DAYS;
  return html`<form method="post" action="/console/apikeys" class="card create-form" id="create">
  ${csrfField(v.viewer)}
  <h2>New API key</h2>
  <div class="form-row">
    <label>What it is for<input name="description" required maxlength="50" placeholder="terraform, ci, grafana" value="${d.description ?? ''}"></label>
    <label>Valid for<select name="days">${API_KEY_DAYS.map((n) => html`<option value="${n}"${n === days ? html` selected` : ''}>${n === 365 ? '1 year' : `${n} days`}</option>`)}</select></label>
  </div>
  <div class="checks">
    <label class="check"><input type="checkbox" name="readonly" value="1"${d.readOnly ? html` checked` : ''}><span><strong>Read-only</strong><span class="hint">can list and read, never change (dashboards, inventories)</span></span></label>
  </div>
  <button type="submit" class="button primary">Create API key</button>
</form>`;
}

export function apiKeysPage(v: ApiKeysView, now = Date.now()): string {
  const admin = v.viewer.role === 'admin';
  const keys = [...v.keys].sort((a, b) => b.id - a.id);
  return page({
    title: 'API keys',
    viewer: v.viewer,
    active: 'apikeys',
    scripts: ['copy.js'],
    body: html`${pageHead({ title: 'API keys', subtitle: html`Keys for the remote API at <code>${v.publicOrigin}/api/v2</code>, in Tailscale's API shape: its clients and Terraform work with this base URL.` })}
${flashBanner(v.flash)}
${errorBanner(v.error)}
${v.created ? createdBox(v.created, v.publicOrigin) : ''}
${admin ? createForm(v) : readOnlyNote('API keys')}
<h2 class="section-title">Keys <span class="count">${keys.filter((k) => state(k) === 'active').length} active</span></h2>
${
  keys.length === 0
    ? emptyState({
        title: 'No API keys yet',
        body: html`<p>${admin ? 'Create one above for a script, Terraform or a dashboard.' : 'An administrator creates API keys here.'}</p>`,
      })
    : html`<div class="table-wrap">
<table class="data keys" id="apikeys-table">
  <thead><tr><th scope="col">Key</th><th scope="col">For</th><th scope="col">Access</th><th scope="col">State</th><th scope="col">Expires</th><th scope="col">Last used (UTC)</th><th scope="col">Created (UTC)</th>${admin ? html`<th scope="col"><span class="visually-hidden">Actions</span></th>` : ''}</tr></thead>
  <tbody>${keys.map((k) => keyRow(k, v, now))}</tbody>
</table>
</div>`
}`,
  });
}
