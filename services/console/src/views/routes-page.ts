// Routes: every subnet route and exit node any machine advertises or has approved, with its state (advertised,
// approved, primary or standby, in use as exit node, the machine online), routes waiting for approval first, and the
// approve / unapprove buttons for administrators. The part inside #live is re-rendered by the live stream
// (network/machines-stream.ts, /console/routes/stream) with the same function.
import type { RouteView } from '../../../../shared/admin-client.ts';
import type { Flash } from '../request/flash.ts';
import { html, type Html } from './html.ts';
import { page, type Viewer } from './layout.ts';
import { liveStatus } from './machines-page.ts';
import { emptyState, errorBanner, flashBanner, pageHead } from './parts.ts';
import { routeActions, routeBadges, routeLabel, routeState } from './route-parts.ts';

export interface RoutesView {
  viewer: Viewer;
  routes: RouteView[];
  flash?: Flash | null;
  error?: string | null;
}

/** Waiting first, then by route (exit nodes last), then by machine name. */
function ordered(routes: RouteView[]): RouteView[] {
  const key = (r: RouteView) => (routeState(r) === 'waiting' ? 0 : 1);
  return [...routes].sort(
    (a, b) =>
      key(a) - key(b) ||
      Number(a.prefix === 'exit') - Number(b.prefix === 'exit') ||
      a.prefix.localeCompare(b.prefix, 'en', { numeric: true }) ||
      a.node.localeCompare(b.node),
  );
}

function routeRow(r: RouteView, viewer: Viewer): Html {
  return html`<tr data-node="${r.node}" data-prefix="${r.prefix}" data-state="${routeState(r)}" data-approved="${String(r.approved)}">
  <td data-label="Route">${routeLabel(r)}</td>
  <td data-label="Machine"><a class="machine-name" href="/console/machines/${r.nodeId}">${r.node}</a></td>
  <td data-label="State">${routeBadges(r)}</td>
  <td data-label="Machine is">${r.online ? html`<span class="state online"><span class="dot" aria-hidden="true"></span>Online</span>` : html`<span class="state offline"><span class="dot" aria-hidden="true"></span>Offline</span>`}</td>
  ${viewer.role === 'admin' ? html`<td data-label="Actions" class="row-actions">${routeActions(r, viewer, 'routes')}</td>` : ''}
</tr>`;
}

/** Everything the live stream replaces. */
export function routesLive(v: Pick<RoutesView, 'viewer' | 'routes'>): Html {
  if (v.routes.length === 0) {
    return emptyState({
      title: 'No routes yet',
      body: html`<p>A machine that can reach a network the others cannot (an office LAN, a cloud VPC) can route to it for them: run <code>tailscale set --advertise-routes=10.0.0.0/24</code> on it. To let devices send all their traffic through a machine, run <code>tailscale set --advertise-exit-node</code> on it.</p>
<p class="muted">The route then waits here for approval, unless an <code>autoApprovers</code> rule of the policy approves it at once. Which devices may use it is up to the policy.</p>`,
    });
  }
  const waiting = v.routes.filter((r) => routeState(r) === 'waiting').length;
  const exits = v.routes.filter((r) => routeState(r) === 'exit').length;
  const admin = v.viewer.role === 'admin';
  return html`<p class="summary muted" id="routes-summary"><strong>${v.routes.length}</strong> route${v.routes.length === 1 ? '' : 's'}${
    waiting ? html` · <strong>${waiting}</strong> waiting for approval` : ''
  }${exits ? html` · <strong>${exits}</strong> exit node${exits === 1 ? '' : 's'} in use` : ''}</p>
<div class="table-wrap">
<table class="data routes" id="routes-table">
  <thead><tr><th scope="col">Route</th><th scope="col">Machine</th><th scope="col">State</th><th scope="col">Machine is</th>${admin ? html`<th scope="col"><span class="visually-hidden">Actions</span></th>` : ''}</tr></thead>
  <tbody>${ordered(v.routes).map((r) => routeRow(r, v.viewer))}</tbody>
</table>
</div>`;
}

export function routesPage(v: RoutesView): string {
  return page({
    title: 'Routes',
    viewer: v.viewer,
    active: 'routes',
    scripts: ['live-view.js'],
    body: html`${pageHead({
      title: 'Routes',
      subtitle: 'Subnet routes and exit nodes the machines advertise. Only approved ones reach other devices. This page updates by itself.',
      actions: liveStatus(),
    })}
${flashBanner(v.flash)}
${errorBanner(v.error)}
<div id="live" data-stream="/console/routes/stream">
${routesLive(v)}
</div>`,
  });
}
