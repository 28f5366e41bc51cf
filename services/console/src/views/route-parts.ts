// Pieces the machine page, the Machines list and the Routes view share for subnet routes and exit nodes: a route's
// state in words and badges, the approve / unapprove buttons, and a machine's route badges.
// A route (services/coordination/src/admin/route-routes.ts) is advertised by the device (`tailscale set
// --advertise-routes`, `--advertise-exit-node`) and approved by an administrator or an autoApprovers rule; only a route
// that is both is in use, and of the machines serving the same subnet exactly one is primary (the one peers route
// through). Exit nodes are never primary: clients choose one.
import type { RouteView } from '../../../../shared/admin-client.ts';
import { html, type Html } from './html.ts';
import type { Viewer } from './layout.ts';
import { csrfField } from './parts.ts';

export type RouteState = 'waiting' | 'primary' | 'standby' | 'exit' | 'approved-only';

/** One word for a route's state, for filters and tests. */
export function routeState(r: RouteView): RouteState {
  if (r.advertised && !r.approved) return 'waiting';
  if (!r.advertised) return 'approved-only';
  if (r.prefix === 'exit') return 'exit';
  return r.primary ? 'primary' : 'standby';
}

export function routeLabel(r: Pick<RouteView, 'prefix'>): Html {
  return r.prefix === 'exit'
    ? html`<span class="route-name">Exit node</span> <span class="sub mono">0.0.0.0/0, ::/0</span>`
    : html`<span class="route-name mono">${r.prefix}</span>`;
}

/** Badges: advertised / approved / in use (primary, standby, offered as exit node). */
export function routeBadges(r: RouteView): Html {
  const s = routeState(r);
  const state =
    s === 'waiting'
      ? html`<span class="badge warn" title="The machine advertises it; an administrator has not approved it yet">waiting for approval</span>`
      : s === 'approved-only'
        ? html`<span class="badge plain" title="Approved, but the machine does not advertise it (any more); it is not in use">approved, not advertised</span>`
        : s === 'exit'
          ? html`<span class="badge good" title="Offered to the devices the policy lets use exit nodes">exit node in use</span>`
          : s === 'primary'
            ? html`<span class="badge good" title="Peers route this subnet through this machine">primary</span>`
            : html`<span class="badge plain" title="Another machine serving this subnet is primary; this one takes over if it goes offline">standby</span>`;
  return html`<span class="route-state" data-state="${s}">${r.advertised ? html`<span class="badge plain">advertised</span>` : ''}${r.approved ? html`<span class="badge plain">approved</span>` : ''}${state}</span>`;
}

/** Approve or unapprove buttons for one route of a machine (administrators). `from` is where the answer leads back to. */
export function routeActions(r: RouteView, viewer: Viewer, from: 'machine' | 'routes'): Html | string {
  if (viewer.role !== 'admin') return '';
  const approve = !r.approved;
  const what = r.prefix === 'exit' ? 'exit node' : r.prefix;
  return html`<form method="post" action="/console/machines/${r.nodeId}/routes" class="inline-form route-form">
    ${csrfField(viewer)}<input type="hidden" name="prefix" value="${r.prefix}"><input type="hidden" name="action" value="${approve ? 'approve' : 'unapprove'}"><input type="hidden" name="from" value="${from}">
    <button type="submit" class="button${approve ? ' primary' : ' subtle'}" aria-label="${approve ? 'Approve' : 'Unapprove'} ${what} of ${r.node}">${approve ? 'Approve' : 'Unapprove'}</button>
  </form>`;
}

/** A machine's route badges for the Machines list: what it serves, and how many routes wait for approval. */
export function machineRouteBadges(routes: RouteView[]): Html | string {
  if (routes.length === 0) return '';
  const exit = routes.some((r) => r.prefix === 'exit' && r.advertised && r.approved);
  const subnets = routes.filter((r) => r.prefix !== 'exit' && r.advertised && r.approved).map((r) => r.prefix);
  const waiting = routes.filter((r) => r.advertised && !r.approved).length;
  return html`<span class="badges">${exit ? html`<span class="badge good" data-badge="exit-node">exit node</span>` : ''}${
    subnets.length ? html`<span class="badge good" data-badge="subnet-router" title="${subnets.join(', ')}">subnet router</span>` : ''
  }${waiting ? html`<span class="badge warn" data-badge="routes-waiting">${waiting} route${waiting === 1 ? '' : 's'} waiting</span>` : ''}</span>`;
}

/** Tags as badges. */
export function tagBadges(tags: string[]): Html | string {
  return tags.length ? html`<span class="tags">${tags.map((t) => html`<span class="badge tag mono">${t}</span>`)}</span>` : '';
}
