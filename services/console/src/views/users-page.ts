// Users of the tailnet (who machines and keys belong to; not console accounts): a list with machine counts, a form
// to create one, and per user rename and delete. Deleting a user that still owns machines is refused by the
// coordination service; its message is shown as it is.
import type { UserView } from '../../../../shared/admin-client.ts';
import type { Flash } from '../request/flash.ts';
import { utc } from './format.ts';
import { html, type Html } from './html.ts';
import { page, type Viewer } from './layout.ts';
import { confirmAction, csrfField, emptyState, errorBanner, flashBanner, pageHead, readOnlyNote } from './parts.ts';

export interface UsersView {
  viewer: Viewer;
  users: UserView[];
  flash?: Flash | null;
  error?: string | null;
  /** What the create form held when it was refused, so nothing has to be typed again. */
  draft?: { name?: string; displayName?: string };
}

/** The person's picture from the identity provider (fetched by the browser, sent no referrer), else their initial. */
function avatar(u: UserView): Html {
  if (u.picture) return html`<img class="avatar small" src="${u.picture}" alt="" width="26" height="26" referrerpolicy="no-referrer" loading="lazy">`;
  return html`<span class="avatar small" aria-hidden="true">${u.name.slice(0, 1).toUpperCase()}</span>`;
}

/** For users who sign in with the identity provider: their e-mail there and their groups as of the last sign-in. */
function providerFacts(u: UserView): Html | string {
  if (!u.idp) return '';
  return html`<span class="sub user-email">${u.email && u.email !== u.name ? html`${u.email} · ` : ''}signs in with the identity provider</span>${
    u.idpGroups?.length
      ? html`<span class="sub user-groups" title="Provider groups at the last sign-in; the policy refers to them as idp:&lt;group&gt;">groups: ${u.idpGroups.join(', ')}</span>`
      : ''
  }`;
}

function userRow(u: UserView, v: UsersView): Html {
  const admin = v.viewer.role === 'admin';
  return html`<tr data-id="${u.id}" data-name="${u.name}">
  <td data-label="User" class="user-cell"><div class="who-cell">${avatar(u)}<span><strong class="user-name">${u.name}</strong>${u.displayName && u.displayName !== u.name ? html`<span class="sub">${u.displayName}</span>` : ''}${providerFacts(u)}</span></div></td>
  <td data-label="Machines" class="count-cell">${u.machines ? html`<a href="/console/machines?owner=${encodeURIComponent(u.name)}">${u.machines} machine${u.machines === 1 ? '' : 's'}</a>` : html`<span class="muted">none</span>`}</td>
  <td data-label="Created" class="time">${utc(u.created)}</td>
  ${
    admin
      ? html`<td data-label="Actions" class="row-actions">
    <details class="confirm plain">
      <summary class="button subtle">Rename…</summary>
      <form method="post" action="/console/users/${u.id}/rename" class="confirm-body">
        ${csrfField(v.viewer)}
        <label>New name<input name="name" value="${u.name}" required maxlength="63" autocomplete="off" autocapitalize="none" spellcheck="false"></label>
        <button type="submit" class="button primary">Rename</button>
      </form>
    </details>
    ${confirmAction({
      viewer: v.viewer,
      action: `/console/users/${u.id}/delete`,
      label: 'Delete…',
      question: u.machines
        ? html`<strong>${u.name}</strong> still owns ${u.machines} machine${u.machines === 1 ? '' : 's'}; the coordination service will refuse until they are deleted or moved. Try anyway?`
        : html`Delete <strong>${u.name}</strong>? Its pre-auth keys are removed with it and stop working.`,
      confirmLabel: 'Delete user',
    })}
  </td>`
      : ''
  }
</tr>`;
}

function createForm(v: UsersView): Html {
  return html`<form method="post" action="/console/users" class="card create-form" id="create">
  ${csrfField(v.viewer)}
  <h2>New user</h2>
  <div class="form-row">
    <label>Name<input name="name" required maxlength="63" autocomplete="off" autocapitalize="none" spellcheck="false" placeholder="alice" value="${v.draft?.name ?? ''}"></label>
    <label><span class="label-text">Display name <span class="optional">optional</span></span><input name="displayName" maxlength="100" autocomplete="off" placeholder="Alice Example" value="${v.draft?.displayName ?? ''}"></label>
    <button type="submit" class="button primary">Create user</button>
  </div>
  <p class="hint">Lowercase letters, digits and . _ @ - (an e-mail address works). Machines and keys belong to a user.</p>
</form>`;
}

export function usersPage(v: UsersView): string {
  const admin = v.viewer.role === 'admin';
  return page({
    title: 'Users',
    viewer: v.viewer,
    active: 'users',
    body: html`${pageHead({ title: 'Users', subtitle: 'People and services that own machines in the tailnet. Console sign-ins are under Accounts.' })}
${flashBanner(v.flash)}
${errorBanner(v.error)}
${admin ? createForm(v) : readOnlyNote('users')}
${
  v.users.length === 0
    ? emptyState({
        title: 'No users yet',
        body: html`<p>Every machine belongs to a user. ${admin ? 'Create the first one above, then a pre-auth key for it.' : 'An administrator creates them.'}</p>`,
        action: admin ? html`<a class="button" href="/console/keys#create">Create a pre-auth key</a>` : '',
      })
    : html`<div class="table-wrap">
<table class="data users" id="users-table">
  <thead><tr><th scope="col">User</th><th scope="col">Machines</th><th scope="col">Created (UTC)</th>${admin ? html`<th scope="col"><span class="visually-hidden">Actions</span></th>` : ''}</tr></thead>
  <tbody>${v.users.map((u) => userRow(u, v))}</tbody>
</table>
</div>`
}`,
  });
}
