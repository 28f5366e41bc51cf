// The Machines list's search and filters, read from the query string (so a filtered view is a link, and the live
// stream gets the same filter): q = words in name, host name, address, owner, tags or OS; owner = user name;
// status = online | offline; expiry = soon (within 7 days) | expired; routes = pending (advertised routes waiting for
// approval) | serving (a subnet router or exit node in use).
import type { RouteView } from '../../../../shared/admin-client.ts';
import type { NodeView } from '../../../../shared/model.ts';
import { expiryState, osLabel } from '../views/format.ts';

export interface MachineFilter {
  q: string;
  owner: string;
  status: '' | 'online' | 'offline';
  expiry: '' | 'soon' | 'expired';
  routes: '' | 'pending' | 'serving';
}

type Query = Record<string, string | string[] | undefined>;

function one(q: Query, k: string): string {
  const v = q[k];
  return (typeof v === 'string' ? v : '').trim().slice(0, 200);
}

export function readMachineFilter(q: Query): MachineFilter {
  const status = one(q, 'status');
  const expiry = one(q, 'expiry');
  const routes = one(q, 'routes');
  return {
    q: one(q, 'q'),
    owner: one(q, 'owner').toLowerCase(),
    status: status === 'online' || status === 'offline' ? status : '',
    expiry: expiry === 'soon' || expiry === 'expired' ? expiry : '',
    routes: routes === 'pending' || routes === 'serving' ? routes : '',
  };
}

export function isFiltered(f: MachineFilter): boolean {
  return f.q !== '' || f.owner !== '' || f.status !== '' || f.expiry !== '' || f.routes !== '';
}

export function machineFilterParams(f: MachineFilter): URLSearchParams {
  const p = new URLSearchParams();
  for (const k of ['q', 'owner', 'status', 'expiry', 'routes'] as const) if (f[k]) p.set(k, f[k]);
  return p;
}

/** `routes`: each machine's routes (GET /v1/routes by node id); a machine without any is absent. */
export function applyMachineFilter(nodes: NodeView[], f: MachineFilter, routes: ReadonlyMap<number, RouteView[]>, now = Date.now()): NodeView[] {
  const words = f.q.toLowerCase().split(/\s+/).filter(Boolean);
  return nodes.filter((n) => {
    if (f.owner && n.user !== f.owner) return false;
    if (f.status === 'online' && !n.online) return false;
    if (f.status === 'offline' && n.online) return false;
    if (f.expiry) {
      const e = expiryState(n.expiry, now);
      if (f.expiry === 'expired' && e !== 'expired') return false;
      if (f.expiry === 'soon' && e !== 'soon') return false;
    }
    if (f.routes) {
      const mine = routes.get(n.id) ?? [];
      if (f.routes === 'pending' && !mine.some((r) => r.advertised && !r.approved)) return false;
      if (f.routes === 'serving' && !mine.some((r) => r.advertised && r.approved)) return false;
    }
    if (words.length) {
      const hay = [n.givenName, n.hostname, n.fqdn, n.ipv4, n.ipv6, n.user, ...n.tags, osLabel(n.hostinfo)].join(' ').toLowerCase();
      if (!words.every((w) => hay.includes(w))) return false;
    }
    return true;
  });
}

/** Name order, the way people look for a machine. */
export function sortMachines(nodes: NodeView[]): NodeView[] {
  return [...nodes].sort((a, b) => a.givenName.localeCompare(b.givenName) || a.id - b.id);
}
