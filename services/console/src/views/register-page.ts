// The device-approval page, /console/register/<auth id>: the AuthURL `tailscale up` prints. It shows the device that
// asked (host name, OS, client version, the address it asked from, when) and lets an administrator approve it for a
// user (creating the first user on the way when there is none) or reject it. Once decided it says what happened;
// an unknown or expired link says to run `tailscale up` again.
import type { UserView } from '../../../../shared/admin-client.ts';
import type { NodeView, PendingAuth } from '../../../../shared/model.ts';
import type { Flash } from '../request/flash.ts';
import { ago, clientVersionFull, osLabel, shortKey, utc } from './format.ts';
import { html, type Html } from './html.ts';
import { page, type Viewer } from './layout.ts';
import { commandBox, csrfField, errorBanner, flashBanner, readOnlyNote, userPicker } from './parts.ts';

export interface RegisterView {
  viewer: Viewer;
  pending: PendingAuth;
  users: UserView[];
  /** The machine it became, once approved. */
  node?: NodeView | null;
  flash?: Flash | null;
  error?: string | null;
}

function device(p: PendingAuth): Html {
  const os = osLabel(p.hostinfo);
  const version = clientVersionFull(p.hostinfo);
  return html`<div class="device-head">
  <span class="device-icon large" aria-hidden="true"></span>
  <div>
    <p class="device-name" id="device-name">${p.hostname || 'unnamed device'}</p>
    <p class="muted">${os || 'OS not reported'}</p>
  </div>
</div>
<dl class="facts-list compact">
  <div class="fact"><dt>Asked from</dt><dd class="mono" id="device-ip">${p.ip || 'unknown address'}</dd></div>
  <div class="fact"><dt>Asked at</dt><dd><span title="${utc(p.created)}">${utc(p.created)}</span> <span class="muted">(${ago(p.created)})</span></dd></div>
  <div class="fact"><dt>Client version</dt><dd>${version || '—'}</dd></div>
  <div class="fact"><dt>Machine key</dt><dd class="mono" title="${p.machineKey}">${shortKey(p.machineKey)}</dd></div>
  ${p.ephemeral ? html`<div class="fact"><dt>Ephemeral</dt><dd>yes — removed after it disconnects</dd></div>` : ''}
</dl>`;
}

function decide(v: RegisterView): Html {
  if (v.viewer.role !== 'admin') return readOnlyNote('this request');
  const p = v.pending;
  const suggested =
    v.users.length === 0 ? (/^[a-z0-9][a-z0-9._@-]{0,62}$/.test(v.viewer.username.toLowerCase()) ? v.viewer.username.toLowerCase() : '') : undefined;
  return html`<form method="post" action="/console/register/${p.authId}/approve" class="stack" id="approve-form">
    ${csrfField(v.viewer)}
    ${userPicker(v.users, { idPrefix: 'approve', suggested })}
    <p class="hint">The machine belongs to this user, gets its tailnet addresses now, and the device finishes <code>tailscale up</code> by itself.</p>
    <div class="button-row">
      <button type="submit" class="button primary">Approve device</button>
    </div>
  </form>
  <form method="post" action="/console/register/${p.authId}/reject" class="reject-form" id="reject-form">
    ${csrfField(v.viewer)}
    <button type="submit" class="button subtle danger">Reject</button>
    <span class="hint">Not yours? Rejecting ends this login; the device is told it was refused.</span>
  </form>`;
}

function decided(v: RegisterView): Html {
  const p = v.pending;
  if (p.status === 'approved') {
    return html`<div class="outcome ok" id="outcome" data-status="approved">
  <h2>Approved</h2>
  <p>${v.node ? html`It joined as <a href="/console/machines/${v.node.id}"><strong>${v.node.givenName}</strong></a> (<span class="mono">${v.node.ipv4}</span>) for user <strong>${v.node.user}</strong>` : 'It joined the tailnet'}${p.decidedBy ? html`, approved by ${p.decidedBy}` : ''}. The device finishes <code>tailscale up</code> by itself.</p>
  <p><a class="button primary" href="${v.node ? `/console/machines/${v.node.id}` : '/console/machines'}">${v.node ? 'Open the machine' : 'Go to Machines'}</a></p>
</div>`;
  }
  return html`<div class="outcome bad" id="outcome" data-status="rejected">
  <h2>Rejected</h2>
  <p>This login was refused${p.decidedBy ? html` by ${p.decidedBy}` : ''}. If that was a mistake, run <code>tailscale up</code> on the device again; it prints a new link.</p>
  <p><a class="button" href="/console/machines">Go to Machines</a></p>
</div>`;
}

export function registerPage(v: RegisterView): string {
  const open = v.pending.status === 'pending';
  return page({
    title: open ? 'Approve a device' : v.pending.status === 'approved' ? 'Device approved' : 'Device rejected',
    viewer: v.viewer,
    active: 'machines',
    body: html`<section class="card register">
  <p class="eyebrow">Device login</p>
  <h1>${open ? 'A device wants to join the tailnet' : v.pending.status === 'approved' ? 'Device approved' : 'Device rejected'}</h1>
  ${open ? flashBanner(v.flash) : ''}
  ${errorBanner(v.error)}
  ${device(v.pending)}
  ${open ? decide(v) : decided(v)}
</section>`,
  });
}

export function registerUnknownPage(viewer: Viewer, publicOrigin: string): string {
  return page({
    title: 'Login link expired',
    viewer,
    active: 'machines',
    body: html`<section class="card register" role="alert">
  <p class="eyebrow">Device login</p>
  <h1>This login link is unknown or has expired</h1>
  <p>Links from <code>tailscale up</code> are valid for 30 minutes and only for the device that printed them. Run this on the device again; it prints a new link to open here:</p>
  ${commandBox('cmd-again', `tailscale up --login-server=${publicOrigin}`)}
  <p><a class="button" href="/console/machines">Go to Machines</a></p>
</section>`,
    scripts: ['copy.js'],
  });
}
