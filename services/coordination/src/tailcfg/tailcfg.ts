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
  /** Routes this peer is the primary router for (subnet routes only; exit routes are never primaried). */
  PrimaryRoutes?: string[];
  Tags?: string[];
  CapMap?: NodeCapMap;
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

/** tailcfg.PortRange: inclusive; {First: 0, Last: 65535} = every port. */
export interface PortRange {
  First: number;
  Last: number;
}

/** tailcfg.NetPortRange: IP is "*", an address, a CIDR or an inclusive range "a-b" (the same forms as SrcIPs). */
export interface NetPortRange {
  IP: string;
  Ports: PortRange;
}

/**
 * tailcfg.PeerCapMap: application capability name → its values (JSON values; null when the capability carries none).
 * Clients hand these to applications (Taildrive, the web UI, a service doing WhoIs) for a connecting peer.
 */
export type PeerCapMap = Record<string, unknown[] | null>;

/** tailcfg.NodeCapMap: the node's own capabilities ("https://tailscale.com/cap/ssh", "drive:share", …) → values or null. */
export type NodeCapMap = Record<string, unknown[] | null>;

/**
 * tailcfg.CapGrant: capabilities the sources of its FilterRule get towards the destinations in Dsts (prefixes such
 * as "100.64.0.1/32"). A client reads them with Filter.CapsWithValues(srcIP, dstIP).
 */
export interface CapGrant {
  Dsts: string[];
  CapMap: PeerCapMap;
}

/**
 * tailcfg.FilterRule, evaluated by the receiving client (wgengine/filter): a packet from an address in SrcIPs to a
 * destination and port in DstPorts is admitted when its protocol is in IPProto. SrcIPs entries: "*", an address, a
 * CIDR, or an inclusive range "a-b". IPProto absent or empty = TCP, UDP, ICMPv4 and ICMPv6. A rule carries either
 * DstPorts (network access) or CapGrant (application capabilities), never both.
 */
export interface FilterRule {
  SrcIPs: string[];
  DstPorts?: NetPortRange[];
  IPProto?: number[];
  CapGrant?: CapGrant[];
}

/**
 * tailcfg.SSHPolicy: the rules a node's Tailscale SSH server applies to an incoming connection, first match wins.
 * JSON field names are lower camel case on the wire (unlike most of tailcfg).
 */
export interface SSHPolicy {
  rules: SSHRule[];
}

/**
 * tailcfg.SSHRule. sshUsers maps the requested SSH user (or "*") to the local user: "=" means the same name, "" means
 * the rule does not match that user (how "root" is kept out when only non-root users are allowed).
 */
export interface SSHRule {
  ruleExpires?: string;
  principals: SSHPrincipal[];
  sshUsers: Record<string, string>;
  action: SSHAction;
  acceptEnv?: string[];
}

/** tailcfg.SSHPrincipal: matches a connection by any one field. */
export interface SSHPrincipal {
  node?: string;
  nodeIP?: string;
  userLogin?: string;
  any?: boolean;
}

/** tailcfg.SSHAction: at most one outcome field set. */
export interface SSHAction {
  message?: string;
  reject?: boolean;
  accept?: boolean;
  /** Nanoseconds (Go time.Duration). */
  sessionDuration?: number;
  allowAgentForwarding?: boolean;
  holdAndDelegate?: string;
  allowLocalPortForwarding?: boolean;
  allowRemotePortForwarding?: boolean;
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
  SSHPolicy?: SSHPolicy;
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
