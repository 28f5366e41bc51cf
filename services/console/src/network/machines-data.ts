// Reads what the Machines views show, through the admin API, in one round of parallel calls.
import type { Actor, AdminClient } from '../../../../shared/admin-client.ts';
import type { MachinesData } from '../views/machines-page.ts';
import { applyMachineFilter, sortMachines, type MachineFilter } from './machine-filter.ts';

export async function loadMachines(admin: AdminClient, who: Actor, filter: MachineFilter): Promise<MachinesData> {
  const [nodes, pending, users] = await Promise.all([admin.listNodes(who), admin.listPending(who), admin.listUsers(who)]);
  const sorted = sortMachines(nodes);
  return {
    nodes: sorted,
    shown: applyMachineFilter(sorted, filter),
    // Oldest first: the device that has waited longest is at the top.
    pending: [...pending].sort((a, b) => a.created.localeCompare(b.created)),
    users,
  };
}
