// The router's own metrics: requests by route (the service a path goes to) and status, upgrades by route, tunnels
// open. Counting is an indexed add per response (no prom-client call on the request path); the counters read the counts
// when scraped. Label values are bounded: three routes and the status codes the router and the services use.
import type { ServiceName } from '../../shared/paths.ts';
import { countedByLabels, gaugeOf } from '../../shared/metrics.ts';

// Per route, one slot per HTTP status (100-599): an indexed add per response, no string or map key built.
const ROUTES: readonly ServiceName[] = ['coordination', 'console', 'relay'];
const requests: Record<ServiceName, Float64Array> = { coordination: new Float64Array(600), console: new Float64Array(600), relay: new Float64Array(600) };
const upgrades = new Map<ServiceName, number>();

/** One answered request (not an upgrade): its route and status. */
export function countResponse(route: ServiceName, status: number): void {
  requests[route][status >= 100 && status < 600 ? status : 599]++;
}

/** One upgrade (a tunnel, whatever its protocol) handed to a service. */
export function countUpgrade(route: ServiceName): void {
  upgrades.set(route, (upgrades.get(route) ?? 0) + 1);
}

countedByLabels('hse_router_requests_total', 'Requests the router answered (upgrades excluded), by route and HTTP status.', ['route', 'status'], function* () {
  for (const route of ROUTES) {
    const counts = requests[route];
    for (let status = 100; status < 600; status++) if (counts[status] > 0) yield [{ route, status: String(status) }, counts[status]];
  }
});

countedByLabels('hse_router_upgrades_total', 'HTTP upgrades (control protocol, DERP, WebSocket) tunnelled to a service, by route.', ['route'], function* () {
  for (const [route, n] of upgrades) yield [{ route }, n];
});

/** Registers the open-tunnels gauge over the router's tunnel set. */
export function watchTunnels(size: () => number): void {
  gaugeOf('hse_router_tunnels_open', 'Upgraded connections (tunnels) the router holds open now.', size);
}
