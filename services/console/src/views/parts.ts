// Pieces the network pages share: the CSRF field every form carries, the one-time notice, the user picker (an
// existing user, or a new one typed in), a command box with a copy button, empty states, and confirm-before-doing
// disclosures for destructive actions (a <details> element: no script, and one more click than a plain button).
import type { UserView } from '../../../../shared/admin-client.ts';
import type { Flash } from '../request/flash.ts';
import { html, type Html } from './html.ts';
import type { Viewer } from './layout.ts';

export function csrfField(viewer: Viewer): Html {
  return html`<input type="hidden" name="csrf" value="${viewer.csrf}">`;
}

export function flashBanner(f: Flash | null | undefined): Html | string {
  if (!f) return '';
  return f.kind === 'ok' ? html`<p class="notice ok" role="status">${f.text}</p>` : html`<div class="alert" role="alert"><p>${f.text}</p></div>`;
}

export function errorBanner(message: string | null | undefined): Html | string {
  return message ? html`<div class="alert" role="alert"><p>${message}</p></div>` : '';
}

/**
 * Choose the user something belongs to. With users: a select, plus a field for a new user name, which wins when
 * filled. Without any: only the new-name field, required, so the first key or approval also creates the first user.
 */
export function userPicker(users: UserView[], opts: { selected?: string; suggested?: string; idPrefix: string }): Html {
  if (users.length === 0) {
    return html`<label>New user
      <input name="newUser" required maxlength="63" autocomplete="off" autocapitalize="none" spellcheck="false" placeholder="e.g. alice" value="${opts.suggested ?? ''}" id="${opts.idPrefix}-newuser">
      <span class="hint">No users exist yet; this one is created now. Lowercase letters, digits and . _ @ -</span>
    </label>`;
  }
  return html`<label>User
      <select name="user" id="${opts.idPrefix}-user">${users.map((u) => html`<option value="${u.id}"${opts.selected === String(u.id) || opts.selected === u.name ? html` selected` : ''}>${u.name}</option>`)}</select>
    </label>
    <label>or a new user
      <input name="newUser" maxlength="63" autocomplete="off" autocapitalize="none" spellcheck="false" placeholder="new user name" id="${opts.idPrefix}-newuser">
    </label>`;
}

/** A shell command in a box, with a copy button the page script reveals (copy.js). */
export function commandBox(id: string, command: string, label = 'Copy'): Html {
  return html`<div class="command"><code id="${id}">${command}</code><button type="button" class="button subtle copy" data-copy="${id}">${label}</button></div>`;
}

export function emptyState(o: { title: string; body: Html | string; action?: Html | string }): Html {
  return html`<div class="empty-state">
  <div class="empty-icon" aria-hidden="true"></div>
  <h2>${o.title}</h2>
  <div class="empty-body">${o.body}</div>
  ${o.action ?? ''}
</div>`;
}

/**
 * A destructive action behind a disclosure: the summary is the button, the confirmation text and the real submit
 * button open under it.
 */
export function confirmAction(o: {
  viewer: Viewer;
  action: string;
  label: string;
  question: Html | string;
  confirmLabel: string;
  tone?: 'danger' | 'plain';
  hidden?: Record<string, string>;
}): Html {
  return html`<details class="confirm ${o.tone ?? 'danger'}">
  <summary class="button subtle${o.tone === 'plain' ? '' : ' danger'}">${o.label}</summary>
  <form method="post" action="${o.action}" class="confirm-body">
    ${csrfField(o.viewer)}
    ${Object.entries(o.hidden ?? {}).map(([k, v]) => html`<input type="hidden" name="${k}" value="${v}">`)}
    <p>${o.question}</p>
    <button type="submit" class="button ${o.tone === 'plain' ? 'primary' : 'danger'}">${o.confirmLabel}</button>
  </form>
</details>`;
}

export function pageHead(o: { title: string; subtitle?: Html | string; actions?: Html | string }): Html {
  return html`<div class="page-head">
  <div>
    <h1>${o.title}</h1>
    ${o.subtitle ? html`<p class="muted">${o.subtitle}</p>` : ''}
  </div>
  ${o.actions ? html`<div class="head-actions">${o.actions}</div>` : ''}
</div>`;
}

/** A note for auditors, where admins would see forms. */
export function readOnlyNote(what: string): Html {
  return html`<p class="readonly-note"><span class="badge plain">read-only</span> Your auditor account can see ${what} but not change it.</p>`;
}
