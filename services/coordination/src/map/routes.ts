// Subnet routes and exit nodes: what a node advertises (Hostinfo.RoutableIPs), what an operator or an autoApprovers
// rule approved (NodeRecord.approvedRoutes), what is in effect (both), and which router is primary for each subnet.
//
//   - A route is in effect only while it is both advertised and approved: unapproving it, or the client no longer
//     advertising it (`tailscale set --advertise-routes=`), takes it out of every peer's map.
//   - An exit node is a node with both 0.0.0.0/0 and ::/0 in effect (the client offers it only with both; tsaddr
//     ContainsExitRoutes). Exit routes are never primaried: every exit node is offered and clients choose.
//   - Each subnet prefix in effect on several routers has exactly one primary, the router peers route through (the
//     prefix is in its AllowedIPs only; a client given the same prefix by two peers picks by score and node id, and
//     control should not leave that to it). The primary is chosen among online routers: the current one stays while
//     it is online (no flapping back when an earlier primary returns), otherwise the lowest node id takes over. With
//     no router online the prefix has no primary until one comes back.
// Reference: tailscale net/tsaddr (exit routes), headscale hscontrol/state/node_store.go electPrimaryRoutes.
import ipaddr from 'ipaddr.js';
import type { NodeRecord } from '../../../../shared/model.ts';

export const EXIT_ROUTES = ['0.0.0.0/0', '::/0'] as const;

export function isExitPrefix(p: string): boolean {
  return p === '0.0.0.0/0' || p === '::/0';
}

/** A prefix in canonical form (network address, lowercase IPv6), or null when it is not one. */
export function canonicalPrefix(p: string): string | null {
  try {
    const [addr, bits] = ipaddr.parseCIDR(p.trim());
    const network = addr.kind() === 'ipv4' ? ipaddr.IPv4.networkAddressFromCIDR(p.trim()) : ipaddr.IPv6.networkAddressFromCIDR(p.trim());
    return `${network.toString()}/${bits}`;
  } catch {
    return null;
  }
}

/** The prefixes the node's client advertises (Hostinfo.RoutableIPs), canonical, deduplicated, in the order sent. */
export function advertisedRoutes(n: NodeRecord): string[] {
  const raw = (n.hostinfo as { RoutableIPs?: unknown } | null)?.RoutableIPs;
  if (!Array.isArray(raw)) return [];
  const out: string[] = [];
  for (const r of raw) {
    const c = typeof r === 'string' ? canonicalPrefix(r) : null;
    if (c && !out.includes(c)) out.push(c);
  }
  return out;
}

// Node records are replaced, never changed in place (every update stores a new object), so the routes in effect are
// worked out once per record. The map hub asks for them per viewer and router at every policy compile: parsing the
// prefixes each time was most of a compile's cost in a tailnet with many routers (bench:control --failover).
const effective = new WeakMap<NodeRecord, readonly string[]>();

/**
 * The routes in effect for the node: advertised and approved. The exit routes count only as a pair (an exit node),
 * which is also how the policy engine and the clients see them. Shared between callers: never modify it.
 */
export function effectiveRoutes(n: NodeRecord): readonly string[] {
  let routes = effective.get(n);
  if (!routes) {
    const advertised = new Set(advertisedRoutes(n));
    const approved = new Set(n.approvedRoutes.map((p) => canonicalPrefix(p) ?? p));
    const subnets = [...advertised].filter((p) => !isExitPrefix(p) && approved.has(p));
    const exit = EXIT_ROUTES.every((p) => advertised.has(p) && approved.has(p));
    routes = Object.freeze(exit ? [...subnets, ...EXIT_ROUTES] : subnets);
    effective.set(n, routes);
  }
  return routes;
}

export function isExitNode(n: NodeRecord): boolean {
  return effectiveRoutes(n).includes('0.0.0.0/0');
}

/** Which router is primary for each subnet prefix; recomputed when routes or online state change. */
export class PrimaryRoutes {
  /** prefix → node id. */
  private readonly primary = new Map<string, number>();

  /** The prefixes the node is primary for, sorted. */
  of(nodeId: number): string[] {
    const out: string[] = [];
    for (const [p, id] of this.primary) if (id === nodeId) out.push(p);
    return out.sort();
  }

  isPrimary(nodeId: number, prefix: string): boolean {
    return this.primary.get(prefix) === nodeId;
  }

  /** Re-elects; returns the routers whose set of primary prefixes changed (gained or lost one). */
  update(nodes: Iterable<NodeRecord>, online: ReadonlySet<number>): Set<number> {
    const candidates = new Map<string, number[]>();
    for (const n of nodes) {
      if (!online.has(n.id)) continue;
      for (const p of effectiveRoutes(n)) {
        if (isExitPrefix(p)) continue;
        let list = candidates.get(p);
        if (!list) {
          list = [];
          candidates.set(p, list);
        }
        list.push(n.id);
      }
    }
    const changed = new Set<number>();
    for (const [p, id] of this.primary) {
      const list = candidates.get(p);
      if (list?.includes(id)) continue;
      this.primary.delete(p);
      changed.add(id);
    }
    for (const [p, list] of candidates) {
      if (this.primary.has(p)) continue;
      const id = Math.min(...list);
      this.primary.set(p, id);
      changed.add(id);
    }
    return changed;
  }
}
