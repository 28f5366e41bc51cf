// Console accounts (people who sign in here; not tailnet users): administrators and read-only auditors. An
// administrator creates, disables, re-enables and deletes accounts and resets their passwords; a generated password
// is shown once, in the answer to the form. Auditors see the list without any of the buttons.
import type { Account } from '../auth/accounts.ts';
import type { Flash } from '../request/flash.ts';
import { utc } from './format.ts';
import { html, type Html } from './html.ts';
import { page, type Viewer } from './layout.ts';
import { commandBox, confirmAction, csrfField, errorBanner, flashBanner, pageHead, readOnlyNote } from './parts.ts';

export interface AccountsView {
  viewer: Viewer;
  accounts: Account[];
  flash?: Flash | null;
  error?: string | null;
  /** A password generated just now (new account or reset), shown this once. */
  secret?: { username: string; password: string; reason: 'created' | 'reset' } | null;
  draft?: { username?: string; role?: string };
}

function roleBadge(role: string): Html {
  return html`<span class="badge ${role === 'admin' ? 'good' : 'plain'}">${role === 'admin' ? 'administrator' : 'auditor'}</span>`;
}

function accountRow(a: Account, v: AccountsView): Html {
  const self = a.username.toLowerCase() === v.viewer.username.toLowerCase();
  const admin = v.viewer.role === 'admin';
  const path = `/console/accounts/${encodeURIComponent(a.username)}`;
  return html`<tr data-name="${a.username}" data-disabled="${a.disabled ? 'true' : 'false'}">
  <td data-label="Account" class="user-cell"><div class="who-cell"><span class="avatar small" aria-hidden="true">${a.username.slice(0, 1).toUpperCase()}</span><span><strong>${a.username}</strong>${self ? html` <span class="badge plain">you</span>` : ''}</span></div></td>
  <td data-label="Role">${roleBadge(a.role)}</td>
  <td data-label="State">${a.disabled ? html`<span class="badge bad">disabled</span>` : html`<span class="badge good">active</span>`}</td>
  <td data-label="Created" class="time"><span>${utc(a.createdAt)}</span><span class="sub">by ${a.createdBy}</span></td>
  <td data-label="Password changed" class="time">${utc(a.passwordChangedAt)}</td>
  ${
    admin
      ? html`<td data-label="Actions" class="row-actions">${
          self
            ? html`<a class="button subtle" href="/console/account">Change my password</a>`
            : html`${
                a.disabled
                  ? html`<form method="post" action="${path}/enable" class="inline-form">${csrfField(v.viewer)}<button type="submit" class="button subtle">Enable</button></form>`
                  : confirmAction({
                      viewer: v.viewer,
                      action: `${path}/disable`,
                      label: 'Disable…',
                      question: html`Disable <strong>${a.username}</strong>? Their sessions end now and they cannot sign in until enabled again.`,
                      confirmLabel: 'Disable account',
                    })
              }
    ${confirmAction({ viewer: v.viewer, action: `${path}/reset-password`, label: 'Reset password…', question: html`Give <strong>${a.username}</strong> a new generated password? Their sessions end; you see the new password once and pass it on.`, confirmLabel: 'Reset password', tone: 'plain' })}
    ${confirmAction({ viewer: v.viewer, action: `${path}/delete`, label: 'Delete…', question: html`Delete the account <strong>${a.username}</strong>? Their sessions end. Their entries in Logs stay.`, confirmLabel: 'Delete account' })}`
        }</td>`
      : ''
  }
</tr>`;
}

function secretBox(s: NonNullable<AccountsView['secret']>): Html {
  return html`<section class="card created-key" id="new-password" role="status">
  <h2>${s.reason === 'created' ? `Account ${s.username} created` : `New password for ${s.username}`} — copy the password now</h2>
  <p>It is shown only this once (only a hash is stored). Pass it to ${s.username} over a safe channel; they can change it under their own account.</p>
  ${commandBox('generated-password', s.password, 'Copy password')}
</section>`;
}

function createForm(v: AccountsView): Html {
  const role = v.draft?.role === 'admin' ? 'admin' : 'auditor';
  return html`<form method="post" action="/console/accounts" class="card create-form" id="create">
  ${csrfField(v.viewer)}
  <h2>New console account</h2>
  <div class="form-row">
    <label>User name<input name="username" required maxlength="64" autocomplete="off" autocapitalize="none" spellcheck="false" placeholder="auditor" value="${v.draft?.username ?? ''}"></label>
    <label>Role<select name="role"><option value="auditor"${role === 'auditor' ? html` selected` : ''}>Auditor — sees everything, changes nothing</option><option value="admin"${role === 'admin' ? html` selected` : ''}>Administrator — full control</option></select></label>
    <label><span class="label-text">Password <span class="optional">optional</span></span><input name="password" type="password" autocomplete="new-password" maxlength="1024" placeholder="leave empty to generate one"></label>
    <button type="submit" class="button primary">Create account</button>
  </div>
  <p class="hint">User names: letters, digits and . _ @ -. A password you type needs 12 characters or more; an empty field generates a strong one, shown once.</p>
</form>`;
}

export function accountsPage(v: AccountsView): string {
  const admin = v.viewer.role === 'admin';
  const accounts = [...v.accounts].sort((a, b) => a.username.localeCompare(b.username));
  return page({
    title: 'Accounts',
    viewer: v.viewer,
    active: 'accounts',
    scripts: ['copy.js'],
    body: html`${pageHead({ title: 'Console accounts', subtitle: 'Who may sign in to this console. Administrators change things; auditors only look.' })}
${flashBanner(v.flash)}
${errorBanner(v.error)}
${v.secret ? secretBox(v.secret) : ''}
${admin ? createForm(v) : readOnlyNote('the accounts')}
<div class="table-wrap">
<table class="data accounts" id="accounts-table">
  <thead><tr><th scope="col">Account</th><th scope="col">Role</th><th scope="col">State</th><th scope="col">Created (UTC)</th><th scope="col">Password changed</th>${admin ? html`<th scope="col"><span class="visually-hidden">Actions</span></th>` : ''}</tr></thead>
  <tbody>${accounts.map((a) => accountRow(a, v))}</tbody>
</table>
</div>`,
  });
}

export interface OwnAccountView {
  viewer: Viewer;
  account: Account;
  flash?: Flash | null;
  error?: string | null;
}

export function ownAccountPage(v: OwnAccountView): string {
  const a = v.account;
  return page({
    title: 'My account',
    viewer: v.viewer,
    body: html`${pageHead({ title: 'My account', subtitle: html`Signed in as <strong>${a.username}</strong> · ${roleBadge(a.role)}` })}
${flashBanner(v.flash)}
${errorBanner(v.error)}
<form method="post" action="/console/account/password" class="card narrow-form stack" id="password-form">
  ${csrfField(v.viewer)}
  <h2>Change password</h2>
  <input type="text" name="username" value="${a.username}" autocomplete="username" hidden>
  <label>Current password<input name="current" type="password" autocomplete="current-password" required maxlength="1024"></label>
  <label>New password<input name="password" type="password" autocomplete="new-password" required minlength="12" maxlength="1024"><span class="hint">At least 12 characters; a few words make a good one.</span></label>
  <label>New password again<input name="confirm" type="password" autocomplete="new-password" required minlength="12" maxlength="1024"></label>
  <button type="submit" class="button primary">Change password</button>
  <p class="hint">Your other sessions end; this one stays signed in. Last changed ${utc(a.passwordChangedAt)}.</p>
</form>`,
  });
}
