// Redis key names every process agrees on. All keys start with "hse:" so the image can share a Redis with others.
export const K = {
  /** Stream: the activity log (console "Logs"). */
  activity: 'hse:activity',
  /** Hash: node id -> Node JSON. */
  nodes: 'hse:nodes',
  /** Hash: node key ("nodekey:<hex>") -> node id. Relay admission reads this. */
  nodeByNodeKey: 'hse:idx:nodekey',
  /** Hash: machine key ("mkey:<hex>") -> node id. */
  nodeByMachineKey: 'hse:idx:mkey',
  /** Hash: MagicDNS host label -> node id (uniqueness). */
  nodeByName: 'hse:idx:name',
  /** Hash: allocated IPv4 -> node id (uniqueness); IPv6 is derived from it. */
  nodeByIPv4: 'hse:idx:ipv4',
  /** Counter: last node id. */
  nodeSeq: 'hse:seq:node',
  /** Hash: user id -> User JSON. */
  users: 'hse:users',
  /** Hash: user name -> user id. */
  userByName: 'hse:idx:username',
  userSeq: 'hse:seq:user',
  /** Hash: pre-auth key id -> PreAuthKey JSON (key stored hashed). */
  preAuthKeys: 'hse:authkeys',
  /** Hash: sha256(key) hex -> pre-auth key id. */
  preAuthKeyByHash: 'hse:idx:authkeyhash',
  authKeySeq: 'hse:seq:authkey',
  /** Hash: auth id (from an AuthURL) -> pending registration JSON. */
  pendingAuth: 'hse:pendingauth',
  /** Hash: node id -> online presence JSON (which instance, since when). */
  presence: 'hse:presence',
  /** Pub/sub channel: every state change, as JSON ChangeEvent. */
  changes: 'hse:changes',
  /** Console: session prefix, accounts hash, rate-limit prefix. */
  consoleSessionPrefix: 'hse:console:sess:',
  consoleAccounts: 'hse:console:accounts',
  consoleSecrets: 'hse:console:secrets',
  consoleRateLimitPrefix: 'hse:console:ratelimit:',
  /** Console: failed passwords per account name, from anywhere (services/console/src/auth/account-throttle.ts). */
  consoleAccountThrottlePrefix: 'hse:console:account-throttle:',
} as const;
