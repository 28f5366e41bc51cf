// What the map layer, the console and the CLI ask a compiled policy. Node ids are the snapshot's ids. Arrays and
// objects returned are shared between nodes with the same view and must not be modified by the caller.
import type { Reacher } from '../../../../shared/model.ts';
import type { FilterRule, NodeCapMap, SSHPolicy } from '../tailcfg/tailcfg.ts';

export type { Reacher };

/**
 * Digests of the parts of one node's view: short strings, equal exactly when that part of the node's view is equal,
 * across compilations (built from hashes of the shared pieces and the node's own addresses and ids).
 */
export interface ViewDigest {
  filter: string;
  peers: string;
  /** The routes this node may use through each of its peers. */
  routes: string;
  ssh: string;
  caps: string;
  /** All of the above in one. */
  all: string;
}

export interface CompiledPolicy {
  /** True for "no policy": every node reaches every node on every port (Tailscale's default). */
  readonly allowAll: boolean;
  /** Node ids the snapshot had, ascending. */
  readonly nodeIds: readonly number[];

  /** The PacketFilter for the node: exactly the rules admitting traffic to it (and to the routes it serves). */
  filterFor(nodeId: number): FilterRule[];
  /** The nodes it may reach or that may reach it, and routers whose routes it may use; ascending ids. */
  peersOf(nodeId: number): number[];
  isPeer(a: number, b: number): boolean;
  /** Which of the router's approved routes the viewer may use (exit routes only with internet access). */
  routesFor(viewerId: number, routerId: number): string[];
  /**
   * The node's SSH policy, or null when no ssh rule targets it. A map that sent a policy earlier clears it with
   * {rules: []}: leaving SSHPolicy out of a delta means "unchanged" to the client.
   */
  sshPolicyFor(nodeId: number): SSHPolicy | null;
  /** Does an ssh rule target the node (so it needs the SSH capability for `tailscale set --ssh` to succeed)? */
  needsSSHCapability(nodeId: number): boolean;
  /** The node's CapMap: nodeAttrs, Taildrop, and the SSH capability when an ssh rule targets it. */
  capMapFor(nodeId: number): NodeCapMap;
  /** The autoApprovers rule that approves the node's advertisement of prefix, described for the log; null if none. */
  autoApprover(nodeId: number, prefix: string): string | null;
  /** Who may reach the node, on what: one entry per rule. */
  reachersOf(nodeId: number): Reacher[];
  /**
   * Whether a packet from src to dst on proto/port is admitted by dst's compiled filter, evaluated as the client's
   * wgengine/filter evaluates it (TCP SYN, UDP, ICMP echo, other protocols). family picks the IPv4 or IPv6
   * addresses of the two nodes; without it, either family admitting counts.
   */
  mayReach(srcId: number, dstId: number, proto: number, port: number, family?: 4 | 6): boolean;
  /** The tags the policy defines (the keys of tagOwners), sorted: the only tags a device may carry. */
  definedTags(): string[];
  /** May this user put the tag on a device (--advertise-tags, an admin tagging)? Tags not in tagOwners: never. */
  mayOwnTag(userId: number, tag: string): boolean;
  /** May a device with these tags take the tag (tags listed as owners of other tags)? */
  tagsMayOwnTag(tags: readonly string[], tag: string): boolean;
  /** Stable digest of everything above for the node, and of each part. */
  digestOf(nodeId: number): string;
  viewDigest(nodeId: number): ViewDigest;
}
