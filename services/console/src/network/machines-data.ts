// Reads what the Machines views show, through the admin API, in one round of parallel calls each.
import { type Actor, AdminError, type AdminClient, type Reacher, type RouteView } from '../../../../shared/admin-client.ts';
import type { NodeView } from '../../../../shared/model.ts';
import type { MachinesData } from '../views/machines-page.ts';
import { applyMachineFilter, type MachineFilter, sortMachines } from './machine-filter.ts';

export async function loadMachines(admin: AdminClient, who: Actor, filter: MachineFilter): Promise<MachinesData> {
  const [nodes, pending, users, routes] = await Promise.all([admin.listNodes(who), admin.listPending(who), admin.listUsers(who), admin.listRoutes(who)]);
  const byNode = new Map<number, RouteView[]>();
  for (const r of routes) byNode.set(r.nodeId, [...(byNode.get(r.nodeId) ?? []), r]);
  const sorted = sortMachines(nodes);
  return {
    nodes: sorted,
    shown: applyMachineFilter(sorted, filter, byNode),
    // Oldest first: the device that has waited longest is at the top.
    pending: [...pending].sort((a, b) => a.created.localeCompare(b.created)),
    users,
    routes: byNode,
  };
}

/** 404 from the admin API as null (the machine was deleted, or the policy has not taken it in yet). */
async function orNull<T>(p: Promise<T>): Promise<T | null> {
  try {
    return await p;
  } catch (e) {
    if (e instanceof AdminError && e.status === 404) return null;
    throw e;
  }
}

/** One machine, its routes and who may reach it; node null when there is no such machine. */
export async function loadMachine(
  admin: AdminClient,
  who: Actor,
  id: number,
): Promise<{ node: NodeView | null; routes: RouteView[]; reachers: Reacher[] | null }> {
  const [node, routes, access] = await Promise.all([orNull(admin.getNode(who, id)), orNull(admin.nodeRoutes(who, id)), orNull(admin.nodeAccess(who, id))]);
  return { node, routes: routes ?? [], reachers: access?.reachers ?? null };
}
