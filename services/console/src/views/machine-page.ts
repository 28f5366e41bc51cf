// One machine: what the tailnet knows about it (kept current by the live stream, like the list) and, for an
// administrator, what to do with it: rename (its MagicDNS name), move to another user, disable or enable key expiry,
// expire its key (it must log in again), delete it.
import type { UserView } from '../../../../shared/admin-client.ts';
import type { NodeView } from '../../../../shared/model.ts';
import type { Flash } from '../request/flash.ts';
import { ago, clientVersionFull, osLabel, shortKey, utc } from './format.ts';
import { html, type Html } from './html.ts';
import { page, type Viewer } from './layout.ts';
import { expiryCell, liveStatus, onlineState } from './machines-page.ts';
import { confirmAction, csrfField, errorBanner, flashBanner, readOnlyNote } from './parts.ts';

export interface MachineView {
  viewer: Viewer;
  node: NodeView;
  users: UserView[];
  baseDomain: string;
  flash?: Flash | null;
  error?: string | null;
}

function row(label: string, value: Html | string, cls = ''): Html {
  return html`<div class="fact${cls ? ` ${cls}` : ''}"><dt>${label}</dt><dd>${value}</dd></div>`;
}

function joinedWith(n: NodeView): string {
  if (n.registeredBy === 'authkey') return `pre-auth key #${n.authKeyId ?? '?'}`;
  if (n.registeredBy === 'identity-provider') return 'its owner signed in with the identity provider';
  return 'interactive login, approved by an operator';
}

/** The facts card; the live stream re-renders it. */
export function machineFacts(n: NodeView | null, now = Date.now()): Html {
  if (!n) {
    return html`<section class="card facts gone" data-gone="true"><h2>This machine was deleted</h2><p class="muted">It is no longer part of the tailnet. <a href="/console/machines">Back to Machines</a></p></section>`;
  }
  const os = osLabel(n.hostinfo);
  const version = clientVersionFull(n.hostinfo);
  return html`<section class="card facts" data-online="${n.online ? 'true' : 'false'}">
  <h2>Details</h2>
  <dl class="facts-list">
    ${row('Status', onlineState(n, now))}
    ${row('Owner', n.user)}
    ${row('MagicDNS name', html`<span class="mono">${n.fqdn}</span>`)}
    ${row('Host name', n.hostname || '—')}
    ${row('Tailscale IPv4', html`<span class="mono">${n.ipv4}</span>`)}
    ${row('Tailscale IPv6', html`<span class="mono">${n.ipv6}</span>`)}
    ${row('OS', os || '—')}
    ${row('Client version', version || '—')}
    ${row('Key expiry', expiryCell(n, now))}
    ${row('Last seen', n.online ? 'now' : html`<span title="${utc(n.lastSeen)}">${n.lastSeen ? ago(n.lastSeen, now) : 'never'}</span>`)}
    ${row('Created', html`<span title="${utc(n.created)}">${utc(n.created)}</span>`)}
    ${row('Joined with', joinedWith(n))}
    ${row('Ephemeral', n.ephemeral ? 'yes — removed after it disconnects' : 'no')}
    ${row('Endpoints', n.endpoints.length ? html`<span class="mono">${n.endpoints.join(', ')}</span>` : '—')}
    ${row('Home relay region', n.homeDerp ? String(n.homeDerp) : '—')}
    ${row('Node key', html`<span class="mono" title="${n.nodeKey}">${shortKey(n.nodeKey)}</span>`)}
    ${row('Machine key', html`<span class="mono" title="${n.machineKey}">${shortKey(n.machineKey)}</span>`)}
  </dl>
</section>`;
}

function manage(v: MachineView): Html {
  const n = v.node;
  const others = v.users.filter((u) => u.id !== n.userId);
  return html`<section class="card manage">
  <h2>Manage</h2>
  <form method="post" action="/console/machines/${n.id}/rename" class="stack-sm" id="rename-form">
    ${csrfField(v.viewer)}
    <label>Name
      <input name="name" value="${n.givenName}" required maxlength="63" autocomplete="off" autocapitalize="none" spellcheck="false">
      <span class="hint">The MagicDNS name becomes <span class="mono">&lt;name&gt;.${v.baseDomain}</span>; every client sees it within seconds.</span>
    </label>
    <button type="submit" class="button primary">Rename</button>
  </form>
  <form method="post" action="/console/machines/${n.id}/move" class="stack-sm" id="move-form">
    ${csrfField(v.viewer)}
    <label>Owner
      <select name="user"${others.length ? '' : html` disabled`}>${v.users.map((u) => html`<option value="${u.id}"${u.id === n.userId ? html` selected` : ''}>${u.name}</option>`)}</select>
      ${others.length ? '' : html`<span class="hint">Create another user to move this machine to.</span>`}
    </label>
    <button type="submit" class="button"${others.length ? '' : html` disabled`}>Move to user</button>
  </form>
  <form method="post" action="/console/machines/${n.id}/key-expiry" class="stack-sm" id="key-expiry-form">
    ${csrfField(v.viewer)}
    <input type="hidden" name="disabled" value="${n.keyExpiryDisabled ? '0' : '1'}">
    <p class="field-label">Key expiry</p>
    <span class="hint">${
      n.keyExpiryDisabled
        ? 'Disabled: this machine keeps its key until someone expires or deletes it. Enabling gives the key a fresh lifetime from now.'
        : 'Disable it for servers and routers that should not need a login again; the key then never expires, also after a re-login.'
    }</span>
    <button type="submit" class="button">${n.keyExpiryDisabled ? 'Enable key expiry' : 'Disable key expiry'}</button>
  </form>
  <div class="danger-zone">
    ${confirmAction({
      viewer: v.viewer,
      action: `/console/machines/${n.id}/expire`,
      label: 'Expire key…',
      question: html`Expire the key of <strong>${n.givenName}</strong> now? It drops off the tailnet until someone runs <code>tailscale up</code> on it again.`,
      confirmLabel: 'Expire key',
    })}
    ${confirmAction({
      viewer: v.viewer,
      action: `/console/machines/${n.id}/delete`,
      label: 'Delete…',
      question: html`Delete <strong>${n.givenName}</strong>? It leaves the tailnet at once and its addresses are freed; to come back it must register again.`,
      confirmLabel: 'Delete machine',
    })}
  </div>
</section>`;
}

export function machinePage(v: MachineView): string {
  const n = v.node;
  return page({
    title: n.givenName,
    viewer: v.viewer,
    active: 'machines',
    scripts: ['live-view.js'],
    body: html`<p class="crumbs"><a href="/console/machines">← Machines</a></p>
<div class="page-head">
  <div>
    <h1>${n.givenName}</h1>
    <p class="muted mono">${n.fqdn}</p>
  </div>
  <div class="head-actions">${liveStatus()}</div>
</div>
${flashBanner(v.flash)}
${errorBanner(v.error)}
<div class="detail-grid">
  <div id="live" data-stream="/console/machines/stream?id=${n.id}">
  ${machineFacts(n)}
  </div>
  ${v.viewer.role === 'admin' ? manage(v) : html`<section class="card manage">${readOnlyNote('this machine')}</section>`}
</div>`,
  });
}
