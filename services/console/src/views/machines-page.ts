// The Machines page: devices waiting for approval first (approve for a user, or reject — or, when devices join through
// the identity provider, only reject: their owner signs in instead), then every machine with its owner or tags, its
// route badges (subnet router, exit node, routes waiting for approval), addresses, online state, OS and client version,
// and key expiry; search and filters above. The part inside
// #live is re-rendered by the live stream (network/machines-stream.ts) whenever the tailnet changes, with the same
// functions, so the page and its updates can never disagree.
import type { RouteView, UserView } from '../../../../shared/admin-client.ts';
import type { NodeView, PendingAuth } from '../../../../shared/model.ts';
import { isFiltered, machineFilterParams, type MachineFilter } from '../network/machine-filter.ts';
import type { Flash } from '../request/flash.ts';
import { ago, clientVersion, clientVersionFull, expiryState, osLabel, relative, utc } from './format.ts';
import { html, type Html } from './html.ts';
import { page, type Viewer } from './layout.ts';
import { commandBox, csrfField, emptyState, flashBanner, pageHead, userPicker } from './parts.ts';
import { machineRouteBadges, tagBadges } from './route-parts.ts';

export interface MachinesData {
  nodes: NodeView[];
  /** After the filter. */
  shown: NodeView[];
  pending: PendingAuth[];
  users: UserView[];
  /** Each machine's advertised and approved routes, by node id (machines without any are absent). */
  routes: ReadonlyMap<number, RouteView[]>;
}

export interface MachinesView extends MachinesData {
  viewer: Viewer;
  filter: MachineFilter;
  publicOrigin: string;
  /**
   * The identity provider's name when devices join by their owner signing in there and approving them by hand is off
   * (HSE_OIDC_* without HSE_OIDC_OPERATOR_APPROVAL=on); null when an administrator approves them.
   */
  signInProvider?: string | null;
  flash?: Flash | null;
}

export function onlineState(n: NodeView, now = Date.now()): Html {
  // An expired key cuts the machine off whatever its connection does: that is what the operator needs to see.
  if (n.expired)
    return html`<span class="state offline"><span class="dot" aria-hidden="true"></span>Key expired</span><span class="sub">needs <code>tailscale up</code> to rejoin</span>`;
  if (n.online) return html`<span class="state online"><span class="dot" aria-hidden="true"></span>Online</span>`;
  return html`<span class="state offline"><span class="dot" aria-hidden="true"></span>Offline</span><span class="sub" title="${utc(n.lastSeen)}">${n.lastSeen ? `last seen ${ago(n.lastSeen, now)}` : 'never connected'}</span>`;
}

/** Key expiry of a machine: never, disabled by an operator, expired, within a week (a warning), or later. */
export function expiryCell(n: Pick<NodeView, 'expiry' | 'keyExpiryDisabled'>, now = Date.now()): Html {
  if (n.keyExpiryDisabled) return html`<span class="muted" title="An administrator disabled key expiry for this machine">Never (disabled)</span>`;
  const expiry = n.expiry;
  const s = expiryState(expiry, now);
  if (s === 'never') return html`<span class="muted">Never</span>`;
  if (s === 'expired') return html`<span class="badge bad" title="${utc(expiry)}">Expired</span><span class="sub">${relative(expiry!, now)}</span>`;
  if (s === 'soon') return html`<span class="badge warn" title="${utc(expiry)}">${relative(expiry!, now)}</span>`;
  return html`<span title="${utc(expiry)}">${relative(expiry!, now)}</span>`;
}

function machineRow(n: NodeView, routes: RouteView[], now: number): Html {
  const os = osLabel(n.hostinfo);
  const version = clientVersion(n.hostinfo);
  return html`<tr data-id="${n.id}" data-name="${n.givenName}" data-online="${n.online ? 'true' : 'false'}"${n.expired ? html` data-expired="true"` : ''}>
  <td data-label="Machine" class="machine">
    <a class="machine-name" href="/console/machines/${n.id}">${n.givenName}</a>${n.ephemeral ? html` <span class="badge plain" title="Removed automatically after it disconnects">ephemeral</span>` : ''}${machineRouteBadges(routes)}
    <span class="sub mono">${n.fqdn}</span>
  </td>
  <td data-label="Owner" class="owner">${n.tags.length ? html`${tagBadges(n.tags)}<span class="sub">added by ${n.user}</span>` : n.user}</td>
  <td data-label="Addresses" class="mono addr"><span>${n.ipv4}</span><span class="sub">${n.ipv6}</span></td>
  <td data-label="Status" class="status">${onlineState(n, now)}</td>
  <td data-label="OS · client" class="os">${os || html`<span class="muted">—</span>`}${version ? html`<span class="sub" title="${clientVersionFull(n.hostinfo)}">Tailscale ${version}</span>` : ''}</td>
  <td data-label="Key expiry" class="expiry">${expiryCell(n, now)}</td>
</tr>`;
}

function pendingItem(p: PendingAuth, v: { viewer: Viewer; users: UserView[]; signInProvider?: string | null }, now: number): Html {
  const os = osLabel(p.hostinfo);
  const admin = v.viewer.role === 'admin';
  if (v.signInProvider) return providerPendingItem(p, { ...v, signInProvider: v.signInProvider }, os, now);
  const id = `pending-${p.authId.slice(0, 12)}`;
  return html`<li class="pending-item" data-auth-id="${p.authId}">
  ${pendingDevice(p, os, now)}
  ${
    admin
      ? html`<div class="pending-actions">
    <form method="post" action="/console/register/${p.authId}/approve" class="inline-form">
      ${csrfField(v.viewer)}<input type="hidden" name="from" value="machines">
      ${userPicker(v.users, { idPrefix: id })}
      <button type="submit" class="button primary">Approve</button>
    </form>
    <form method="post" action="/console/register/${p.authId}/reject" class="inline-form">
      ${csrfField(v.viewer)}<input type="hidden" name="from" value="machines">
      <button type="submit" class="button subtle danger">Reject</button>
    </form>
  </div>`
      : html`<span class="badge plain">waiting for an administrator</span>`
  }
</li>`;
}

/** A waiting device: its name (linking to its registration page), OS, address and how long ago it asked. */
function pendingDevice(p: PendingAuth, os: string, now: number): Html {
  return html`<div class="pending-device">
    <span class="device-icon" aria-hidden="true"></span>
    <div>
      <a class="machine-name" href="/console/register/${p.authId}">${p.hostname || 'unnamed device'}</a>
      <span class="sub">${[os, `from ${p.ip || 'unknown address'}`, `asked ${ago(p.created, now)}`].filter(Boolean).join(' · ')}</span>
    </div>
  </div>`;
}

/** A device that joins through the identity provider: no approval here, only a way to end its login. */
function providerPendingItem(p: PendingAuth, v: { viewer: Viewer; signInProvider: string }, os: string, now: number): Html {
  return html`<li class="pending-item" data-auth-id="${p.authId}">
  ${pendingDevice(p, os, now)}
  <div class="pending-actions">
    <span class="badge plain">waiting for its owner to sign in with ${v.signInProvider}</span>
    ${
      v.viewer.role === 'admin'
        ? html`<form method="post" action="/console/register/${p.authId}/reject" class="inline-form">
      ${csrfField(v.viewer)}<input type="hidden" name="from" value="machines">
      <button type="submit" class="button subtle danger">Reject</button>
    </form>`
        : ''
    }
  </div>
</li>`;
}

export function loginCommand(publicOrigin: string, key = '<key>'): string {
  return `tailscale up --login-server=${publicOrigin} --auth-key=${key}`;
}

function noMachines(v: MachinesView): Html {
  const admin = v.viewer.role === 'admin';
  return emptyState({
    title: 'No machines yet',
    body: html`<p>Machines join with a pre-auth key. ${admin ? 'Create one, then run this on the device (the key page shows it filled in):' : 'An administrator creates a key; on the device you then run:'}</p>
${commandBox('cmd-join', loginCommand(v.publicOrigin))}
<p class="muted">Or run <code>tailscale up --login-server=${v.publicOrigin}</code> without a key: the device prints a link, ${
      v.signInProvider ? html`and whoever opens it and signs in with ${v.signInProvider} gets the device.` : 'and it waits here for approval.'
    }</p>`,
    action: admin ? html`<a class="button primary" href="/console/keys#create">Create a pre-auth key</a>` : '',
  });
}

/** Everything the live stream replaces. */
export function machinesLive(v: MachinesView, now = Date.now()): Html {
  const online = v.nodes.filter((n) => n.online).length;
  const filtered = isFiltered(v.filter);
  const table =
    v.nodes.length === 0
      ? noMachines(v)
      : html`<div class="table-wrap">
<table class="data machines" id="machines-table">
  <thead><tr><th scope="col">Machine</th><th scope="col">Owner</th><th scope="col">Addresses</th><th scope="col">Status</th><th scope="col">OS · client</th><th scope="col">Key expiry</th></tr></thead>
  <tbody>
  ${v.shown.length ? v.shown.map((n) => machineRow(n, v.routes.get(n.id) ?? [], now)) : html`<tr class="empty"><td colspan="6">No machines match ${filtered ? 'these filters' : 'yet'}. <a href="/console/machines">Show all</a></td></tr>`}
  </tbody>
</table>
</div>`;
  return html`<p class="summary muted" id="machines-summary"><strong>${v.nodes.length}</strong> machine${v.nodes.length === 1 ? '' : 's'} · <strong>${online}</strong> online${filtered ? html` · ${v.shown.length} shown` : ''}${v.pending.length ? html` · <strong>${v.pending.length}</strong> waiting for approval` : ''}</p>
${
  v.pending.length
    ? html`<section class="pending" aria-labelledby="pending-title">
  <h2 id="pending-title">Waiting for approval <span class="count">${v.pending.length}</span></h2>
  <p class="muted">${
    v.signInProvider
      ? html`These devices ran <code>tailscale up</code> without a key. Each joins when its owner opens the link the device printed and signs in with ${v.signInProvider}; approving by hand is off (<code>HSE_OIDC_OPERATOR_APPROVAL</code>). Reject one to end its login.`
      : html`These devices ran <code>tailscale up</code> without a key. Approve one for a user and it joins at once; reject it and its login ends.`
  }</p>
  <ul class="pending-list">${v.pending.map((p) => pendingItem(p, v, now))}</ul>
</section>`
    : ''
}
${table}`;
}

function filterForm(v: MachinesView): Html {
  const f = v.filter;
  const opt = (value: string, label: string, current: string) => html`<option value="${value}"${value === current ? html` selected` : ''}>${label}</option>`;
  return html`<form method="get" action="/console/machines" class="filters" role="search">
  <label class="wide">Search<input name="q" type="search" value="${f.q}" placeholder="name, address, owner, tag or OS" autocomplete="off"></label>
  <label>Owner<select name="owner">${opt('', 'Everyone', f.owner)}${v.users.map((u) => opt(u.name, u.name, f.owner))}</select></label>
  <label>Status<select name="status">${opt('', 'Any', f.status)}${opt('online', 'Online', f.status)}${opt('offline', 'Offline', f.status)}</select></label>
  <label>Key expiry<select name="expiry">${opt('', 'Any', f.expiry)}${opt('soon', 'Within 7 days', f.expiry)}${opt('expired', 'Expired', f.expiry)}</select></label>
  <label title="Pending: routes a machine advertises that wait for approval. In use: subnet routers and exit nodes.">Routes<select name="routes">${opt('', 'Any', f.routes)}${opt('pending', 'Pending', f.routes)}${opt('serving', 'In use', f.routes)}</select></label>
  <div class="actions">
    <button type="submit" class="button primary">Filter</button>
    ${isFiltered(f) ? html`<a class="button subtle" href="/console/machines">Clear</a>` : ''}
  </div>
</form>`;
}

export function liveStatus(): Html {
  return html`<span class="live" id="live-status" data-state="connecting" role="status" aria-live="polite"><span class="dot" aria-hidden="true"></span><span class="label">Connecting…</span></span>`;
}

export function machinesPage(v: MachinesView): string {
  const q = machineFilterParams(v.filter).toString();
  return page({
    title: 'Machines',
    viewer: v.viewer,
    active: 'machines',
    scripts: ['live-view.js', 'copy.js'],
    body: html`${pageHead({
      title: 'Machines',
      subtitle: 'Every device in the tailnet. This page updates by itself.',
      actions: html`${liveStatus()}${v.viewer.role === 'admin' ? html`<a class="button primary" href="/console/keys#create">Add a machine</a>` : ''}`,
    })}
${flashBanner(v.flash)}
${filterForm(v)}
<div id="live" data-stream="/console/machines/stream${q ? `?${q}` : ''}">
${machinesLive(v)}
</div>`,
  });
}
