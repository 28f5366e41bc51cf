// One machine: what the tailnet knows about it, its subnet routes and exit-node state, and who may reach it under the
// policy — all three kept current by the live stream, like the list — and, for an administrator, what to do with it:
// rename (its MagicDNS name), move to another user, set its tags, disable or enable key expiry, expire its key (it must
// log in again), delete it; approve or unapprove its routes.
import type { Reacher, RouteView, UserView } from '../../../../shared/admin-client.ts';
import type { NodeView } from '../../../../shared/model.ts';
import type { Flash } from '../request/flash.ts';
import { ago, clientVersionFull, osLabel, shortKey, utc } from './format.ts';
import { html, type Html } from './html.ts';
import { page, type Viewer } from './layout.ts';
import { expiryCell, liveStatus, onlineState } from './machines-page.ts';
import { confirmAction, csrfField, errorBanner, flashBanner, readOnlyNote } from './parts.ts';
import { routeActions, routeBadges, routeLabel, tagBadges } from './route-parts.ts';

/** What the live part of the page shows; null node = deleted. */
export interface MachineLive {
  viewer: Viewer;
  node: NodeView | null;
  routes: RouteView[];
  /** Who may reach it (GET /v1/nodes/:id/access); null while the policy has not taken the machine in yet. */
  reachers: Reacher[] | null;
}

export interface MachineView extends MachineLive {
  node: NodeView;
  users: UserView[];
  /** Tags the policy defines (tagOwners): the only ones a machine may carry. */
  definedTags: string[];
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
    ${row('Owner', n.tags.length ? html`its tags<span class="sub">added by ${n.user}</span>` : n.user)}
    ${row('Tags', n.tags.length ? tagBadges(n.tags) : html`<span class="muted">none</span>`)}
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

/** The machine's routes: each advertised or approved one with its state, and the buttons to approve or unapprove. */
function routesCard(v: MachineLive & { node: NodeView }): Html {
  const n = v.node;
  const waiting = v.routes.filter((r) => r.advertised && !r.approved);
  const body =
    v.routes.length === 0
      ? html`<p class="muted">It advertises no routes. To let it route to a network it reaches, run <code>tailscale set --advertise-routes=10.0.0.0/24</code> on it; to offer it as an exit node, <code>tailscale set --advertise-exit-node</code>. Either then waits here for approval (or an <code>autoApprovers</code> rule of the policy approves it).</p>`
      : html`<div class="table-wrap"><table class="data routes" id="machine-routes">
  <thead><tr><th scope="col">Route</th><th scope="col">State</th>${v.viewer.role === 'admin' ? html`<th scope="col"><span class="visually-hidden">Actions</span></th>` : ''}</tr></thead>
  <tbody>${v.routes.map(
    (
      r,
    ) => html`<tr data-prefix="${r.prefix}" data-advertised="${String(r.advertised)}" data-approved="${String(r.approved)}" data-primary="${String(r.primary)}">
    <td data-label="Route">${routeLabel(r)}</td>
    <td data-label="State">${routeBadges(r)}${r.advertised && r.approved && !n.online ? html`<span class="sub">offline: not in use until it is back</span>` : ''}</td>
    ${v.viewer.role === 'admin' ? html`<td data-label="Actions" class="row-actions">${routeActions(r, v.viewer, 'machine')}</td>` : ''}
  </tr>`,
  )}</tbody>
</table></div>
${
  v.viewer.role === 'admin' && waiting.length > 1
    ? html`<form method="post" action="/console/machines/${n.id}/routes" class="inline-form" id="approve-all-routes">
  ${csrfField(v.viewer)}${waiting.map((r) => html`<input type="hidden" name="prefix" value="${r.prefix}">`)}<input type="hidden" name="action" value="approve"><input type="hidden" name="from" value="machine">
  <button type="submit" class="button primary">Approve all ${waiting.length} waiting</button>
</form>`
    : ''
}
<p class="hint">Only approved routes reach other devices, and only the devices the policy lets use them.</p>`;
  return html`<section class="card routes-card" id="routes">
  <h2>Routes</h2>
  ${body}
</section>`;
}

/** Who may reach the machine under the policy in force: each rule that admits traffic to it, in words. */
function accessCard(v: MachineLive): Html {
  let body: Html;
  if (v.reachers === null) body = html`<p class="muted">Not worked out yet: the machine joined a moment ago. This updates by itself.</p>`;
  else if (v.reachers.length === 0)
    body = html`<p id="reach-nobody"><strong>Nobody.</strong> <span class="muted">No rule of the policy admits traffic to this machine; it can still reach others where the policy allows.</span></p>`;
  else
    body = html`<ul class="reachers" id="reachers">${v.reachers.map(
      (r) =>
        html`<li data-origin="${r.origin}"><span class="reach-text">${r.text}</span>${
          r.line > 0
            ? html`<span class="sub"><a href="/console/acls#L${r.line}">${r.origin}, line ${r.line}</a></span>`
            : html`<span class="sub"><a href="/console/acls">${r.origin}</a></span>`
        }</li>`,
    )}</ul>`;
  return html`<section class="card access-card" id="access">
  <h2>Who may reach this machine</h2>
  ${body}
</section>`;
}

/** Everything the live stream replaces: the facts, the routes, who may reach it. */
export function machineLive(v: MachineLive, now = Date.now()): Html {
  if (!v.node) return machineFacts(null, now);
  const n = v.node;
  return html`${machineFacts(n, now)}
${routesCard({ ...v, node: n })}
${accessCard(v)}`;
}

function tagForm(v: MachineView): Html {
  const n = v.node;
  const stale = n.tags.filter((t) => !v.definedTags.includes(t));
  const choices = [...v.definedTags, ...stale];
  return html`<form method="post" action="/console/machines/${n.id}/tags" class="stack-sm tag-form" id="tags-form">
    ${csrfField(v.viewer)}
    <p class="field-label">Tags</p>
    ${
      choices.length === 0
        ? html`<span class="hint">The policy defines no tags. Add them to <code>tagOwners</code> under <a href="/console/acls">Access controls</a> first.</span>`
        : html`<div class="checks">${choices.map(
            (t) =>
              html`<label class="check"><input type="checkbox" name="tag" value="${t}"${n.tags.includes(t) ? html` checked` : ''}><span><strong class="mono">${t}</strong>${
                stale.includes(t) ? html`<span class="hint">no longer in the policy's tagOwners</span>` : ''
              }</span></label>`,
          )}</div>
    <span class="hint">A tagged machine is owned by its tags, not by ${n.user}: the policy sees it as its tags, and its key does not expire. Clear every tag to give it back to its user.</span>
    <button type="submit" class="button">Save tags</button>`
    }
  </form>`;
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
  ${tagForm(v)}
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
  <div id="live" class="live-stack" data-stream="/console/machines/stream?id=${n.id}">
  ${machineLive(v)}
  </div>
  ${v.viewer.role === 'admin' ? manage(v) : html`<section class="card manage">${readOnlyNote('this machine')}</section>`}
</div>`,
  });
}
