// "No policy": Tailscale's default — every node reaches every node on every port, sees every other node, and may use
// every approved route and exit node (tailcfg.FilterAllowAll). Without a policy nothing defines tag owners,
// auto-approvers or SSH rules, so no tag can be taken, nothing is approved automatically and no node runs Tailscale
// SSH; Taildrop between a user's own devices stays on.
import type { FilterRule, NodeCapMap, SSHPolicy } from '../tailcfg/tailcfg.ts';
import { CAP_FILE_SHARING } from './caps.ts';
import type { CompiledPolicy, Reacher, ViewDigest } from './compiled-policy.ts';
import type { CompileOptions } from './compile.ts';
import { hash } from './compile.ts';
import { formatInterval } from './ip.ts';
import type { TailnetIndex } from './tailnet-index.ts';

export const FILTER_ALLOW_ALL: readonly FilterRule[] = Object.freeze([
  Object.freeze({
    SrcIPs: Object.freeze(['*']) as string[],
    DstPorts: Object.freeze([{ IP: '*', Ports: { First: 0, Last: 65535 } }]) as FilterRule['DstPorts'],
  }),
]);

export class AllowAll implements CompiledPolicy {
  readonly allowAll = true;
  readonly nodeIds: readonly number[];
  private readonly caps: NodeCapMap;
  private readonly peersHash: string;
  private readonly routeEntries: { id: number; text: string }[];
  private readonly routesHash: string;
  private readonly tn: TailnetIndex;

  constructor(tn: TailnetIndex, opts: CompileOptions = {}) {
    this.tn = tn;
    this.nodeIds = tn.nodes.map((n) => n.id);
    const caps: NodeCapMap = {};
    if (opts.taildrop !== false) caps[CAP_FILE_SHARING] = null;
    this.caps = Object.freeze(caps);
    this.peersHash = hash(this.nodeIds.join(','));
    this.routeEntries = tn.nodes.filter((n) => n.approvedRoutes.length > 0).map((n) => ({ id: n.id, text: `${n.id}:${n.approvedRoutes.join(',')}` }));
    this.routesHash = hash(this.routeEntries.map((e) => e.text).join(';'));
  }

  private idx(nodeId: number): number {
    const i = this.tn.indexOf.get(nodeId);
    if (i === undefined) throw new Error(`node ${nodeId} is not in the compiled snapshot`);
    return i;
  }

  filterFor(nodeId: number): FilterRule[] {
    this.idx(nodeId);
    return FILTER_ALLOW_ALL as FilterRule[];
  }

  peersOf(nodeId: number): number[] {
    this.idx(nodeId);
    return this.nodeIds.filter((id) => id !== nodeId);
  }

  isPeer(a: number, b: number): boolean {
    this.idx(a);
    this.idx(b);
    return a !== b;
  }

  /** Every approved route, except (as with a policy) a prefix the viewer serves itself, or another exit node's. */
  routesFor(viewerId: number, routerId: number): string[] {
    const v = this.idx(viewerId);
    const x = this.idx(routerId);
    if (v === x) return [];
    const tn = this.tn;
    const own = new Set(tn.subnetRoutes[v].map(formatInterval));
    const exitOk = tn.exitRoutes[v].length === 0;
    return tn.nodes[x].approvedRoutes.filter((r) => {
      if (tn.exitRoutes[x].includes(r)) return exitOk;
      const k = tn.subnetRouteText[x].indexOf(r);
      return k >= 0 && !own.has(formatInterval(tn.subnetRoutes[x][k]));
    });
  }

  sshPolicyFor(nodeId: number): SSHPolicy | null {
    this.idx(nodeId);
    return null;
  }

  needsSSHCapability(nodeId: number): boolean {
    this.idx(nodeId);
    return false;
  }

  capMapFor(nodeId: number): NodeCapMap {
    this.idx(nodeId);
    return this.caps;
  }

  autoApprover(nodeId: number): string | null {
    this.idx(nodeId);
    return null;
  }

  reachersOf(nodeId: number): Reacher[] {
    this.idx(nodeId);
    const text = 'every device → every port (no policy: everything is allowed)';
    return [{ who: 'every device', what: 'every port (no policy: everything is allowed)', origin: 'no policy', line: 0, text }];
  }

  mayReach(srcId: number, dstId: number): boolean {
    this.idx(srcId);
    this.idx(dstId);
    return true;
  }

  definedTags(): string[] {
    return [];
  }

  mayOwnTag(): boolean {
    return false;
  }

  tagsMayOwnTag(): boolean {
    return false;
  }

  viewDigest(nodeId: number): ViewDigest {
    const i = this.idx(nodeId);
    const filter = hash('allow-all');
    const peers = hash(`${this.peersHash}|${nodeId}`);
    // A router does not use its own routes: its view leaves them out.
    const routes =
      this.tn.nodes[i].approvedRoutes.length === 0
        ? this.routesHash
        : hash(
            this.routeEntries
              .filter((e) => e.id !== nodeId)
              .map((e) => e.text)
              .join(';'),
          );
    const ssh = hash('null');
    const caps = hash(JSON.stringify(Object.entries(this.caps).sort()));
    return { filter, peers, routes, ssh, caps, all: hash(`${filter}${peers}${routes}${ssh}${caps}`) };
  }

  digestOf(nodeId: number): string {
    return this.viewDigest(nodeId).all;
  }
}
