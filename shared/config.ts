// The one place HSE_* settings are read and validated. Every process calls loadConfig() at start; nothing else reads
// process.env. A refused setting is reported as one line naming the variable and the reason, and the process exits
// with status 2, which the supervisor (ecosystem.config.js, stop_exit_codes) treats as "do not restart".
import fs from 'node:fs';
import path from 'node:path';
import ipaddr from 'ipaddr.js';
import { DerpSettingError, type DerpNodeAddress, type MeshPeerAddress, parseDerpNode, parseMeshKey, parseMeshPeer } from './derp-addresses.ts';
import { familiesCoveredTogether, TrustedProxies, TrustedProxyError, parseEntry, splitList, type TrustedRange } from './trusted-proxies.ts';

export type DerpMode = 'own' | 'public';

/** Sign-in with an OpenID Connect identity provider (HSE_OIDC_*); null in Config when HSE_OIDC_ISSUER is unset. */
export interface OidcConfig {
  /** The issuer identifier exactly as the provider publishes it (discovery checks it matches). */
  issuer: URL;
  clientId: string;
  /** From HSE_OIDC_CLIENT_SECRET or the file HSE_OIDC_CLIENT_SECRET_FILE names. */
  clientSecret: string;
  /** Always includes "openid". */
  scopes: string[];
  /** Lower-cased e-mail domains allowed to add devices; empty = any. */
  allowedDomains: string[];
  /** Lower-cased e-mail addresses allowed to add devices; empty = any. */
  allowedUsers: string[];
  /** Provider groups allowed to add devices; empty = any. */
  allowedGroups: string[];
  /** Claim holding the groups: a name, or a dotted path into nested claims (Keycloak's realm_access.roles). */
  groupsClaim: string;
  /** E-mail addresses the provider does not mark verified are not believed (domain and user rules fail). */
  requireVerifiedEmail: boolean;
  /** Provider groups whose members get the console's administrator role, and the auditor role. */
  adminGroups: string[];
  auditorGroups: string[];
  /** Local console passwords stay usable beside the provider (HSE_OIDC_CONSOLE_PASSWORDS). */
  consolePasswords: boolean;
  /** An administrator may still approve a waiting device by hand (HSE_OIDC_OPERATOR_APPROVAL). */
  operatorApproval: boolean;
  /** What the sign-in buttons call the provider. */
  displayName: string;
  /** Where the provider sends the browser back: <public URL>/console/oidc/callback. Register it at the provider. */
  redirectUri: string;
}

export interface Config {
  publicUrl: URL;
  /** Origin without trailing slash, e.g. https://vpn.example.com */
  publicOrigin: string;
  /** HSE_TLS as given (default on). */
  tls: boolean;
  /** Public URL is https and TLS is off: a reverse proxy terminates HTTPS in front of us. */
  proxyMode: boolean;
  /** Public URL is https and TLS is on: the router terminates HTTPS itself (80 + 443). */
  tlsMode: boolean;
  /** Public URL is https, whoever terminates it: cookies get Secure. */
  secure: boolean;
  trustedProxies: TrustedProxies;
  trustedProxiesAny: boolean;
  httpPort: number;
  /** HTTPS port in TLS mode. */
  httpsPort: number;
  /** Plain-HTTP port in TLS mode (redirects and ACME challenges). */
  tlsHttpPort: number;
  proxyBind: string;
  /** Address the router listens on: HSE_LISTEN_ADDRESS, else HSE_PROXY_BIND. The container sets 0.0.0.0. */
  listenAddress: string;
  /**
   * HSE_LISTEN_SOCKET: the router listens on this Unix socket instead of a TCP port (a proxy on the same host; only
   * who may open the socket can reach it). Its peer is the proxy, so its X-Forwarded-For is believed.
   */
  listenSocket: string | null;
  /** HSE_LISTEN_SOCKET_MODE: the socket's permission bits, octal (default 660: owner and group). */
  listenSocketMode: number;
  /** HSE_LISTEN_SOCKET_GROUP: group name or number given the socket (the proxy's group); null = this process's. */
  listenSocketGroup: string | null;
  /**
   * HSE_ROUTER_PROCESSES: how many router processes share the public TCP port (SO_REUSEPORT: the kernel spreads new
   * connections among them). 1 by default; more only for a plain HTTP listener (proxy mode or an http:// try-out).
   */
  routerProcesses: number;
  /**
   * Which of them this process is, 1 to routerProcesses (HSE_ROUTER_INSTANCE). Set by ecosystem.config.js for the
   * second and later router processes, not by operators; the first one serves the metrics listener.
   */
  routerInstance: number;
  /**
   * Seconds a client gets to send a complete request head to the router. The only clock on client traffic: bodies,
   * long-polls and tunnels have none, so this alone cuts off slow-header (slowloris) connections.
   */
  headerTimeoutSeconds: number;
  derpMode: DerpMode;
  /** Only node keys registered here may use the relay. */
  derpVerifyClients: boolean;
  stunPort: number;
  /** Host clients send STUN to when it differs from the public URL's host (proxy on another machine). */
  stunHost: string | null;
  /** Addresses the STUN server binds (HSE_STUN_LISTEN); by default every IPv4 and every IPv6 interface. */
  stunListen: string[];
  /** Packets held per DERP client while its connection is slow (HSE_DERP_SEND_QUEUE_DEPTH); then the oldest is dropped. */
  derpSendQueueDepth: number;
  /** Region id/code/name of our own relay in the DERP map. */
  derpRegionId: number;
  derpRegionCode: string;
  derpRegionName: string;
  /**
   * The relays clients are offered in the DERP map (HSE_DERP_NODES), in order; null = this image's relay alone, at the
   * public URL's host. HSE_DERP_REGIONS: 'one' = nodes of one region (derpRegionId), 'per-node' = a region each.
   */
  derpNodes: DerpNodeAddress[] | null;
  derpRegions: 'one' | 'per-node';
  /** The region's mesh key (HSE_DERP_MESH_KEY), 32 bytes; the file variant is read by the relay (mesh-key.ts). */
  derpMeshKey: Buffer | null;
  derpMeshKeyFile: string | null;
  /** Relays this relay dials to mesh with (HSE_DERP_MESH_WITH). */
  derpMeshWith: MeshPeerAddress[];
  dataDir: string;
  runDir: string;
  redisUrl: string | null;
  /** Redis Sentinel: the sentinels to ask for the current primary (HSE_REDIS_SENTINELS), and the primary's name. */
  redisSentinels: { host: string; port: number }[];
  redisSentinelName: string;
  /** Password of the Redis primary/replicas (HSE_REDIS_PASSWORD, for Sentinel setups; a redis:// URL carries its own). */
  redisPassword: string | null;
  /** Password of the sentinels themselves (HSE_REDIS_SENTINEL_PASSWORD; Sentinel's own requirepass), if they have one. */
  redisSentinelPassword: string | null;
  /** Replicas that must confirm a registration or key before it is acknowledged (HSE_REDIS_WAIT_REPLICAS; 0 = no WAIT). */
  redisWaitReplicas: number;
  consoleUser: string;
  consolePassword: string | null;
  consolePasswordFile: string | null;
  baseDomain: string;
  logLevel: LogLevel;
  activityRetentionDays: number;
  activityMaxEntries: number;
  /**
   * HSE_POLICY_FILE: the tailnet policy is this HuJSON file, reloaded when it changes (a refused version keeps the
   * previous policy); the console shows it read-only and the CLI/API refuse to set it. Null = the policy is kept in
   * Redis and edited in the console, the CLI or the API.
   */
  policyFile: string | null;
  /** HSE_TAILDROP: Taildrop (tailscale file cp) between a user's own devices; off = nowhere, whatever the policy. */
  taildrop: boolean;
  /** Seconds an ephemeral node may stay disconnected before it is deleted. */
  ephemeralTimeoutSeconds: number;
  /** Lifetime of a node key from its registration (HSE_NODE_KEY_EXPIRY), in seconds; 0 = keys never expire. */
  nodeKeyExpirySeconds: number;
  /** TLS mode: certificate files given by the operator, or ACME. */
  tlsCertFile: string | null;
  tlsKeyFile: string | null;
  acmeDirectoryUrl: string;
  acmeEmail: string | null;
  /** Sign-in with an identity provider, or null when HSE_OIDC_ISSUER is unset. */
  oidc: OidcConfig | null;
  /**
   * HSE_METRICS_LISTEN: where the Prometheus scrape endpoint listens (address and TCP port, its own listener, never the
   * public router); null = metrics off (the default): no process collects or serves them.
   */
  metricsListen: { host: string; port: number } | null;
  /** Warnings found while parsing, printed by the caller's logger. */
  warnings: string[];
}

export type LogLevel = 'debug' | 'info' | 'warn' | 'error';

export class ConfigError extends Error {
  readonly variable: string;
  readonly reason: string;
  constructor(variable: string, reason: string) {
    super(`${variable}: ${reason}`);
    this.variable = variable;
    this.reason = reason;
  }
}

type Env = Record<string, string | undefined>;

function get(env: Env, name: string): string | undefined {
  const v = env[name];
  if (v === undefined) return undefined;
  const t = v.trim();
  return t === '' ? undefined : t;
}

function bool(env: Env, name: string, dflt: boolean): boolean {
  const v = get(env, name);
  if (v === undefined) return dflt;
  const l = v.toLowerCase();
  if (['1', 'on', 'true', 'yes'].includes(l)) return true;
  if (['0', 'off', 'false', 'no'].includes(l)) return false;
  throw new ConfigError(name, `"${v}" is not on/off (use on, off, true, false, 1 or 0)`);
}

function port(env: Env, name: string, dflt: number): number {
  const v = get(env, name);
  if (v === undefined) return dflt;
  if (!/^\d+$/.test(v) || Number(v) < 1 || Number(v) > 65535) {
    throw new ConfigError(name, `"${v}" is not a TCP/UDP port (a whole number from 1 to 65535)`);
  }
  return Number(v);
}

function positiveInt(env: Env, name: string, dflt: number, max: number): number {
  const v = get(env, name);
  if (v === undefined) return dflt;
  if (!/^\d+$/.test(v) || Number(v) < 1 || Number(v) > max) {
    throw new ConfigError(name, `"${v}" is not a whole number from 1 to ${max}`);
  }
  return Number(v);
}

function nonNegativeInt(env: Env, name: string, dflt: number, max: number): number {
  const v = get(env, name);
  if (v === undefined) return dflt;
  if (!/^\d+$/.test(v) || Number(v) > max) throw new ConfigError(name, `"${v}" is not a whole number from 0 to ${max}`);
  return Number(v);
}

/** HSE_REDIS_SENTINELS: "host:port, host:port, ..." ([v6]:port for IPv6); port defaults to 26379. */
function redisSentinels(env: Env): { host: string; port: number }[] {
  const name = 'HSE_REDIS_SENTINELS';
  const v = get(env, name);
  if (v === undefined) return [];
  const out: { host: string; port: number }[] = [];
  for (const entry of splitList(v)) {
    const m = /^(?:\[([0-9a-fA-F:.]+)\]|([A-Za-z0-9.-]+))(?::(\d{1,5}))?$/.exec(entry);
    const port = m?.[3] === undefined ? 26379 : Number(m[3]);
    if (!m || port < 1 || port > 65535) throw new ConfigError(name, `"${entry}" is not host:port (for example sentinel-1:26379 or [2001:db8::5]:26379)`);
    out.push({ host: m[1] ?? m[2], port });
  }
  if (out.length === 0) throw new ConfigError(name, 'is empty; list the sentinels as host:port, separated by commas');
  return out;
}

function bindAddress(env: Env, name: string, dflt: string): string {
  const v = get(env, name) ?? dflt;
  const bare = v.startsWith('[') && v.endsWith(']') ? v.slice(1, -1) : v;
  if (!ipaddr.isValid(bare) || (!bare.includes(':') && !ipaddr.IPv4.isValidFourPartDecimal(bare))) {
    throw new ConfigError(name, `"${v}" is not an IP address to bind to (for example 127.0.0.1, 0.0.0.0 or ::1)`);
  }
  return bare;
}

// STUN answers must leave from the address the client sent to, or a NAT on the way drops them; on a host with several
// addresses the operator lists the public one(s). Each entry is a literal IP, IPv4 or IPv6.
function listenAddresses(env: Env, name: string, dflt: string[]): string[] {
  const v = get(env, name);
  if (v === undefined) return dflt;
  const out: string[] = [];
  for (const entry of splitList(v)) {
    const bare = entry.startsWith('[') && entry.endsWith(']') ? entry.slice(1, -1) : entry;
    if (!ipaddr.isValid(bare) || (!bare.includes(':') && !ipaddr.IPv4.isValidFourPartDecimal(bare))) {
      throw new ConfigError(
        name,
        `"${entry}" is not an IP address to bind to (list addresses like 0.0.0.0, ::, 192.0.2.10 or 2001:db8::10, separated by commas)`,
      );
    }
    out.push(bare);
  }
  if (out.length === 0) throw new ConfigError(name, 'is empty; leave it unset to listen on every interface');
  return out;
}

// The router's own Unix socket for a proxy on the same host. Refused where it would not do what it is for: a relative
// path (it would depend on the directory pm2 starts us in), a path too long for a socket, TLS mode (the router is the
// public listener then), and a mode that lets others connect (the point is that they cannot).
/** HSE_ROUTER_PROCESSES, and HSE_ROUTER_INSTANCE within it. */
function routerProcesses(env: Env, tlsMode: boolean, onSocket: boolean): { routerProcesses: number; routerInstance: number } {
  const n = positiveInt(env, 'HSE_ROUTER_PROCESSES', 1, 16);
  if (n > 1 && tlsMode) {
    throw new ConfigError(
      'HSE_ROUTER_PROCESSES',
      `is ${n}, but in TLS mode one router holds the certificate and renews it; more than one router process is for a plain HTTP listener (proxy mode)`,
    );
  }
  if (n > 1 && onSocket) {
    throw new ConfigError(
      'HSE_ROUTER_PROCESSES',
      `is ${n}, but HSE_LISTEN_SOCKET is one socket file with one listener; several router processes share a TCP port (unset HSE_LISTEN_SOCKET or use 1)`,
    );
  }
  const instance = positiveInt(env, 'HSE_ROUTER_INSTANCE', 1, 16);
  if (instance > n)
    throw new ConfigError('HSE_ROUTER_INSTANCE', `is ${instance}, more than HSE_ROUTER_PROCESSES (${n}); it is set by the supervisor, leave it unset`);
  return { routerProcesses: n, routerInstance: instance };
}

function listenSocket(env: Env, tlsMode: boolean): { path: string | null; mode: number; group: string | null } {
  const file = get(env, 'HSE_LISTEN_SOCKET') ?? null;
  const modeText = get(env, 'HSE_LISTEN_SOCKET_MODE');
  const group = get(env, 'HSE_LISTEN_SOCKET_GROUP') ?? null;
  if (file === null) {
    if (modeText !== undefined) throw new ConfigError('HSE_LISTEN_SOCKET_MODE', 'only applies with HSE_LISTEN_SOCKET (the router listening on a Unix socket)');
    if (group !== null) throw new ConfigError('HSE_LISTEN_SOCKET_GROUP', 'only applies with HSE_LISTEN_SOCKET (the router listening on a Unix socket)');
    return { path: null, mode: 0o660, group: null };
  }
  if (!path.isAbsolute(file)) throw new ConfigError('HSE_LISTEN_SOCKET', `"${file}" must be an absolute path (for example /run/hse/router.sock)`);
  if (Buffer.byteLength(file) > 107)
    throw new ConfigError('HSE_LISTEN_SOCKET', `"${file}" is too long for a Unix socket path (107 bytes); choose a shorter one`);
  if (tlsMode) {
    throw new ConfigError(
      'HSE_LISTEN_SOCKET',
      'is for a reverse proxy on the same host (proxy mode: HSE_TLS=off); in TLS mode the router itself listens on ports 80 and 443',
    );
  }
  let mode = 0o660;
  if (modeText !== undefined) {
    if (!/^0?[0-7]{3}$/.test(modeText)) throw new ConfigError('HSE_LISTEN_SOCKET_MODE', `"${modeText}" is not an octal mode like 660 or 600`);
    mode = Number.parseInt(modeText, 8);
    if ((mode & 0o007) !== 0) {
      throw new ConfigError('HSE_LISTEN_SOCKET_MODE', `"${modeText}" lets others connect, which is what the socket is there to prevent; use 660 or 600`);
    }
    if ((mode & 0o600) !== 0o600) throw new ConfigError('HSE_LISTEN_SOCKET_MODE', `"${modeText}" must give the owner read and write (6 first), as in 660`);
  }
  if (group !== null && !/^([a-z_][a-z0-9_.-]*\$?|\d+)$/i.test(group)) {
    throw new ConfigError('HSE_LISTEN_SOCKET_GROUP', `"${group}" is not a group name or number`);
  }
  return { path: file, mode, group };
}

function publicUrl(env: Env): URL {
  const name = 'HSE_PUBLIC_URL';
  // Unset: a local try-out on this machine, at the port the router actually listens on.
  const v = get(env, name) ?? `http://localhost:${port(env, 'HSE_HTTP_PORT', 8080)}`;
  let u: URL;
  try {
    u = new URL(v);
  } catch {
    throw new ConfigError(name, `"${v}" is not a URL (expected e.g. https://vpn.example.com)`);
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new ConfigError(name, `"${v}" must start with http:// or https://`);
  if (u.username || u.password) throw new ConfigError(name, `"${v}" must not contain a user name or password`);
  if (u.pathname !== '/' || u.search || u.hash) {
    throw new ConfigError(name, `"${v}" must be the bare origin, with no path, query or fragment (clients add /key, /ts2021 themselves)`);
  }
  if (u.hostname === '') throw new ConfigError(name, `"${v}" has no host name`);
  return u;
}

function hostName(env: Env, name: string): string | null {
  const v = get(env, name);
  if (v === undefined) return null;
  const bare = v.startsWith('[') && v.endsWith(']') ? v.slice(1, -1) : v;
  if (ipaddr.isValid(bare) || /^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*\.?$/i.test(bare)) {
    return bare;
  }
  throw new ConfigError(name, `"${v}" is not a host name or IP address`);
}

function trustedProxies(env: Env, any: boolean, warnings: string[]): TrustedProxies {
  const name = 'HSE_TRUSTED_PROXIES';
  const ranges: TrustedRange[] = [];
  for (const entry of splitList(env[name] ?? '')) {
    let r: TrustedRange;
    try {
      r = parseEntry(entry);
    } catch (e) {
      if (e instanceof TrustedProxyError) throw new ConfigError(name, e.message);
      throw e;
    }
    if (r.coversAll && !any) {
      throw new ConfigError(
        name,
        `"${entry}" trusts every ${r.coversAll} address, so any client could forge its address; list only your proxy (a /32 or /128), or set HSE_TRUSTED_PROXIES_ANY=1 if you really mean it`,
      );
    }
    if (r.hostBits > 0) {
      warnings.push(
        `${name}: "${entry}" is wider than one host; every address in it is believed when it sends X-Forwarded-For, so it must hold no clients (prefer the proxy's own /32 or /128)`,
      );
    }
    ranges.push(r);
  }
  const together = any ? [] : familiesCoveredTogether(ranges);
  if (together.length > 0) {
    throw new ConfigError(
      name,
      `the entries together trust every ${together[0]} address, so any client could forge its address; list only your proxy (a /32 or /128), or set HSE_TRUSTED_PROXIES_ANY=1 if you really mean it`,
    );
  }
  return new TrustedProxies(ranges);
}

/** A comma/space separated list; empty when unset. */
function list(env: Env, name: string): string[] {
  return splitList(env[name] ?? '');
}

/** A comma-separated list whose entries may hold spaces (group names such as "Domain Admins"); empty when unset. */
function commaList(env: Env, name: string): string[] {
  return (env[name] ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
}

/** The path the provider redirects back to, below the console (DESIGN.md: provider callbacks live under /console). */
export const OIDC_CALLBACK_PATH = '/console/oidc/callback';

function oidcSettings(env: Env, url: URL): OidcConfig | null {
  const issuerText = get(env, 'HSE_OIDC_ISSUER');
  if (issuerText === undefined) {
    const stray = Object.keys(env).find((k) => /^HSE_OIDC_/.test(k) && get(env, k) !== undefined);
    if (stray) throw new ConfigError('HSE_OIDC_ISSUER', `is unset, but ${stray} is set; set HSE_OIDC_ISSUER to your provider's issuer URL, or unset ${stray}`);
    return null;
  }
  let issuer: URL;
  try {
    issuer = new URL(issuerText);
  } catch {
    throw new ConfigError('HSE_OIDC_ISSUER', `"${issuerText}" is not a URL (expected e.g. https://id.example.com/realms/staff)`);
  }
  if (issuer.protocol !== 'https:') throw new ConfigError('HSE_OIDC_ISSUER', `"${issuerText}" must start with https:// (tokens are fetched from it)`);
  if (issuer.search || issuer.hash || issuer.username || issuer.password) {
    throw new ConfigError('HSE_OIDC_ISSUER', `"${issuerText}" must be the issuer identifier alone, with no query, fragment or credentials`);
  }
  const clientId = get(env, 'HSE_OIDC_CLIENT_ID');
  if (clientId === undefined)
    throw new ConfigError('HSE_OIDC_CLIENT_ID', 'is required with HSE_OIDC_ISSUER: the client id this server is registered under at the provider');
  const secret = get(env, 'HSE_OIDC_CLIENT_SECRET');
  const secretFile = get(env, 'HSE_OIDC_CLIENT_SECRET_FILE');
  if (secret !== undefined && secretFile !== undefined) {
    throw new ConfigError('HSE_OIDC_CLIENT_SECRET_FILE', 'set either HSE_OIDC_CLIENT_SECRET or HSE_OIDC_CLIENT_SECRET_FILE, not both');
  }
  let clientSecret = secret;
  if (secretFile !== undefined) {
    let text: string;
    try {
      text = fs.readFileSync(secretFile, 'utf8');
    } catch (e) {
      const why = (e as NodeJS.ErrnoException).code ?? (e as Error).message;
      throw new ConfigError('HSE_OIDC_CLIENT_SECRET_FILE', `cannot read "${secretFile}" (${why}); check the path and that this user may read it`);
    }
    // Secret files usually end with a newline that is not part of the secret.
    clientSecret = text.replace(/\r?\n$/, '');
    if (clientSecret === '') throw new ConfigError('HSE_OIDC_CLIENT_SECRET_FILE', `"${secretFile}" is empty`);
  }
  if (clientSecret === undefined) {
    throw new ConfigError(
      'HSE_OIDC_CLIENT_SECRET',
      'is required with HSE_OIDC_ISSUER (or HSE_OIDC_CLIENT_SECRET_FILE): the client secret the provider gave this server',
    );
  }
  const scopes = list(env, 'HSE_OIDC_SCOPES');
  if (scopes.length > 0 && !scopes.includes('openid')) {
    throw new ConfigError('HSE_OIDC_SCOPES', `"${scopes.join(' ')}" lacks "openid", without which the provider sends no ID token`);
  }
  const domains = list(env, 'HSE_OIDC_ALLOWED_DOMAINS').map((d) => d.toLowerCase().replace(/^@/, ''));
  for (const d of domains) {
    if (!/^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)+$/.test(d)) {
      throw new ConfigError('HSE_OIDC_ALLOWED_DOMAINS', `"${d}" is not an e-mail domain (for example example.com)`);
    }
  }
  const users = list(env, 'HSE_OIDC_ALLOWED_USERS').map((u) => u.toLowerCase());
  for (const u of users) {
    if (!/^[^@\s]+@[^@\s]+$/.test(u)) throw new ConfigError('HSE_OIDC_ALLOWED_USERS', `"${u}" is not an e-mail address`);
  }
  const groupsClaim = get(env, 'HSE_OIDC_GROUPS_CLAIM') ?? 'groups';
  if (!/^[A-Za-z0-9_:/-]+(\.[A-Za-z0-9_:/-]+)*$/.test(groupsClaim)) {
    throw new ConfigError('HSE_OIDC_GROUPS_CLAIM', `"${groupsClaim}" is not a claim name or dotted path (for example groups or realm_access.roles)`);
  }
  const adminGroups = commaList(env, 'HSE_OIDC_ADMIN_GROUPS');
  const consolePasswords = bool(env, 'HSE_OIDC_CONSOLE_PASSWORDS', true);
  if (!consolePasswords && adminGroups.length === 0) {
    throw new ConfigError(
      'HSE_OIDC_CONSOLE_PASSWORDS',
      'is off but HSE_OIDC_ADMIN_GROUPS is empty, so nobody could administer the console; name the provider group(s) of your administrators first',
    );
  }
  return {
    issuer,
    clientId,
    clientSecret,
    scopes: scopes.length > 0 ? scopes : ['openid', 'profile', 'email'],
    allowedDomains: domains,
    allowedUsers: users,
    allowedGroups: commaList(env, 'HSE_OIDC_ALLOWED_GROUPS'),
    groupsClaim,
    requireVerifiedEmail: bool(env, 'HSE_OIDC_REQUIRE_VERIFIED_EMAIL', true),
    adminGroups,
    auditorGroups: commaList(env, 'HSE_OIDC_AUDITOR_GROUPS'),
    consolePasswords,
    operatorApproval: bool(env, 'HSE_OIDC_OPERATOR_APPROVAL', false),
    displayName: get(env, 'HSE_OIDC_NAME') ?? issuer.hostname,
    redirectUri: `${url.origin}${OIDC_CALLBACK_PATH}`,
  };
}

const DURATION_UNITS: Record<string, number> = { '': 1, s: 1, m: 60, h: 3600, d: 86_400 };
const MAX_KEY_EXPIRY_S = 3650 * 86_400;

// A node key's lifetime: "180d", "12h", "30m", "90s" or plain seconds; "0" = never. Below a minute a device would
// expire before it finished joining; above ten years "never" says what is meant.
function keyExpiry(env: Env, name: string, dflt: number): number {
  const v = get(env, name);
  if (v === undefined) return dflt;
  const m = /^(\d{1,10})\s*([smhd]?)$/i.exec(v);
  if (!m) throw new ConfigError(name, `"${v}" is not a duration (write 180d, 12h, 30m, or plain seconds; 0 = keys never expire)`);
  const seconds = Number(m[1]) * DURATION_UNITS[m[2].toLowerCase()];
  if (seconds === 0) return 0;
  if (seconds < 60 || seconds > MAX_KEY_EXPIRY_S) {
    throw new ConfigError(name, `"${v}" is outside 1 minute to 3650 days (use 0 for keys that never expire)`);
  }
  return seconds;
}

// The metrics listener: "127.0.0.1:9090", "[::1]:9090", "0.0.0.0:9090"; "off" or unset = no metrics. A bare port is
// refused rather than guessed at: metrics say a lot about the tailnet, so where they listen is the operator's choice.
function metricsListen(env: Env, routerPort: number, routerAddress: string): { host: string; port: number } | null {
  const name = 'HSE_METRICS_LISTEN';
  const v = get(env, name);
  if (v === undefined || v.toLowerCase() === 'off') return null;
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|([0-9.]+)):(\d{1,5})$/.exec(v);
  const host = m ? (m[1] ?? m[2]) : '';
  const port = m ? Number(m[3]) : 0;
  if (!m || !ipaddr.isValid(host) || (!host.includes(':') && !ipaddr.IPv4.isValidFourPartDecimal(host)) || port < 1 || port > 65535) {
    throw new ConfigError(name, `"${v}" is not an address and port to listen on (for example 127.0.0.1:9090 or [::1]:9090), or off`);
  }
  if (port === routerPort && (host === routerAddress || host === '0.0.0.0' || host === '::' || routerAddress === '0.0.0.0')) {
    throw new ConfigError(name, `"${v}" is the router's own port (HSE_HTTP_PORT); metrics need a listener of their own`);
  }
  return { host, port };
}

type DerpSettings = Pick<Config, 'derpNodes' | 'derpRegions' | 'derpMeshKey' | 'derpMeshKeyFile' | 'derpMeshWith'>;

/** One entry of a DERP setting through its parser, a DerpSettingError becoming a refusal of `name`. */
function derpEntry<T>(name: string, parse: () => T): T {
  try {
    return parse();
  } catch (e) {
    if (e instanceof DerpSettingError) throw new ConfigError(name, e.message);
    throw e;
  }
}

// The relay mesh and how the DERP map lists the instances (advanced/ha.md, "Relays").
function derpSettings(env: Env, mode: string, regionId: number, stunPort: number): DerpSettings {
  const nodesText = get(env, 'HSE_DERP_NODES');
  const regions = (get(env, 'HSE_DERP_REGIONS') ?? 'one').toLowerCase();
  const keyText = get(env, 'HSE_DERP_MESH_KEY');
  const keyFile = get(env, 'HSE_DERP_MESH_KEY_FILE') ?? null;
  const withText = get(env, 'HSE_DERP_MESH_WITH');
  if (mode === 'public') {
    for (const name of ['HSE_DERP_NODES', 'HSE_DERP_MESH_KEY', 'HSE_DERP_MESH_KEY_FILE', 'HSE_DERP_MESH_WITH']) {
      if (get(env, name) !== undefined) throw new ConfigError(name, "applies to this image's own relay; it means nothing with HSE_DERP_MODE=public");
    }
  }
  if (regions !== 'one' && regions !== 'per-node') {
    throw new ConfigError('HSE_DERP_REGIONS', `"${regions}" is not "one" (the nodes form one region) or "per-node" (each node is its own region)`);
  }
  let nodes: DerpNodeAddress[] | null = null;
  if (nodesText !== undefined) {
    if (get(env, 'HSE_STUN_HOST') !== undefined) {
      throw new ConfigError('HSE_STUN_HOST', 'applies to the single-relay map only; with HSE_DERP_NODES give each node its STUN address (…?stun=HOST:PORT)');
    }
    nodes = splitList(nodesText).map((e) => derpEntry('HSE_DERP_NODES', () => parseDerpNode(e, stunPort)));
    const seen = new Set<string>();
    for (const n of nodes) {
      const id = `${n.host.toLowerCase()}:${n.derpPort}`;
      if (seen.has(id)) throw new ConfigError('HSE_DERP_NODES', `lists ${id} twice`);
      seen.add(id);
    }
  }
  if (regions === 'per-node') {
    if (nodes === null) throw new ConfigError('HSE_DERP_REGIONS', 'per-node needs the list of relays in HSE_DERP_NODES');
    if (regionId + nodes.length - 1 > 999) {
      throw new ConfigError('HSE_DERP_REGION_ID', `${regionId} leaves no room for ${nodes.length} regions numbered upwards to at most 999`);
    }
  }
  if (keyText !== undefined && keyFile !== null) {
    throw new ConfigError('HSE_DERP_MESH_KEY', 'set HSE_DERP_MESH_KEY or HSE_DERP_MESH_KEY_FILE, not both');
  }
  const meshKey = keyText === undefined ? null : derpEntry('HSE_DERP_MESH_KEY', () => parseMeshKey(keyText));
  const meshWith = withText === undefined ? [] : splitList(withText).map((e) => derpEntry('HSE_DERP_MESH_WITH', () => parseMeshPeer(e)));
  if (meshWith.length > 0 && meshKey === null && keyFile === null) {
    throw new ConfigError('HSE_DERP_MESH_WITH', 'needs the mesh key its peers share: set HSE_DERP_MESH_KEY or HSE_DERP_MESH_KEY_FILE');
  }
  return { derpNodes: nodes, derpRegions: regions, derpMeshKey: meshKey, derpMeshKeyFile: keyFile, derpMeshWith: meshWith };
}

const LOG_LEVELS: LogLevel[] = ['debug', 'info', 'warn', 'error'];

/** Parses and validates the environment. Throws ConfigError on the first refused setting. */
export function parseConfig(env: Env, cwd = process.cwd()): Config {
  const warnings: string[] = [];
  const url = publicUrl(env);
  const tls = bool(env, 'HSE_TLS', true);
  const https = url.protocol === 'https:';
  const any = bool(env, 'HSE_TRUSTED_PROXIES_ANY', false);
  const derpModeRaw = (get(env, 'HSE_DERP_MODE') ?? 'own').toLowerCase();
  if (derpModeRaw !== 'own' && derpModeRaw !== 'public') {
    throw new ConfigError('HSE_DERP_MODE', `"${derpModeRaw}" is not "own" (this image's relay) or "public" (Tailscale's public relays)`);
  }
  const dataDir = path.resolve(cwd, get(env, 'HSE_DATA_DIR') ?? 'data');
  const runDir = path.resolve(cwd, get(env, 'HSE_RUN_DIR') ?? path.join(dataDir, 'run'));
  // A Unix socket path is limited to 107 bytes; the longest we create is run/coordination-admin.sock.
  if (Buffer.byteLength(path.join(runDir, 'coordination-admin.sock')) > 107) {
    throw new ConfigError(
      get(env, 'HSE_RUN_DIR') ? 'HSE_RUN_DIR' : 'HSE_DATA_DIR',
      `"${runDir}" is too long for Unix socket paths (107 bytes); choose a shorter directory`,
    );
  }
  const redisUrl = get(env, 'HSE_REDIS_URL') ?? null;
  if (redisUrl !== null) {
    let u: URL;
    try {
      u = new URL(redisUrl);
    } catch {
      throw new ConfigError('HSE_REDIS_URL', `"${redisUrl}" is not a URL (expected redis://host:6379/0, rediss://… or unix:///path/to/redis.sock)`);
    }
    if (!['redis:', 'rediss:', 'unix:'].includes(u.protocol)) {
      throw new ConfigError('HSE_REDIS_URL', `"${redisUrl}" must start with redis://, rediss:// or unix://`);
    }
  }
  const sentinels = redisSentinels(env);
  if (sentinels.length > 0 && redisUrl !== null) {
    throw new ConfigError('HSE_REDIS_SENTINELS', 'set either HSE_REDIS_URL (one Redis) or HSE_REDIS_SENTINELS (Sentinel finds the primary), not both');
  }
  const sentinelName = get(env, 'HSE_REDIS_SENTINEL_NAME') ?? 'mymaster';
  if (!/^[A-Za-z0-9._-]{1,64}$/.test(sentinelName)) {
    throw new ConfigError('HSE_REDIS_SENTINEL_NAME', `"${sentinelName}" is not a Sentinel master name (letters, digits, . _ -)`);
  }
  const logLevel = (get(env, 'HSE_LOG_LEVEL') ?? 'info').toLowerCase() as LogLevel;
  if (!LOG_LEVELS.includes(logLevel)) throw new ConfigError('HSE_LOG_LEVEL', `"${logLevel}" is not one of ${LOG_LEVELS.join(', ')}`);
  const baseDomain = (get(env, 'HSE_BASE_DOMAIN') ?? 'hse.internal').toLowerCase().replace(/\.$/, '');
  if (!/^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)+$/.test(baseDomain)) {
    throw new ConfigError('HSE_BASE_DOMAIN', `"${baseDomain}" is not a DNS domain with at least two labels (for example tailnet.example.com)`);
  }
  if (baseDomain === url.hostname.toLowerCase()) {
    throw new ConfigError('HSE_BASE_DOMAIN', `"${baseDomain}" must differ from the public URL's host, or MagicDNS would hide the server from its own clients`);
  }
  const proxyBind = bindAddress(env, 'HSE_PROXY_BIND', '127.0.0.1');
  const consoleUser = get(env, 'HSE_CONSOLE_USER') ?? 'admin';
  if (!/^[A-Za-z0-9._@-]{1,64}$/.test(consoleUser)) {
    throw new ConfigError('HSE_CONSOLE_USER', `"${consoleUser}" may use only letters, digits and . _ @ - (1 to 64 characters)`);
  }
  const acmeDirectoryUrl = get(env, 'HSE_ACME_DIRECTORY_URL') ?? 'https://acme-v02.api.letsencrypt.org/directory';
  try {
    new URL(acmeDirectoryUrl);
  } catch {
    throw new ConfigError('HSE_ACME_DIRECTORY_URL', `"${acmeDirectoryUrl}" is not a URL`);
  }
  const certFile = get(env, 'HSE_TLS_CERT_FILE') ?? null;
  const keyFile = get(env, 'HSE_TLS_KEY_FILE') ?? null;
  if ((certFile === null) !== (keyFile === null)) {
    throw new ConfigError(
      certFile === null ? 'HSE_TLS_CERT_FILE' : 'HSE_TLS_KEY_FILE',
      'HSE_TLS_CERT_FILE and HSE_TLS_KEY_FILE go together; set both or neither (neither = ACME)',
    );
  }
  const regionId = positiveInt(env, 'HSE_DERP_REGION_ID', 900, 999);
  const socket = listenSocket(env, https && tls);
  const routers = routerProcesses(env, https && tls, socket.path !== null);
  const stunPort = port(env, 'HSE_STUN_PORT', 3478);
  const derp = derpSettings(env, derpModeRaw, regionId, stunPort);
  const httpPort = port(env, 'HSE_HTTP_PORT', 8080);
  const listenAddress = get(env, 'HSE_LISTEN_ADDRESS') === undefined ? proxyBind : bindAddress(env, 'HSE_LISTEN_ADDRESS', proxyBind);
  return {
    publicUrl: url,
    publicOrigin: url.origin,
    tls,
    proxyMode: https && !tls,
    tlsMode: https && tls,
    secure: https,
    trustedProxies: trustedProxies(env, any, warnings),
    trustedProxiesAny: any,
    httpPort,
    httpsPort: port(env, 'HSE_HTTPS_PORT', 443),
    tlsHttpPort: port(env, 'HSE_TLS_HTTP_PORT', 80),
    proxyBind,
    listenAddress,
    listenSocket: socket.path,
    listenSocketMode: socket.mode,
    listenSocketGroup: socket.group,
    ...routers,
    headerTimeoutSeconds: positiveInt(env, 'HSE_HEADER_TIMEOUT', 30, 3600),
    derpMode: derpModeRaw,
    derpVerifyClients: bool(env, 'HSE_DERP_VERIFY_CLIENTS', true),
    stunPort,
    stunHost: hostName(env, 'HSE_STUN_HOST'),
    stunListen: listenAddresses(env, 'HSE_STUN_LISTEN', ['0.0.0.0', '::']),
    // 32 is what Tailscale's own relays hold: enough for a burst, small enough that a stalled client costs little.
    derpSendQueueDepth: positiveInt(env, 'HSE_DERP_SEND_QUEUE_DEPTH', 32, 4096),
    derpRegionId: regionId,
    derpRegionCode: get(env, 'HSE_DERP_REGION_CODE') ?? 'hse',
    derpRegionName: get(env, 'HSE_DERP_REGION_NAME') ?? 'Self-hosted relay',
    ...derp,
    dataDir,
    runDir,
    redisUrl,
    redisSentinels: sentinels,
    redisSentinelName: sentinelName,
    redisPassword: get(env, 'HSE_REDIS_PASSWORD') ?? null,
    redisSentinelPassword: get(env, 'HSE_REDIS_SENTINEL_PASSWORD') ?? null,
    redisWaitReplicas: nonNegativeInt(env, 'HSE_REDIS_WAIT_REPLICAS', 0, 16),
    consoleUser,
    consolePassword: get(env, 'HSE_CONSOLE_PASSWORD') ?? null,
    consolePasswordFile: get(env, 'HSE_CONSOLE_PASSWORD_FILE') ?? null,
    baseDomain,
    logLevel,
    activityRetentionDays: positiveInt(env, 'HSE_ACTIVITY_RETENTION_DAYS', 90, 3650),
    activityMaxEntries: positiveInt(env, 'HSE_ACTIVITY_MAX_ENTRIES', 100_000, 10_000_000),
    ephemeralTimeoutSeconds: positiveInt(env, 'HSE_EPHEMERAL_TIMEOUT', 120, 86_400 * 30),
    taildrop: bool(env, 'HSE_TAILDROP', true),
    policyFile: get(env, 'HSE_POLICY_FILE') === undefined ? null : path.resolve(cwd, get(env, 'HSE_POLICY_FILE') as string),
    nodeKeyExpirySeconds: keyExpiry(env, 'HSE_NODE_KEY_EXPIRY', 180 * 86_400),
    tlsCertFile: certFile,
    tlsKeyFile: keyFile,
    acmeDirectoryUrl,
    acmeEmail: get(env, 'HSE_ACME_EMAIL') ?? null,
    oidc: oidcSettings(env, url),
    metricsListen: metricsListen(env, httpPort, listenAddress),
    warnings,
  };
}

/**
 * For a process's main: parse the environment or print one line and exit 2. Warnings go to stderr once per process.
 */
export function loadConfig(processName: string, env: Env = process.env): Config {
  try {
    const cfg = parseConfig(env);
    for (const w of cfg.warnings) process.stderr.write(`${new Date().toISOString()} WARN ${processName}: ${w}\n`);
    return cfg;
  } catch (e) {
    if (e instanceof ConfigError) {
      process.stderr.write(`hse ${processName}: refused configuration: ${e.variable}: ${e.reason}\n`);
      process.exit(2);
    }
    throw e;
  }
}
