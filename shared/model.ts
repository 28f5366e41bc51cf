// Plain data records kept in Redis by the coordination service and read by the console (through the admin API) and
// the relay (node-key index). JSON-serialisable; times are ISO 8601 UTC strings.

export interface UserRecord {
  id: number;
  /** Unique, lowercase: letters, digits, . _ @ - */
  name: string;
  displayName: string;
  created: string;
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
  /** Pre-auth key id used, or null (interactive / CLI approval). */
  authKeyId: number | null;
  registeredBy: 'authkey' | 'interactive';
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
