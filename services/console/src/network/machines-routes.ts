// Machines.
//   GET  /console/machines                 list (filters: machine-filter.ts), devices waiting for approval first
//   GET  /console/machines/:id             one machine
//   POST /console/machines/:id/rename      name            -> 303 to the machine | 400/409 page with the reason
//   POST /console/machines/:id/move        user            -> 303 to the machine
//   POST /console/machines/:id/key-expiry  disabled (1|0)  -> 303 to the machine
//   POST /console/machines/:id/expire                      -> 303 to the machine
//   POST /console/machines/:id/delete                      -> 303 to the list
// Changes need an administrator (auth/role.ts); the admin API writes their activity entries.
import { type ConsoleContext, type ConsoleRouteContext, type ConsoleRouter, viewerOf } from '../request/context.ts';
import { AdminError } from '../../../../shared/admin-client.ts';
import type { NodeView } from '../../../../shared/model.ts';
import { PageError } from '../errors.ts';
import { takeFlash } from '../request/flash.ts';
import { field } from '../request/form-body.ts';
import { FormProblem, formRoute, type Outcome } from '../request/form-route.ts';
import { machinePage } from '../views/machine-page.ts';
import { machinesPage } from '../views/machines-page.ts';
import { actorOf } from './actor.ts';
import type { NetworkDeps } from './deps.ts';
import { readMachineFilter } from './machine-filter.ts';
import { loadMachines } from './machines-data.ts';

export function machineId(text: string | undefined): number {
  if (!text || !/^\d{1,12}$/.test(text))
    throw new PageError(404, 'Machine not found', `There is no machine "${text ?? ''}". It may have been deleted; see the list of machines.`);
  return Number(text);
}

export function machinesRoutes(router: ConsoleRouter, d: NetworkDeps): void {
  router.get('/console/machines', d.gate, async (ctx) => {
    const filter = readMachineFilter(ctx.query);
    const data = await loadMachines(d.admin, actorOf(ctx), filter);
    ctx.type = 'html';
    ctx.body = machinesPage({ ...data, viewer: viewerOf(ctx), filter, publicOrigin: d.cfg.publicOrigin, flash: takeFlash(ctx) });
  });

  const showMachine = async (ctx: ConsoleContext, id: number, error: string | null = null): Promise<string> => {
    const who = actorOf(ctx);
    let node: NodeView;
    try {
      node = await d.admin.getNode(who, id);
    } catch (e) {
      if (e instanceof AdminError && e.status === 404)
        throw new PageError(404, 'Machine not found', `There is no machine with id ${id}. It may have been deleted; see the list of machines.`);
      throw e;
    }
    const users = await d.admin.listUsers(who);
    return machinePage({ viewer: viewerOf(ctx), node, users, baseDomain: d.cfg.baseDomain, flash: error ? null : takeFlash(ctx), error });
  };

  router.get('/console/machines/:id', d.gate, async (ctx) => {
    const id = machineId(ctx.params.id);
    ctx.type = 'html';
    ctx.body = await showMachine(ctx, id);
  });

  const form = (path: string, run: (ctx: ConsoleRouteContext, id: number, form: URLSearchParams) => Promise<Outcome>) =>
    formRoute(router, `/console/machines/:id/${path}`, d, {
      role: 'admin',
      run: (ctx, f) => run(ctx, machineId(ctx.params.id), f),
      refused: (ctx, message) => showMachine(ctx, machineId(ctx.params.id), message),
    });

  form('rename', async (ctx, id, f) => {
    const name = field(f, 'name').trim();
    if (name === '') throw new FormProblem('Type the new name.');
    const n = await d.admin.renameNode(actorOf(ctx), id, name);
    return { text: `Renamed. Clients now reach it as ${n.fqdn}.`, to: `/console/machines/${id}` };
  });

  form('move', async (ctx, id, f) => {
    const user = field(f, 'user').trim();
    if (user === '') throw new FormProblem('Choose the user to move the machine to.');
    const n = await d.admin.moveNode(actorOf(ctx), id, user);
    return { text: `Moved to ${n.user}.`, to: `/console/machines/${id}` };
  });

  form('key-expiry', async (ctx, id, f) => {
    const value = field(f, 'disabled');
    if (value !== '1' && value !== '0') throw new FormProblem('Choose whether to disable or enable key expiry.');
    const n = await d.admin.setKeyExpiryDisabled(actorOf(ctx), id, value === '1');
    return {
      text: n.keyExpiryDisabled
        ? `Key expiry disabled: the key of ${n.givenName} no longer expires.`
        : `Key expiry enabled: the key of ${n.givenName} ${n.expiry ? `expires ${n.expiry.slice(0, 10)}` : 'follows the tailnet default (never)'}.`,
      to: `/console/machines/${id}`,
    };
  });

  form('expire', async (ctx, id) => {
    const n = await d.admin.expireNode(actorOf(ctx), id);
    return { text: `The key of ${n.givenName} has expired; it must run tailscale up again to reconnect.`, to: `/console/machines/${id}` };
  });

  form('delete', async (ctx, id) => {
    const n = await d.admin.deleteNode(actorOf(ctx), id);
    return { text: `Deleted ${n.givenName}; its addresses ${n.ipv4} and ${n.ipv6} are free again.`, to: '/console/machines' };
  });
}
