// The one place HSE_* settings are read and validated. Every process calls loadConfig() at start; nothing else reads
// process.env. A refused setting is reported as one line naming the variable and the reason, and the process exits
// with status 2, which the supervisor (ecosystem.config.js, stop_exit_codes) treats as "do not restart".
import path from 'node:path';
import ipaddr from 'ipaddr.js';
import { DerpSettingError, type DerpNodeAddress, type MeshPeerAddress, parseDerpNode, parseMeshKey, parseMeshPeer } from './derp-addresses.ts';
import { familiesCoveredTogether, TrustedProxies, TrustedProxyError, parseEntry, splitList, type TrustedRange } from './trusted-proxies.ts';

export type DerpMode = 'own' | 'public';

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
  consoleUser: string;
  consolePassword: string | null;
  consolePasswordFile: string | null;
  baseDomain: string;
  logLevel: LogLevel;
  activityRetentionDays: number;
  activityMaxEntries: number;
  /** Seconds an ephemeral node may stay disconnected before it is deleted. */
  ephemeralTimeoutSeconds: number;
  /** TLS mode: certificate files given by the operator, or ACME. */
  tlsCertFile: string | null;
  tlsKeyFile: string | null;
  acmeDirectoryUrl: string;
  acmeEmail: string | null;
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

// The relay mesh and how the DERP map lists the instances (docs/relay-mesh.md).
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
  const stunPort = port(env, 'HSE_STUN_PORT', 3478);
  const derp = derpSettings(env, derpModeRaw, regionId, stunPort);
  return {
    publicUrl: url,
    publicOrigin: url.origin,
    tls,
    proxyMode: https && !tls,
    tlsMode: https && tls,
    secure: https,
    trustedProxies: trustedProxies(env, any, warnings),
    trustedProxiesAny: any,
    httpPort: port(env, 'HSE_HTTP_PORT', 8080),
    httpsPort: port(env, 'HSE_HTTPS_PORT', 443),
    tlsHttpPort: port(env, 'HSE_TLS_HTTP_PORT', 80),
    proxyBind,
    listenAddress: get(env, 'HSE_LISTEN_ADDRESS') === undefined ? proxyBind : bindAddress(env, 'HSE_LISTEN_ADDRESS', proxyBind),
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
    consoleUser,
    consolePassword: get(env, 'HSE_CONSOLE_PASSWORD') ?? null,
    consolePasswordFile: get(env, 'HSE_CONSOLE_PASSWORD_FILE') ?? null,
    baseDomain,
    logLevel,
    activityRetentionDays: positiveInt(env, 'HSE_ACTIVITY_RETENTION_DAYS', 90, 3650),
    activityMaxEntries: positiveInt(env, 'HSE_ACTIVITY_MAX_ENTRIES', 100_000, 10_000_000),
    ephemeralTimeoutSeconds: positiveInt(env, 'HSE_EPHEMERAL_TIMEOUT', 120, 86_400 * 30),
    tlsCertFile: certFile,
    tlsKeyFile: keyFile,
    acmeDirectoryUrl,
    acmeEmail: get(env, 'HSE_ACME_EMAIL') ?? null,
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
