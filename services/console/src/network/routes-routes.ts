// Subnet routes and exit nodes.
//   GET  /console/routes                     every advertised or approved route with its state (live: machines-stream.ts)
//   POST /console/machines/:id/routes        prefix (repeated; a CIDR or "exit"), action = approve | unapprove,
//                                            from = machine | routes  -> 303 back there | 400/404 page with the reason
// Approving needs an administrator (auth/role.ts); the admin API writes the activity entry ("route.approve").
import { PageError } from '../errors.ts';
import { type ConsoleContext, type ConsoleRouter, viewerOf } from '../request/context.ts';
import { takeFlash } from '../request/flash.ts';
import { field } from '../request/form-body.ts';
import { FormProblem, formRoute } from '../request/form-route.ts';
import { routesPage } from '../views/routes-page.ts';
import { actorOf } from './actor.ts';
import type { NetworkDeps } from './deps.ts';
import { machineId, showMachine } from './machines-routes.ts';

export function routesRoutes(router: ConsoleRouter, d: NetworkDeps): void {
  const showRoutes = async (ctx: ConsoleContext, error: string | null = null): Promise<string> => {
    const routes = await d.admin.listRoutes(actorOf(ctx));
    return routesPage({ viewer: viewerOf(ctx), routes, flash: error ? null : takeFlash(ctx), error });
  };

  router.get('/console/routes', d.gate, async (ctx) => {
    ctx.type = 'html';
    ctx.body = await showRoutes(ctx);
  });

  const back = (form: URLSearchParams, id: number) => (field(form, 'from') === 'routes' ? '/console/routes' : `/console/machines/${id}`);

  formRoute(router, '/console/machines/:id/routes', d, {
    role: 'admin',
    run: async (ctx, form) => {
      const id = machineId(ctx.params.id);
      const action = field(form, 'action');
      if (action !== 'approve' && action !== 'unapprove') throw new PageError(400, 'Bad form', 'The form must say approve or unapprove.');
      const prefixes = form.getAll('prefix').filter((p) => p.trim() !== '');
      if (prefixes.length === 0) throw new FormProblem('Choose the routes to approve or unapprove.');
      const after = await d.admin.setRoutesApproved(actorOf(ctx), id, prefixes, action === 'approve');
      const node = after[0]?.node ?? `machine ${id}`;
      const named = prefixes.map((p) => (p === 'exit' ? 'the exit node' : p)).join(', ');
      return {
        text:
          action === 'approve'
            ? `Approved ${named} of ${node}. Devices the policy lets use ${prefixes.length === 1 ? 'it' : 'them'} get ${prefixes.length === 1 ? 'it' : 'them'} within a second.`
            : `Unapproved ${named} of ${node}; devices stop using ${prefixes.length === 1 ? 'it' : 'them'} within a second.`,
        to: back(form, id),
      };
    },
    refused: (ctx, message, form) => (field(form, 'from') === 'routes' ? showRoutes(ctx, message) : showMachine(ctx, d, machineId(ctx.params.id), message)),
  });
}
