// Turns state (node records, users, online set) into MapResponse pieces. Pure functions over a snapshot, so a full map
// for thousands of peers is built from memory without touching Redis, and the same Node a peer sees is built once per
// change, not once per receiving session.
import type { Config } from '../../../../shared/config.ts';
import type { NodeRecord, UserRecord } from '../../../../shared/model.ts';
import { isCapVersion } from '../tailcfg/capver.ts';
import { cleanEndpoints, cleanHostinfo } from '../tailcfg/hostinfo.ts';
import type { DERPMap, DNSConfig, FilterRule, MapResponse, Node, PeerChange, UserProfile } from '../tailcfg/tailcfg.ts';

export interface MapContext {
  cfg: Config;
  derpMap: DERPMap;
  /** The tailnet's DNSConfig (dns-config.ts), rebuilt by the hub when the DNS settings change. */
  dnsConfig: DNSConfig;
  users: ReadonlyMap<number, UserRecord>;
  online: ReadonlySet<number>;
}

/** Allow-all: every node may reach every port of every other node (no ACL policy yet). */
export const ALLOW_ALL: FilterRule[] = [{ SrcIPs: ['*'], DstPorts: [{ IP: '*', Ports: { First: 0, Last: 65535 } }] }];

export function fqdn(cfg: Config, n: NodeRecord): string {
  return `${n.givenName}.${cfg.baseDomain}.`;
}

export function isExpired(n: NodeRecord, now = Date.now()): boolean {
  return n.expiry !== null && Date.parse(n.expiry) <= now;
}

export function toTailNode(ctx: MapContext, n: NodeRecord, now = Date.now()): Node {
  const online = ctx.online.has(n.id);
  const expired = isExpired(n, now);
  const addresses = [`${n.ipv4}/32`, `${n.ipv6}/128`];
  const node: Node = {
    ID: n.id,
    StableID: n.stableId,
    Name: fqdn(ctx.cfg, n),
    User: n.userId,
    Key: n.nodeKey,
    Machine: n.machineKey,
    Addresses: addresses,
    AllowedIPs: addresses,
    // Cleaned again here for records stored before requests were cleaned (control/hostinfo.ts).
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

export function profilesFor(ctx: MapContext, nodes: Iterable<NodeRecord>): UserProfile[] {
  const ids = new Set<number>();
  for (const n of nodes) ids.add(n.userId);
  const out: UserProfile[] = [];
  for (const id of ids) {
    const u = ctx.users.get(id);
    if (u) out.push(userProfile(u));
  }
  return out;
}

/** The first message of a stream: everything the client needs, with every peer. */
export function fullMap(ctx: MapContext, self: NodeRecord, peers: NodeRecord[], peerNodes: Node[]): MapResponse {
  return {
    Node: toTailNode(ctx, self),
    DERPMap: ctx.derpMap,
    Peers: peerNodes,
    DNSConfig: ctx.dnsConfig,
    Domain: ctx.cfg.baseDomain,
    CollectServices: false,
    PacketFilter: ALLOW_ALL,
    UserProfiles: profilesFor(ctx, [self, ...peers]),
    ControlTime: new Date().toISOString(),
    // No log uploads to Tailscale's log servers: this is a self-hosted tailnet.
    Debug: { DisableLogTail: true },
  };
}
