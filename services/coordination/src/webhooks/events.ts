// Webhook events from activity-log entries. Every change to the tailnet is written to the activity log exactly once,
// by whichever process made it (a client registering, the console, the CLI, the remote API, a timer), so reading the
// log in order is how events are found once, from every source, without hooking each of them.
//
// The payload is Tailscale's (docs/webhooks/example.go in tailscale/tailscale): a JSON array of events, each
//   {"timestamp": RFC 3339, "version": 1, "type": "nodeCreated", "tailnet": "<name>", "message": "...",
//    "data": {"nodeID": "...", "deviceName": "...", "managedBy": "...", "actor": "...", "url": "..."}}
// with every data value a string (Tailscale's consumers decode data as map[string]string).
//
//   activity action                        event
//   node.register                          nodeCreated (the first time for the machine: worker.ts)
//   node.approve                           nodeCreated (likewise) and nodeApproved
//   node.login_pending                     nodeNeedsApproval
//   node.delete, node.logout (removed)     nodeDeleted
//   route.needs_approval                   routesNeedApproval (hse's own: advertised routes no rule approves)
//   policy.change, policy.reload           policyUpdate
//   user.create / user.delete              userCreated / userDeleted
// nodeKeyExpiringInOneDay and nodeKeyExpired come from a timer (worker.ts), not from the log.
import type { ActivityEntry } from '../../../../shared/activity.ts';
import type { WebhookEventType } from '../../../../shared/model.ts';

export interface WebhookEvent {
  timestamp: string;
  version: 1;
  type: WebhookEventType | 'test';
  tailnet: string;
  message: string;
  data: Record<string, string>;
}

export interface EventContext {
  /** The tailnet's name in events: its MagicDNS domain (HSE_BASE_DOMAIN). */
  tailnet: string;
  publicOrigin: string;
  baseDomain: string;
}

const s = (v: unknown): string => (v === undefined || v === null ? '' : Array.isArray(v) ? v.join(',') : String(v));

export function event(
  ctx: EventContext,
  type: WebhookEvent['type'],
  message: string,
  data: Record<string, string>,
  time = new Date().toISOString(),
): WebhookEvent {
  return { timestamp: time, version: 1, type, tailnet: ctx.tailnet, message, data };
}

/** The events one activity entry stands for (most stand for none). */
export function eventsOf(ctx: EventContext, e: ActivityEntry): WebhookEvent[] {
  const d = e.details;
  const device = (name = e.target) => ({
    nodeID: s(d.nodeId),
    deviceName: name ? `${name}.${ctx.baseDomain}` : '',
    managedBy: s(d.managedBy),
    actor: e.actor,
    url: d.machineId ? `${ctx.publicOrigin}/console/machines/${s(d.machineId)}` : `${ctx.publicOrigin}/console/machines`,
  });
  const ev = (type: WebhookEvent['type'], message: string, data: Record<string, string>) => event(ctx, type, message, data, e.time);
  switch (e.action) {
    case 'node.register':
      return [ev('nodeCreated', `Node ${e.target} created`, device())];
    case 'node.approve':
      return [ev('nodeCreated', `Node ${e.target} created`, device()), ev('nodeApproved', `Node ${e.target} approved`, device())];
    case 'node.login_pending':
      return [
        ev('nodeNeedsApproval', `Node ${e.target} needs approval`, {
          nodeID: '',
          deviceName: e.target,
          managedBy: '',
          actor: e.actor,
          url: s(d.url) || `${ctx.publicOrigin}/console/machines`,
        }),
      ];
    case 'node.delete':
      return [ev('nodeDeleted', `Node ${e.target} deleted`, device())];
    case 'node.logout':
      return d.removed === true ? [ev('nodeDeleted', `Node ${e.target} deleted`, device())] : [];
    case 'route.needs_approval':
      return [ev('routesNeedApproval', `Node ${e.target} advertises routes that need approval: ${s(d.routes)}`, { ...device(), routes: s(d.routes) })];
    case 'policy.change':
    case 'policy.reload':
      return [ev('policyUpdate', 'Tailnet policy file updated', { actor: e.actor, version: s(d.version), url: `${ctx.publicOrigin}/console` })];
    case 'user.create':
      return [ev('userCreated', `User ${e.target} created`, { user: e.target, actor: e.actor, url: `${ctx.publicOrigin}/console/users` })];
    case 'user.delete':
      return [ev('userDeleted', `User ${e.target} deleted`, { user: e.target, actor: e.actor, url: `${ctx.publicOrigin}/console/users` })];
    default:
      return [];
  }
}
