// Auto-approval of advertised routes by the policy's autoApprovers: when a machine advertises a route (at
// registration, or later with `tailscale set --advertise-routes`) and a rule names it (or one of its tags or groups)
// for that prefix — or, for 0.0.0.0/0 + ::/0, for exitNode — the route is approved at once, and the activity log says
// it was automatic and by which rule. A policy change that adds a rule approves routes already waiting.
//
// Done by the instance holding the machine's map stream, so it happens once whatever the number of instances.
// Unapproving is never automatic: a rule that goes away leaves approved routes as they are (an operator decides).
import type { ActivityLog } from '../../../../shared/activity.ts';
import type { Logger } from '../../../../shared/log.ts';
import type { NodeRecord } from '../../../../shared/model.ts';
import type { LivePolicy } from '../map/live-policy.ts';
import { advertisedRoutes, canonicalPrefix, EXIT_ROUTES, isExitPrefix } from '../map/routes.ts';
import type { Store } from '../state/store.ts';
import type { Tailnet } from '../state/tailnet.ts';

export interface RouteApprovalDeps {
  tailnet: Tailnet;
  store: Store;
  policy: LivePolicy;
  activity: ActivityLog;
  log: Logger;
  /** Whether this instance holds the machine's map stream. */
  servesHere: (nodeId: number) => boolean;
}

export class RouteApprovals {
  private readonly d: RouteApprovalDeps;
  private readonly busy = new Set<number>();
  /** Per node, the unapproved routes last noted in the activity log (so each change is noted once). */
  private readonly noted = new Map<number, string>();

  constructor(d: RouteApprovalDeps) {
    this.d = d;
  }

  start(): void {
    this.d.tailnet.on('node', (n) => this.consider(n));
    this.d.tailnet.on('online', (n, online) => {
      if (online) this.consider(n);
    });
    this.d.policy.on('compiled', () => {
      for (const n of this.d.tailnet.nodes.values()) this.consider(n);
    });
  }

  /** Prefixes the node advertises but has not got approved, the exit pair counted as one. */
  private waiting(n: NodeRecord): string[][] {
    const approved = new Set(n.approvedRoutes.map((p) => canonicalPrefix(p) ?? p));
    const advertised = advertisedRoutes(n);
    const out: string[][] = advertised.filter((p) => !isExitPrefix(p) && !approved.has(p)).map((p) => [p]);
    if (EXIT_ROUTES.every((p) => advertised.includes(p)) && !EXIT_ROUTES.every((p) => approved.has(p))) out.push([...EXIT_ROUTES]);
    return out;
  }

  private consider(n: NodeRecord): void {
    if (this.busy.has(n.id) || !this.d.servesHere(n.id) || !this.d.policy.knows(n.id)) return;
    const policy = this.d.policy.policy;
    const approvals: { prefixes: string[]; rule: string }[] = [];
    const unapproved: string[] = [];
    for (const prefixes of this.waiting(n)) {
      const rule = policy.autoApprover(n.id, prefixes[0]);
      if (rule) approvals.push({ prefixes, rule });
      else unapproved.push(prefixes.length === 2 ? 'exit' : prefixes[0]);
    }
    this.noteWaiting(n, unapproved);
    if (approvals.length === 0) return;
    this.busy.add(n.id);
    void this.approve(n, approvals).finally(() => this.busy.delete(n.id));
  }

  /**
   * Routes the node advertises that no rule approves: in the activity log as route.needs_approval (and so to webhooks
   * as routesNeedApproval) once per change of that set, by the instance serving the node.
   */
  private noteWaiting(n: NodeRecord, routes: string[]): void {
    const key = routes.join(',');
    if ((this.noted.get(n.id) ?? '') === key) return;
    this.noted.set(n.id, key);
    if (routes.length === 0) return;
    this.d.activity
      .record({
        action: 'route.needs_approval',
        actor: `device:${n.hostname}`,
        ip: '',
        target: n.givenName,
        details: { routes, nodeId: n.stableId, machineId: n.id },
      })
      .catch((e: Error) => this.d.log.warn('could not write activity entry', { action: 'route.needs_approval', error: e.message }));
  }

  private async approve(n: NodeRecord, approvals: { prefixes: string[]; rule: string }[]): Promise<void> {
    try {
      await this.d.store.updateNode(
        n.id,
        (x) => {
          const set = new Set(x.approvedRoutes);
          for (const a of approvals) for (const p of a.prefixes) set.add(p);
          const next = [...set].sort();
          return next.join() === x.approvedRoutes.join() ? null : { ...x, approvedRoutes: next };
        },
        true,
      );
      for (const a of approvals) {
        const route = a.prefixes.length === 2 ? 'exit' : a.prefixes[0];
        this.d.log.info('route approved automatically', { node: n.givenName, route, rule: a.rule });
        await this.d.activity.record({
          action: 'route.approve',
          actor: 'system',
          ip: '',
          target: n.givenName,
          details: { routes: [route], automatic: true, rule: a.rule },
        });
      }
    } catch (e) {
      this.d.log.warn('could not approve routes automatically; the next change retries', { node: n.givenName, error: (e as Error).message });
    }
  }
}
