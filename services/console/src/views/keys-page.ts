// Pre-auth keys: a form to create one (user, single-use or reusable, ephemeral, lifetime), the list (only the
// prefix of each key is ever stored in readable form), and expire. A new key is shown exactly once, in the answer to
// the form, with a copy button and the ready `tailscale up` command.
import type { UserView } from '../../../../shared/admin-client.ts';
import type { PreAuthKeyView } from '../../../../shared/model.ts';
import type { Flash } from '../request/flash.ts';
import { relative, utc } from './format.ts';
import { html, type Html } from './html.ts';
import { page, type Viewer } from './layout.ts';
import { loginCommand } from './machines-page.ts';
import { commandBox, confirmAction, csrfField, emptyState, errorBanner, flashBanner, pageHead, readOnlyNote, userPicker } from './parts.ts';

/** Lifetimes offered, in seconds (the admin API takes 60 s to one year). */
export const LIFETIMES: { seconds: number; label: string }[] = [
  { seconds: 3600, label: '1 hour' },
  { seconds: 86_400, label: '1 day' },
  { seconds: 7 * 86_400, label: '7 days' },
  { seconds: 30 * 86_400, label: '30 days' },
  { seconds: 90 * 86_400, label: '90 days' },
  { seconds: 365 * 86_400, label: '1 year' },
];
export const DEFAULT_LIFETIME = 86_400;

export interface KeysView {
  viewer: Viewer;
  keys: PreAuthKeyView[];
  users: UserView[];
  publicOrigin: string;
  flash?: Flash | null;
  error?: string | null;
  /** Just created: the whole key, shown this once. */
  created?: (PreAuthKeyView & { key: string }) | null;
  draft?: { user?: string; reusable?: boolean; ephemeral?: boolean; lifetime?: number };
}

export function keyState(k: PreAuthKeyView): 'expired' | 'used' | 'active' {
  if (k.expired) return 'expired';
  if (!k.reusable && k.used) return 'used';
  return 'active';
}

function keyRow(k: PreAuthKeyView, v: KeysView, now: number): Html {
  const state = keyState(k);
  const admin = v.viewer.role === 'admin';
  return html`<tr data-id="${k.id}" data-prefix="${k.prefix}" data-state="${state}">
  <td data-label="Key" class="mono key-prefix">${k.prefix}-…</td>
  <td data-label="User">${k.user}</td>
  <td data-label="Kind"><span class="badge plain">${k.reusable ? 'reusable' : 'single-use'}</span>${k.ephemeral ? html` <span class="badge plain">ephemeral</span>` : ''}</td>
  <td data-label="State">${state === 'active' ? html`<span class="badge good">active</span>` : state === 'used' ? html`<span class="badge plain">used</span>` : html`<span class="badge bad">expired</span>`}</td>
  <td data-label="Expires" title="${utc(k.expiration)}">${relative(k.expiration, now)}</td>
  <td data-label="Created" class="time"><span title="${utc(k.created)}">${utc(k.created)}</span><span class="sub">by ${k.createdBy}</span></td>
  ${
    admin
      ? html`<td data-label="Actions" class="row-actions">${
          state === 'active'
            ? confirmAction({
                viewer: v.viewer,
                action: `/console/keys/${k.id}/expire`,
                label: 'Expire…',
                question: html`Expire <span class="mono">${k.prefix}</span> now? Machines that already joined stay; no new device can use it.`,
                confirmLabel: 'Expire key',
              })
            : ''
        }</td>`
      : ''
  }
</tr>`;
}

function createdBox(k: PreAuthKeyView & { key: string }, publicOrigin: string): Html {
  return html`<section class="card created-key" id="created-key" role="status">
  <h2>Key created — copy it now</h2>
  <p>This is the only time the whole key is shown; only its prefix is kept readable. ${k.reusable ? 'It can register any number of devices' : 'It registers one device'} for <strong>${k.user}</strong>${k.ephemeral ? ' as ephemeral machines' : ''}, until ${utc(k.expiration)}.</p>
  <p class="field-label">Key</p>
  ${commandBox('new-key', k.key, 'Copy key')}
  <p class="field-label">On the device, run</p>
  ${commandBox('new-command', loginCommand(publicOrigin, k.key), 'Copy command')}
</section>`;
}

function createForm(v: KeysView): Html {
  const d = v.draft ?? {};
  const lifetime = d.lifetime ?? DEFAULT_LIFETIME;
  return html`<form method="post" action="/console/keys" class="card create-form" id="create">
  ${csrfField(v.viewer)}
  <h2>New pre-auth key</h2>
  <div class="form-row">
    ${userPicker(v.users, { idPrefix: 'key', selected: d.user })}
    <label>Valid for<select name="lifetime">${LIFETIMES.map((l) => html`<option value="${l.seconds}"${l.seconds === lifetime ? html` selected` : ''}>${l.label}</option>`)}</select></label>
  </div>
  <div class="checks">
    <label class="check"><input type="checkbox" name="reusable" value="1"${d.reusable ? html` checked` : ''}><span><strong>Reusable</strong><span class="hint">registers any number of devices until it expires; otherwise one device</span></span></label>
    <label class="check"><input type="checkbox" name="ephemeral" value="1"${d.ephemeral ? html` checked` : ''}><span><strong>Ephemeral</strong><span class="hint">machines are removed automatically after they disconnect (CI runners, containers)</span></span></label>
  </div>
  <button type="submit" class="button primary">Create key</button>
</form>`;
}

export function keysPage(v: KeysView, now = Date.now()): string {
  const admin = v.viewer.role === 'admin';
  const active = v.keys.filter((k) => keyState(k) === 'active').length;
  // Newest first: the key just made, or about to be used, is at the top.
  const keys = [...v.keys].sort((a, b) => b.id - a.id);
  return page({
    title: 'Keys',
    viewer: v.viewer,
    active: 'keys',
    scripts: ['copy.js'],
    body: html`${pageHead({ title: 'Pre-auth keys', subtitle: html`Keys let devices join without an interactive login: <code>tailscale up --login-server=${v.publicOrigin} --auth-key=&lt;key&gt;</code>` })}
${flashBanner(v.flash)}
${errorBanner(v.error)}
${v.created ? createdBox(v.created, v.publicOrigin) : ''}
${admin ? createForm(v) : readOnlyNote('keys')}
<h2 class="section-title">Keys <span class="count">${active} active</span></h2>
${
  keys.length === 0
    ? emptyState({
        title: 'No keys yet',
        body: html`<p>${admin ? 'Create a key above; the next page shows the command to run on the device.' : 'An administrator creates keys here.'}</p>`,
      })
    : html`<div class="table-wrap">
<table class="data keys" id="keys-table">
  <thead><tr><th scope="col">Key</th><th scope="col">User</th><th scope="col">Kind</th><th scope="col">State</th><th scope="col">Expires</th><th scope="col">Created (UTC)</th>${admin ? html`<th scope="col"><span class="visually-hidden">Actions</span></th>` : ''}</tr></thead>
  <tbody>${keys.map((k) => keyRow(k, v, now))}</tbody>
</table>
</div>`
}`,
  });
}
