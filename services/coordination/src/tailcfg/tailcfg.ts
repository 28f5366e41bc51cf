// Wire messages of the control protocol, named and shaped as tailscale's tailcfg package names them (JSON field names
// are the Go field names). Only the fields this server reads or writes are listed; clients ignore unknown ones and
// omit empty ones. Keys travel as "nodekey:<hex>", "mkey:<hex>", "discokey:<hex>"; times as RFC 3339; prefixes as
// "100.64.0.1/32"; endpoints as "ip:port" / "[ip6]:port".

export interface RegisterResponseAuth {
  AuthKey?: string;
}

export interface RegisterRequest {
  Version: number;
  NodeKey: string;
  OldNodeKey?: string;
  Auth?: RegisterResponseAuth | null;
  /** Zero time ("0001-01-01T00:00:00Z") = none; a past time = log out. */
  Expiry?: string;
  /** The AuthURL from an earlier response: hold the request until the operator decides. */
  Followup?: string;
  Hostinfo?: Hostinfo | null;
  Ephemeral?: boolean;
}

export interface User {
  ID: number;
  DisplayName: string;
  Created?: string;
}

export interface Login {
  ID: number;
  Provider: string;
  LoginName: string;
  DisplayName: string;
}

export interface RegisterResponse {
  User?: User;
  Login?: Login;
  NodeKeyExpired?: boolean;
  MachineAuthorized?: boolean;
  AuthURL?: string;
  /** Shown to the user by the client. */
  Error?: string;
}

export interface NetInfo {
  PreferredDERP?: number;
  [k: string]: unknown;
}

export interface Hostinfo {
  Hostname?: string;
  OS?: string;
  IPNVersion?: string;
  NetInfo?: NetInfo;
  [k: string]: unknown;
}

export interface MapRequest {
  Version: number;
  Compress?: string;
  KeepAlive?: boolean;
  NodeKey: string;
  DiscoKey?: string;
  Stream?: boolean;
  Hostinfo?: Hostinfo | null;
  Endpoints?: string[] | null;
  ReadOnly?: boolean;
  OmitPeers?: boolean;
}

export interface Node {
  ID: number;
  StableID: string;
  /** FQDN with a trailing dot. */
  Name: string;
  User: number;
  Key: string;
  KeyExpiry?: string;
  Machine: string;
  DiscoKey?: string;
  Addresses: string[];
  AllowedIPs: string[];
  Endpoints?: string[];
  HomeDERP?: number;
  Hostinfo: Hostinfo;
  Created: string;
  Cap?: number;
  LastSeen?: string;
  Online?: boolean;
  MachineAuthorized: boolean;
  Expired?: boolean;
}

export interface PeerChange {
  NodeID: number;
  DERPRegion?: number;
  Endpoints?: string[];
  DiscoKey?: string;
  Online?: boolean;
  LastSeen?: string;
  KeyExpiry?: string;
}

export interface UserProfile {
  ID: number;
  LoginName: string;
  DisplayName: string;
}

export interface DERPNode {
  Name: string;
  RegionID: number;
  HostName: string;
  IPv4?: string;
  IPv6?: string;
  /** 0 = 3478; -1 = no STUN on this node. */
  STUNPort?: number;
  STUNOnly?: boolean;
  /** 0 = 443. */
  DERPPort?: number;
  CanPort80?: boolean;
}

export interface DERPRegion {
  RegionID: number;
  RegionCode: string;
  RegionName: string;
  Nodes: DERPNode[];
}

export interface DERPMap {
  Regions: Record<string, DERPRegion>;
  omitDefaultRegions?: boolean;
}

export interface FilterRule {
  SrcIPs: string[];
  DstPorts: { IP: string; Ports: { First: number; Last: number } }[];
}

/** dnstype.Resolver: an IP (port 53), "IP:port", or a DoH URL the client knows. */
export interface DNSResolver {
  Addr: string;
}

/** tailcfg.DNSRecord: Type "A" or "AAAA" (the client skips others); Value an IP literal. */
export interface DNSRecord {
  Name: string;
  Type?: string;
  Value: string;
}

/**
 * tailcfg.DNSConfig. Sent whole whenever it changes (the client replaces its copy; absent = unchanged). Never sent:
 * `Nameservers` (legacy, capver ≤ 13) and `CertDomains` (without them `tailscale cert` stops locally instead of
 * calling /machine/set-dns).
 */
export interface DNSConfig {
  /** Default resolvers ("override local DNS"): every query not matched by a route goes to them. */
  Resolvers?: DNSResolver[];
  /** Split DNS: FQDN suffix (trailing dot) -> resolvers; an empty list = quad-100 answers the suffix itself. */
  Routes?: Record<string, DNSResolver[]>;
  /** Used by v1.102 only with an exit node that cannot proxy DNS and no Resolvers; listed by `dns status --all`. */
  FallbackResolvers?: DNSResolver[];
  /** Search domains, without the trailing dot. */
  Domains?: string[];
  /** MagicDNS on. */
  Proxied?: boolean;
  ExtraRecords?: DNSRecord[];
}

export interface MapResponse {
  KeepAlive?: boolean;
  Node?: Node;
  DERPMap?: DERPMap;
  Peers?: Node[];
  PeersChanged?: Node[];
  PeersRemoved?: number[];
  PeersChangedPatch?: PeerChange[];
  DNSConfig?: DNSConfig;
  Domain?: string;
  CollectServices?: boolean;
  PacketFilter?: FilterRule[];
  UserProfiles?: UserProfile[];
  ControlTime?: string;
  Debug?: { DisableLogTail?: boolean };
}

/** Go's zero time.Time as JSON. */
export const ZERO_TIME = '0001-01-01T00:00:00Z';

/** A client's time value, or null for Go's zero time and for anything that is not a time string (a malformed body). */
export function goTime(s: unknown): Date | null {
  if (typeof s !== 'string' || s === '' || s.startsWith('0001-01-01')) return null;
  const t = Date.parse(s);
  return Number.isNaN(t) ? null : new Date(t);
}
