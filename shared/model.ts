// Plain data records kept in Redis by the coordination service and read by the console (through the admin API) and
// the relay (node-key index). JSON-serialisable; times are ISO 8601 UTC strings.

export interface UserRecord {
  id: number;
  /** Unique, lowercase: letters, digits, . _ @ - */
  name: string;
  displayName: string;
  created: string;
  /** Set for a user made by signing in with the identity provider: who they are there (users are matched by this). */
  idp?: { issuer: string; subject: string };
  /** From the provider, refreshed at each sign-in. */
  email?: string;
  picture?: string;
  /** The provider's groups at the last sign-in; the policy refers to them as "idp:<group>". */
  idpGroups?: string[];
  lastSignIn?: string;
}

/**
 * Who the identity provider says signed in: the claims hse uses, from the validated ID token merged with UserInfo.
 * The console builds it after the code exchange and hands it to the coordination service over the admin API.
 */
export interface ProviderIdentity {
  issuer: string;
  subject: string;
  email: string | null;
  /** The provider's email_verified claim; false when absent. */
  emailVerified: boolean;
  name: string | null;
  preferredUsername: string | null;
  /** URL of the person's picture, https only. */
  picture: string | null;
  groups: string[];
}

export interface NodeRecord {
  id: number;
  /** Stable id the client keeps across renames ("n" + random). */
  stableId: string;
  userId: number;
  /** "mkey:<hex>" — bound at first registration; a request over Noise with another machine key is refused. */
  machineKey: string;
  /** "nodekey:<hex>" — current WireGuard key; rotates. */
  nodeKey: string;
  /** "discokey:<hex>" or "" until the first map request. */
  discoKey: string;
  /** Host name the device reports (Hostinfo.Hostname). */
  hostname: string;
  /** MagicDNS label, unique in the tailnet; the operator may rename it. */
  givenName: string;
  ipv4: string;
  ipv6: string;
  /** Last Hostinfo the client sent (opaque JSON object). */
  hostinfo: Record<string, unknown> | null;
  /** "ip:port" strings the client reported. */
  endpoints: string[];
  /** Preferred DERP region (Hostinfo.NetInfo.PreferredDERP). */
  homeDerp: number;
  /** Capability version the client last spoke. */
  capVersion: number;
  created: string;
  lastSeen: string | null;
  /** Key expiry; null = never. A past value means the node must log in again. */
  expiry: string | null;
  /** An operator disabled key expiry for this machine: it keeps `expiry` null across re-logins. Absent = false. */
  keyExpiryDisabled?: boolean;
  ephemeral: boolean;
  /** Pre-auth key id used, or null (interactive / CLI approval / identity provider). */
  authKeyId: number | null;
  /** interactive = approved by an operator; identity-provider = its owner signed in with the identity provider. */
  registeredBy: 'authkey' | 'interactive' | 'identity-provider';
  /**
   * The node's tags ("tag:server"). Non-empty = the node is owned by its tags, not by a person (Tailscale's
   * semantics): the policy sees it as its tags, autogroup:member does not include it. `userId` still records who
   * registered it. Records stored before tags existed have none.
   */
  tags: string[];
  /** Routes (CIDR prefixes, 0.0.0.0/0 + ::/0 = exit node) an operator or an autoApprovers rule approved. */
  approvedRoutes: string[];
}

export interface PreAuthKeyRecord {
  id: number;
  /** The visible start of the key ("hse-auth-<prefix>"); the rest is only stored hashed. */
  prefix: string;
  /** sha256 of the whole key, hex. */
  hash: string;
  userId: number;
  reusable: boolean;
  ephemeral: boolean;
  /** Tags a node registered with this key gets (it is then owned by them, not by the key's user). */
  tags: string[];
  /** Single-use keys: set once used. */
  used: boolean;
  created: string;
  expiration: string;
  createdBy: string;
}

/** A device waiting for an operator to approve it (interactive login). */
export interface PendingAuth {
  authId: string;
  machineKey: string;
  nodeKey: string;
  hostname: string;
  hostinfo: Record<string, unknown> | null;
  /** Requested key expiry from the client, or null. */
  expiry: string | null;
  ephemeral: boolean;
  created: string;
  /** Client address that asked to register, as the router resolved it. */
  ip: string;
  status: 'pending' | 'approved' | 'rejected';
  /** Set when approved. */
  nodeId?: number;
  decidedBy?: string;
  /** Why it was refused, shown to the device's user (tailscale up prints it). */
  reason?: string;
}

/** What the admin API returns for a node: the record plus live state. */
export interface NodeView extends NodeRecord {
  keyExpiryDisabled: boolean;
  online: boolean;
  user: string;
  fqdn: string;
  expired: boolean;
}

export interface PreAuthKeyView extends Omit<PreAuthKeyRecord, 'hash'> {
  user: string;
  expired: boolean;
}

// ---- node rules -------------------------------------------------------------------------------------------------

/** A node whose key expiry has passed must log in again; null expiry = never expires. */
export function isExpired(n: Pick<NodeRecord, 'expiry'>, now = Date.now()): boolean {
  return n.expiry !== null && Date.parse(n.expiry) <= now;
}

/** The node's MagicDNS name with the trailing dot clients expect: "<given name>.<base domain>.". */
export function nodeFqdn(baseDomain: string, n: Pick<NodeRecord, 'givenName'>): string {
  return `${n.givenName}.${baseDomain}.`;
}

// ---- what the admin API answers about the policy and routes (services/coordination/src/admin/) ---------------------

/** One saved version of the tailnet policy (state/policy-store.ts). */
export interface PolicyVersion {
  version: number;
  text: string;
  /** Console account, "cli", "api:<key description>", or "system". */
  actor: string;
  ip: string;
  /** ISO 8601 UTC. */
  time: string;
  /** Why, when it is not a plain edit, e.g. "revert to version 3". */
  note?: string;
}

/** One line of "who may reach this machine", for the console's machine page and `hse nodes access`. */
export interface Reacher {
  /** Who: the rule's sources as written ("group:eng", "alice@", "*"), or "alice@'s own devices" for autogroup:self. */
  who: string;
  /** What, in words: "tcp 22, 443", "tcp/udp every port", "ssh as root, ubuntu", "capability example.com/cap/x". */
  what: string;
  /** The rule it comes from ("acls[3]", "grants[0]", "ssh[1]") and its line. */
  origin: string;
  line: number;
  /** who → what, as the console prints it. */
  text: string;
}

/** One advertised or approved route of a machine, as the console and the CLI list them. */
export interface RouteView {
  nodeId: number;
  node: string;
  /** A CIDR prefix, or "exit" for the 0.0.0.0/0 + ::/0 pair. */
  prefix: string;
  advertised: boolean;
  approved: boolean;
  /** Advertised and approved: peers allowed by the policy get it. */
  active: boolean;
  /** This machine is the one peers route the subnet through (exit routes are never primary). */
  primary: boolean;
  online: boolean;
}
