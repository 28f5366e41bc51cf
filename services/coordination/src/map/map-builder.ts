// Turns state (node records, users, online set, routes in effect) and the compiled policy into MapResponse pieces.
// Pure functions over a snapshot, so a full map for thousands of peers is built from memory without touching Redis,
// and the Node a peer sees is built once per change and per distinct view of its routes, not once per receiver.
//
// What depends on who is looking (the viewer):
//   - which peers it gets, its PacketFilter, SSHPolicy and its own CapMap: the compiled policy (policy/);
//   - a router's AllowedIPs and PrimaryRoutes: only the routes the viewer may use, and of a subnet only on its
//     primary router (map/routes.ts); an exit node's 0.0.0.0/0 + ::/0 when the viewer may use it;
//   - the User of a tagged node: peers see the shared "tagged devices" user, the node itself its own per-node
//     identity (as Tailscale does: nodes owned by tags are nobody's, so two of them are never "the same user").
import type { Config } from '../../../../shared/config.ts';
import { isExpired, type NodeRecord, nodeFqdn, type UserRecord } from '../../../../shared/model.ts';
import type { CompiledPolicy } from '../policy/index.ts';
import { isCapVersion } from '../tailcfg/capver.ts';
import { cleanEndpoints, cleanHostinfo } from '../tailcfg/hostinfo.ts';
import type { DERPMap, DNSConfig, MapResponse, Node, NodeCapMap, PeerChange, UserProfile } from '../tailcfg/tailcfg.ts';

export interface MapContext {
  cfg: Config;
  derpMap: DERPMap;
  /** The tailnet's DNSConfig (dns-config.ts), rebuilt by the hub when the DNS settings change. */
  dnsConfig: DNSConfig;
  users: ReadonlyMap<number, UserRecord>;
  online: ReadonlySet<number>;
}

/** The user id every peer sees for a node owned by tags (the id headscale uses too), and its profile. */
export const TAGGED_DEVICES_ID = 2147455555;
const TAGGED_DEVICES: UserProfile = { ID: TAGGED_DEVICES_ID, LoginName: 'tagged-devices', DisplayName: 'Tagged Devices' };
/** A tagged node's own identity: its own user id, so it is "the same user" only as itself. */
const TAGGED_SELF_BASE = 1_000_000_000;

export function isTagged(n: NodeRecord): boolean {
  return n.tags.length > 0;
}

/** The User a node carries in a map: its owner, or for a tagged node the tagged-devices user (self: its own id). */
export function userIdOf(n: NodeRecord, asSelf: boolean): number {
  if (!isTagged(n)) return n.userId;
  return asSelf ? TAGGED_SELF_BASE + n.id : TAGGED_DEVICES_ID;
}

export interface NodeRoutes {
  /** Extra AllowedIPs beyond the node's own addresses (routes the viewer may use and that this node serves). */
  allowed: readonly string[];
  /** PrimaryRoutes to show. */
  primary: readonly string[];
}

const NO_ROUTES: NodeRoutes = { allowed: [], primary: [] };

/** A node as a peer (or, with `self`, as itself) sees it. */
export function toTailNode(ctx: MapContext, n: NodeRecord, routes: NodeRoutes = NO_ROUTES, self: { capMap?: NodeCapMap } | null = null): Node {
  const now = Date.now();
  const online = ctx.online.has(n.id);
  const expired = isExpired(n, now);
  const addresses = [`${n.ipv4}/32`, `${n.ipv6}/128`];
  const node: Node = {
    ID: n.id,
    StableID: n.stableId,
    Name: nodeFqdn(ctx.cfg.baseDomain, n),
    User: userIdOf(n, self !== null),
    Key: n.nodeKey,
    Machine: n.machineKey,
    Addresses: addresses,
    AllowedIPs: routes.allowed.length > 0 ? [...addresses, ...routes.allowed] : addresses,
    // Cleaned again here for records stored before requests were cleaned (tailcfg/hostinfo.ts).
    Hostinfo: { ...(cleanHostinfo(n.hostinfo) ?? {}), Hostname: n.hostname },
    Created: n.created,
    Online: online,
    MachineAuthorized: !expired,
  };
  if (n.expiry) node.KeyExpiry = n.expiry;
  if (expired) node.Expired = true;
  if (n.discoKey) node.DiscoKey = n.discoKey;
  const endpoints = cleanEndpoints(n.endpoints);
  if (endpoints.length > 0) node.Endpoints = endpoints;
  if (n.homeDerp) node.HomeDERP = n.homeDerp;
  if (n.capVersion && isCapVersion(n.capVersion)) node.Cap = n.capVersion;
  if (routes.primary.length > 0) node.PrimaryRoutes = [...routes.primary];
  if (isTagged(n)) node.Tags = n.tags;
  if (self?.capMap && Object.keys(self.capMap).length > 0) node.CapMap = self.capMap;
  // Clients read LastSeen only for offline peers; sending it for an online one confuses them.
  if (!online && n.lastSeen) node.LastSeen = n.lastSeen;
  return node;
}

/** The patch peers need when only the fast-changing fields of `n` changed. */
export function toPeerChange(ctx: MapContext, n: NodeRecord): PeerChange {
  const online = ctx.online.has(n.id);
  const p: PeerChange = { NodeID: n.id, Online: online, Endpoints: cleanEndpoints(n.endpoints), DERPRegion: n.homeDerp || undefined };
  if (n.discoKey) p.DiscoKey = n.discoKey;
  if (!online && n.lastSeen) p.LastSeen = n.lastSeen;
  return p;
}

export function userProfile(u: UserRecord): UserProfile {
  return { ID: u.id, LoginName: u.name, DisplayName: u.displayName };
}

/** The profile behind a node's User in a map (see userIdOf); null for an owner that no longer exists. */
export function profileOf(ctx: Pick<MapContext, 'cfg' | 'users'>, n: NodeRecord, asSelf: boolean): UserProfile | null {
  if (!isTagged(n)) {
    const u = ctx.users.get(n.userId);
    return u ? userProfile(u) : null;
  }
  if (!asSelf) return TAGGED_DEVICES;
  return { ID: TAGGED_SELF_BASE + n.id, LoginName: nodeFqdn(ctx.cfg.baseDomain, n).replace(/\.$/, ''), DisplayName: n.hostname };
}

/** Profiles for the viewer itself and its peers, each once. */
export function profilesFor(ctx: MapContext, self: NodeRecord | null, peers: Iterable<NodeRecord>): UserProfile[] {
  const out = new Map<number, UserProfile>();
  if (self) {
    const p = profileOf(ctx, self, true);
    if (p) out.set(p.ID, p);
  }
  for (const n of peers) {
    const p = profileOf(ctx, n, false);
    if (p && !out.has(p.ID)) out.set(p.ID, p);
  }
  return [...out.values()];
}

/** Everything of the first message but the peers, which the hub splices in from its per-node cache. */
export function fullMapHead(
  ctx: MapContext,
  self: Node,
  policy: Pick<CompiledPolicy, 'filterFor' | 'sshPolicyFor'>,
  selfRecord: NodeRecord,
  profiles: UserProfile[],
): MapResponse {
  const m: MapResponse = {
    Node: self,
    DERPMap: ctx.derpMap,
    DNSConfig: ctx.dnsConfig,
    Domain: ctx.cfg.baseDomain,
    CollectServices: false,
    PacketFilter: policy.filterFor(selfRecord.id),
    UserProfiles: profiles,
    ControlTime: new Date().toISOString(),
    // No log uploads to Tailscale's log servers: this is a self-hosted tailnet.
    Debug: { DisableLogTail: true },
  };
  const ssh = policy.sshPolicyFor(selfRecord.id);
  if (ssh) m.SSHPolicy = ssh;
  return m;
}
