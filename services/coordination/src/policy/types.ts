// The policy document, named as Tailscale's policy file names it (acls, grants, groups, tagOwners, hosts, tests,
// autoApprovers, ssh, sshTests, nodeAttrs), and the tailnet snapshot the engine compiles it against.
//
// Every string read from the document is a Located: its value and the offset of its JSON value in the text, so any
// later check (an unknown group, a failing test) can say where in the file the problem is.

/** A string from the document and where its value starts in the text. */
export interface Located {
  value: string;
  offset: number;
}

/** acls[]: network access from src to dst ("selector:ports"). action is always "accept"; proto is optional. */
export interface ACL {
  offset: number;
  src: Located[];
  dst: Located[];
  proto: Located | null;
}

/** An application capability of a grant or a nodeAttrs entry: its name and its JSON values. */
export interface AppCapability {
  name: Located;
  values: unknown[];
}

/** grants[]: network access (ip: "*", "tcp:443", "53", "udp:1000-2000", …) and application capabilities (app). */
export interface Grant {
  offset: number;
  src: Located[];
  dst: Located[];
  ip: Located[];
  app: AppCapability[];
}

/** tests[]: from src (one identity or address), the host:port entries in accept must be reachable, those in deny not. */
export interface PolicyTest {
  offset: number;
  src: Located;
  proto: Located | null;
  accept: Located[];
  deny: Located[];
}

/** ssh[]: who (src) may log in to which devices (dst) as which local users (users), with what action. */
export interface SSHRuleSpec {
  offset: number;
  /** null when missing (reported while reading). */
  action: Located | null;
  src: Located[];
  dst: Located[];
  users: Located[];
  checkPeriod: Located | null;
  acceptEnv: Located[];
}

/** sshTests[]: from src to every device in dst, the local users in accept may log in and those in deny may not. */
export interface SSHTest {
  offset: number;
  src: Located;
  dst: Located[];
  accept: Located[];
  deny: Located[];
  check: Located[];
}

/** nodeAttrs[]: attributes (attr) and capabilities with values (app) for the devices selected by target. */
export interface NodeAttr {
  offset: number;
  target: Located[];
  attr: Located[];
  app: AppCapability[];
}

/** A named entry of groups, tagOwners, hosts or autoApprovers.routes: its key, where the key is, and its values. */
export interface NamedList {
  name: Located;
  values: Located[];
}

export interface Policy {
  groups: NamedList[];
  tagOwners: NamedList[];
  /** hosts: name → one address or CIDR (values has exactly one entry). */
  hosts: NamedList[];
  acls: ACL[];
  grants: Grant[];
  tests: PolicyTest[];
  autoApprovers: { routes: NamedList[]; exitNode: Located[] };
  ssh: SSHRuleSpec[];
  sshTests: SSHTest[];
  nodeAttrs: NodeAttr[];
  /** Top-level randomizeClientPort: true gives every node the randomize-client-port attribute. */
  randomizeClientPort: boolean;
  /**
   * Whether the document has an "acls" or a "grants" key at all. With neither, network access is open (every device
   * reaches every device), as Tailscale does it; an empty "acls": [] denies everything.
   */
  hasAccessRules: boolean;
}

/** A device as the engine sees it. Tagged devices (tags non-empty) are owned by their tags, not by userId's user. */
export interface TailnetNode {
  id: number;
  ipv4: string;
  ipv6: string;
  userId: number;
  tags: string[];
  /** Routes an operator (or an auto-approver) approved: subnets, and "0.0.0.0/0" + "::/0" for an exit node. */
  approvedRoutes: string[];
}

export interface TailnetUser {
  id: number;
  /** Login name, as in "alice@" in the policy. */
  name: string;
  /** Full address, as in "alice@example.com" in the policy, when the user has one. */
  email: string | null;
  /** Groups the identity provider put the user in; "idp:<name>" in a policy group selects them. */
  idpGroups: string[];
}

export interface TailnetSnapshot {
  nodes: readonly TailnetNode[];
  users: readonly TailnetUser[];
}
