// Admin API for subnet routes and exit nodes (console "Routes", the machine page, `hse routes`, the remote API): every
// advertised route with its state, and approving or unapproving routes of a machine. "exit" (or either of 0.0.0.0/0,
// ::/0) stands for the exit-node pair, which is approved and unapproved together. Each change in the activity log.
import { HseError } from '../../../../shared/errors.ts';
import type { NodeRecord, RouteView } from '../../../../shared/model.ts';
import type { MapHub } from '../control/map-hub.ts';
import { advertisedRoutes, canonicalPrefix, EXIT_ROUTES, effectiveRoutes, isExitPrefix } from '../map/routes.ts';
import type { Store } from '../state/store.ts';
import type { Tailnet } from '../state/tailnet.ts';
import { type Call, id, type Routes } from './admin-kit.ts';

export interface RouteRouteDeps {
  store: Store;
  tailnet: Tailnet;
  hub: MapHub;
  log: (c: Call, action: string, target: string, details?: Record<string, unknown>) => Promise<unknown>;
}

/** The routes of one machine: subnets one by one, the exit pair as one "exit" entry. */
export function routesOf(n: NodeRecord, primaries: string[], online: boolean): RouteView[] {
  const advertised = advertisedRoutes(n);
  const approved = n.approvedRoutes.map((p) => canonicalPrefix(p) ?? p);
  const active = effectiveRoutes(n);
  const out: RouteView[] = [];
  const subnets = [...new Set([...advertised, ...approved])].filter((p) => !isExitPrefix(p)).sort();
  for (const p of subnets) {
    out.push({
      nodeId: n.id,
      node: n.givenName,
      prefix: p,
      advertised: advertised.includes(p),
      approved: approved.includes(p),
      active: active.includes(p),
      primary: primaries.includes(p),
      online,
    });
  }
  const exitAdvertised = EXIT_ROUTES.every((p) => advertised.includes(p));
  const exitApproved = EXIT_ROUTES.every((p) => approved.includes(p));
  if (exitAdvertised || exitApproved) {
    out.push({
      nodeId: n.id,
      node: n.givenName,
      prefix: 'exit',
      advertised: exitAdvertised,
      approved: exitApproved,
      active: active.includes('0.0.0.0/0'),
      primary: false,
      online,
    });
  }
  return out;
}

/** The prefixes of a request, canonical; "exit" and either exit prefix become the pair. */
export function prefixesOf(body: Record<string, unknown>): string[] {
  const raw = body.prefixes ?? body.routes;
  if (!Array.isArray(raw) || raw.length === 0 || !raw.every((p) => typeof p === 'string')) {
    throw new HseError(400, '"prefixes" must be a list of routes like ["10.0.0.0/24"] (or ["exit"] for the exit node)');
  }
  const out = new Set<string>();
  for (const p of raw as string[]) {
    if (p.trim().toLowerCase() === 'exit' || isExitPrefix(canonicalPrefix(p) ?? '')) {
      for (const e of EXIT_ROUTES) out.add(e);
      continue;
    }
    const c = canonicalPrefix(p);
    if (!c) throw new HseError(400, `"${p}" is not a route (write it as a CIDR prefix such as 10.0.0.0/24, or "exit")`);
    out.add(c);
  }
  return [...out];
}

export function routeRoutes(d: RouteRouteDeps): Routes {
  const mustNode = async (s: string): Promise<NodeRecord> => {
    const n = await d.store.getNode(id(s));
    if (!n) throw new HseError(404, `no machine with id ${s}`);
    return n;
  };
  const view = (n: NodeRecord) => routesOf(n, d.hub.primaryRoutesOf(n.id), d.tailnet.online.has(n.id));

  const change = async (c: Call, approve: boolean) => {
    const before = await mustNode(c.params[0]);
    const prefixes = prefixesOf(c.body);
    const n =
      (await d.store.updateNode(
        before.id,
        (x) => {
          const set = new Set(x.approvedRoutes.map((p) => canonicalPrefix(p) ?? p));
          for (const p of prefixes) {
            if (approve) set.add(p);
            else set.delete(p);
          }
          const next = [...set].sort();
          return next.join() === x.approvedRoutes.join() ? null : { ...x, approvedRoutes: next };
        },
        true,
      )) ?? before;
    const shown = prefixes.includes('0.0.0.0/0') ? [...prefixes.filter((p) => !isExitPrefix(p)), 'exit'] : prefixes;
    await d.log(c, approve ? 'route.approve' : 'route.unapprove', n.givenName, {
      routes: shown,
      notAdvertised: approve ? shown.filter((p) => p !== 'exit' && !advertisedRoutes(n).includes(p)) : undefined,
    });
    return view(n);
  };

  return {
    'GET /v1/routes': async () => {
      const all: RouteView[] = [];
      for (const n of await d.store.listNodes()) all.push(...view(n));
      return all;
    },
    'GET /v1/nodes/:id/routes': async (c) => view(await mustNode(c.params[0])),
    'POST /v1/nodes/:id/routes/approve': async (c) => change(c, true),
    'POST /v1/nodes/:id/routes/unapprove': async (c) => change(c, false),
  };
}
