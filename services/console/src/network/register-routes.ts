// Device approval (the interactive `tailscale up` flow).
//   GET  /console/register/:authId           the device and the decision (not signed in: sign-in, then back here)
//   POST /console/register/:authId/approve   user | newUser, [from=machines]   -> 303 back here (or to Machines)
//   POST /console/register/:authId/reject    [from=machines]                   -> 303 back here (or to Machines)
// The client's own follow-up request is held by the coordination service until the decision, so approving here is
// what lets the device's `tailscale up` finish.
import { type ConsoleContext, type ConsoleRouter, viewerOf } from '../request/context.ts';
import { AdminError } from '../../../../shared/admin-client.ts';
import type { PendingAuth } from '../../../../shared/model.ts';
import { takeFlash } from '../request/flash.ts';
import { field } from '../request/form-body.ts';
import { formRoute } from '../request/form-route.ts';
import { registerPage, registerUnknownPage } from '../views/register-page.ts';
import { actorOf } from './actor.ts';
import type { NetworkDeps } from './deps.ts';
import { chosenUser } from './user-choice.ts';

const AUTH_ID_RE = /^[A-Za-z0-9_-]{1,64}$/;

export function registerRoutes(router: ConsoleRouter, d: NetworkDeps): void {
  /** The pending request, or null when unknown or expired. */
  const pendingOf = async (ctx: ConsoleContext, authId: string): Promise<PendingAuth | null> => {
    if (!AUTH_ID_RE.test(authId)) return null;
    try {
      return await d.admin.getPending(actorOf(ctx), authId);
    } catch (e) {
      if (e instanceof AdminError && e.status === 404) return null;
      throw e;
    }
  };

  const show = async (ctx: ConsoleContext, authId: string, error: string | null = null): Promise<string> => {
    const viewer = viewerOf(ctx);
    const pending = await pendingOf(ctx, authId);
    if (!pending) {
      ctx.status = 404;
      return registerUnknownPage(viewer, d.cfg.publicOrigin);
    }
    const who = actorOf(ctx);
    const users = await d.admin.listUsers(who);
    const node = pending.status === 'approved' && pending.nodeId !== undefined ? await d.admin.getNode(who, pending.nodeId).catch(() => null) : null;
    return registerPage({ viewer, pending, users, node, flash: error ? null : takeFlash(ctx), error });
  };

  router.get('/console/register/:authId', d.gate, async (ctx) => {
    ctx.type = 'html';
    ctx.body = await show(ctx, ctx.params.authId);
  });

  const back = (form: URLSearchParams, authId: string) => (field(form, 'from') === 'machines' ? '/console/machines' : `/console/register/${authId}`);

  const unknown = () => new AdminError(404, 'this login request is unknown or expired; run tailscale up again on the device');

  formRoute(router, '/console/register/:authId/approve', d, {
    role: 'admin',
    run: async (ctx, form) => {
      const authId = ctx.params.authId;
      if (!AUTH_ID_RE.test(authId)) throw unknown();
      const user = await chosenUser(d.admin, actorOf(ctx), form);
      const n = await d.admin.approve(actorOf(ctx), authId, user.ref);
      return {
        text: `Approved: ${n.givenName} joined for user ${n.user}${user.created ? ' (new user)' : ''} with address ${n.ipv4}.`,
        to: back(form, authId),
      };
    },
    refused: (ctx, message) => show(ctx, ctx.params.authId, message),
  });

  formRoute(router, '/console/register/:authId/reject', d, {
    role: 'admin',
    run: async (ctx, form) => {
      const authId = ctx.params.authId;
      if (!AUTH_ID_RE.test(authId)) throw unknown();
      const p = await d.admin.reject(actorOf(ctx), authId);
      return { text: `Rejected the login of ${p.hostname || 'the device'}.`, to: back(form, authId) };
    },
    refused: (ctx, message) => show(ctx, ctx.params.authId, message),
  });
}
