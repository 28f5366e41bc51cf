// Machines.
//   GET  /console/machines                 list (filters: machine-filter.ts), devices waiting for approval first
//   GET  /console/machines/:id             one machine
//   POST /console/machines/:id/rename      name            -> 303 to the machine | 400/409 page with the reason
//   POST /console/machines/:id/move        user            -> 303 to the machine
//   POST /console/machines/:id/key-expiry  disabled (1|0)  -> 303 to the machine
//   POST /console/machines/:id/tags        tag (repeated; none = no tags)  -> 303 to the machine | 400 (a tag the
//                                                           policy's tagOwners does not define) page with the reason
//   POST /console/machines/:id/expire                      -> 303 to the machine
//   POST /console/machines/:id/delete                      -> 303 to the list
// (The machine's routes are approved under POST /console/machines/:id/routes, in routes-routes.ts.)
// Changes need an administrator (auth/role.ts); the admin API writes their activity entries.
import { type ConsoleContext, type ConsoleRouteContext, type ConsoleRouter, viewerOf } from '../request/context.ts';
import { PageError } from '../errors.ts';
import { takeFlash } from '../request/flash.ts';
import { field } from '../request/form-body.ts';
import { FormProblem, formRoute, type Outcome } from '../request/form-route.ts';
import { machinePage } from '../views/machine-page.ts';
import { machinesPage } from '../views/machines-page.ts';
import { actorOf } from './actor.ts';
import type { NetworkDeps } from './deps.ts';
import { readMachineFilter } from './machine-filter.ts';
import { loadMachine, loadMachines } from './machines-data.ts';

export function machineId(text: string | undefined): number {
  if (!text || !/^\d{1,12}$/.test(text))
    throw new PageError(404, 'Machine not found', `There is no machine "${text ?? ''}". It may have been deleted; see the list of machines.`);
  return Number(text);
}

/** The machine page (with a refusal's message when `error` is set); a 404 page when there is no such machine. */
export async function showMachine(ctx: ConsoleContext, d: NetworkDeps, id: number, error: string | null = null): Promise<string> {
  const who = actorOf(ctx);
  const [m, users, policy] = await Promise.all([loadMachine(d.admin, who, id), d.admin.listUsers(who), d.admin.getPolicy(who)]);
  if (!m.node) throw new PageError(404, 'Machine not found', `There is no machine with id ${id}. It may have been deleted; see the list of machines.`);
  return machinePage({
    viewer: viewerOf(ctx),
    ...m,
    node: m.node,
    users,
    definedTags: policy.tags,
    baseDomain: d.cfg.baseDomain,
    flash: error ? null : takeFlash(ctx),
    error,
  });
}

/**
 * The identity provider devices join through, when approving them by hand is off (HSE_OIDC_OPERATOR_APPROVAL): the
 * Machines list then shows waiting devices without Approve buttons and says how they join.
 */
export function signInProvider(cfg: NetworkDeps['cfg']): string | null {
  return cfg.oidc && !cfg.oidc.operatorApproval ? cfg.oidc.displayName : null;
}

export function machinesRoutes(router: ConsoleRouter, d: NetworkDeps): void {
  router.get('/console/machines', d.gate, async (ctx) => {
    const filter = readMachineFilter(ctx.query);
    const data = await loadMachines(d.admin, actorOf(ctx), filter);
    ctx.type = 'html';
    ctx.body = machinesPage({
      ...data,
      viewer: viewerOf(ctx),
      filter,
      publicOrigin: d.cfg.publicOrigin,
      signInProvider: signInProvider(d.cfg),
      flash: takeFlash(ctx),
    });
  });

  router.get('/console/machines/:id', d.gate, async (ctx) => {
    const id = machineId(ctx.params.id);
    ctx.type = 'html';
    ctx.body = await showMachine(ctx, d, id);
  });

  const form = (path: string, run: (ctx: ConsoleRouteContext, id: number, form: URLSearchParams) => Promise<Outcome>) =>
    formRoute(router, `/console/machines/:id/${path}`, d, {
      role: 'admin',
      run: (ctx, f) => run(ctx, machineId(ctx.params.id), f),
      refused: (ctx, message) => showMachine(ctx, d, machineId(ctx.params.id), message),
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

  form('tags', async (ctx, id, f) => {
    const n = await d.admin.tagNode(actorOf(ctx), id, f.getAll('tag'));
    return {
      text: n.tags.length
        ? `Tagged ${n.givenName} ${n.tags.join(', ')}: it is owned by its tags now, and the policy's rules for them apply within a second.`
        : `Removed the tags of ${n.givenName}: it belongs to ${n.user} again.`,
      to: `/console/machines/${id}`,
    };
  });

  form('delete', async (ctx, id) => {
    const n = await d.admin.deleteNode(actorOf(ctx), id);
    return { text: `Deleted ${n.givenName}; its addresses ${n.ipv4} and ${n.ipv6} are free again.`, to: '/console/machines' };
  });
}
