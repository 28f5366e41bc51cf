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
  /** Hash: JSON [issuer, subject] of an identity-provider account -> user id. */
  userByIdentity: 'hse:idx:identity',
  /** Hash: pre-auth key id -> PreAuthKey JSON (key stored hashed). */
  preAuthKeys: 'hse:authkeys',
  /**
   * Hash: a pre-auth key's visible prefix ("hse-auth-<12 hex>") -> its id. The key itself is stored only as a sha256
   * hash in its record; the prefix finds the record, the hash is then compared in constant time.
   */
  preAuthKeyByPrefix: 'hse:idx:authkeyhash',
  authKeySeq: 'hse:seq:authkey',
  /** Hash: single-use pre-auth key id -> "<time used> <machine key>" (HSETNX: the first registration wins). */
  preAuthKeyUsed: 'hse:authkeys:used',
  /** Prefix of a string key per pending interactive registration (auth id from an AuthURL) -> JSON, with a TTL. */
  pendingPrefix: 'hse:pending:',
  /** Sorted set: pending auth ids by creation time (ms), for listing; entries past the TTL are pruned on read. */
  pendingIndex: 'hse:pendingidx',
  /** Counter: the last IPv4 allocation candidate handed out (state/ip-alloc.ts). */
  ipSeq: 'hse:seq:ip',
  /** Hash: node id -> JSON {instance: until (ms)}: the instances holding its map stream (coordination state/presence.ts). */
  presence: 'hse:presence',
  /** Hash: policy version -> {version, text, actor, ip, time, note} (the last 100; state/policy-store.ts). */
  policyVersions: 'hse:policy:versions',
  /** String: the version in force (absent = no policy saved: allow-all). */
  policyCurrent: 'hse:policy:current',
  /** Counter: the last policy version number. */
  policySeq: 'hse:seq:policy',
  /** String: the public half of the tailnet's Noise key, set by the first instance (shared/key-agreement.ts). */
  tailnetNoiseKey: 'hse:keys:noise',
  /** Prefix of a string key per refused relay client's node key, with a TTL: recorded in the activity log lately. */
  relayRefusedPrefix: 'hse:relay:refused:',
  /** String with a TTL: which coordination process runs the once-only housekeeping (state/housekeeping.ts). */
  leaseHousekeeping: 'hse:lease:housekeeping',
  /** String: the tailnet's DNS settings as JSON (shared/dns-settings.ts); absent = the defaults (MagicDNS only). */
  dns: 'hse:dns',
  /** Pub/sub channel: every state change, as JSON ChangeEvent. */
  changes: 'hse:changes',
  /** Hash: API key id -> ApiKeyRecord JSON (the key stored hashed). */
  apiKeys: 'hse:apikeys',
  /** Hash: an API key's visible prefix ("hse-api-<12 hex>") -> its id. */
  apiKeyByPrefix: 'hse:idx:apikeyprefix',
  apiKeySeq: 'hse:seq:apikey',
  /** Hash: API key id -> {time, ip} of its last use (written at most once a minute per key). */
  apiKeyLastUsed: 'hse:apikeys:lastused',
  /** Failed API authentications per client address (shared/attempt-limit.ts). */
  apiAuthLimitPrefix: 'hse:ratelimit:api:',
  /** Hash: webhook endpoint id -> WebhookEndpoint JSON. */
  webhooks: 'hse:webhooks',
  webhookSeq: 'hse:seq:webhook',
  /** Hash: delivery id -> WebhookDelivery JSON. */
  webhookDeliveries: 'hse:webhooks:deliveries',
  webhookDeliverySeq: 'hse:seq:webhookdelivery',
  /** Sorted set: delivery ids due for an attempt, by the time (ms) of their next attempt. */
  webhookDue: 'hse:webhooks:due',
  /** Prefix of a sorted set per endpoint: its delivery ids by creation time (the newest are kept). */
  webhookEndpointDeliveriesPrefix: 'hse:webhooks:ep:',
  /** String: the last activity-log entry id turned into webhook events. */
  webhookCursor: 'hse:webhooks:cursor',
  /** Hash: node id -> the key expiry it was last warned about (nodeKeyExpiringInOneDay / nodeKeyExpired sent once). */
  webhookExpiryNotified: 'hse:webhooks:expirynotified',
  /** Hash: StableID of every machine nodeCreated was sent for (a re-login of the same machine is not a new node). */
  webhookNodesAnnounced: 'hse:webhooks:nodesannounced',
  /** String with a TTL: which coordination process sends webhooks (shared/lease.ts). */
  leaseWebhooks: 'hse:lease:webhooks',
  /** Console: session prefix, accounts hash, rate-limit prefix. */
  consoleSessionPrefix: 'hse:console:sess:',
  consoleAccounts: 'hse:console:accounts',
  consoleSecrets: 'hse:console:secrets',
  consoleRateLimitPrefix: 'hse:console:ratelimit:',
  /** Console: a sign-in with the identity provider under way (key = prefix + its state value), 10 minutes at most. */
  consoleOidcFlowPrefix: 'hse:console:oidc:flow:',
  /** Hash: JSON [issuer, subject] of an identity-provider account -> console account key. */
  consoleOidcAccounts: 'hse:console:oidc:accounts',
  /** Console: failed passwords per account name, from anywhere (services/console/src/auth/account-throttle.ts). */
  consoleAccountThrottlePrefix: 'hse:console:account-throttle:',
} as const;

/** The field of an identity-provider account in K.userByIdentity and K.consoleOidcAccounts: unambiguous JSON. */
export function identityField(issuer: string, subject: string): string {
  return JSON.stringify([issuer, subject]);
}
