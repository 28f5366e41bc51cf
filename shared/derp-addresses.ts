// The words of the relay-mesh and DERP-map settings, parsed: a mesh key, a mesh peer, a DERP node. Pure functions of
// one entry; shared/config.ts reads the variables and turns a DerpSettingError into a refusal naming the variable.
//
//   mesh key   64 hex digits (32 bytes), whitespace trimmed: the format of derper's --mesh-psk-file
//              (tailscale types/key/derp.go ParseDERPMesh). All zeros is no key at all to derper, so it is refused.
//   mesh peer  as derper's --mesh-with: "host" or "host:port" = https://host[:port]/derp; "host/dial-host" = TLS and
//              HTTP for "host", TCP to "dial-host" at the same port (cmd/derper/mesh.go). Also a URL,
//              "http://10.0.0.2:8080" or "https://hse-b.example.com": an instance's router, reached directly (plain
//              HTTP only inside a private network: the mesh key is sealed to whatever key answers, see
//              advanced/ha.md, "Relays").
//   DERP node  where clients reach one relay: "https://derp-b.example.com", "http://127.0.0.1:8081" or a bare
//              "host[:port]" (https), with an optional "?stun=PORT", "?stun=HOST:PORT" or "?stun=off".
import ipaddr from 'ipaddr.js';

export class DerpSettingError extends Error {}

export interface MeshPeerAddress {
  /** The entry as the operator wrote it, for logs. */
  entry: string;
  /** http(s)://host[:port]/derp */
  url: string;
  /** Host to open the TCP connection to instead of the URL's (derper's "host/dial-host"); null = the URL's. */
  dialHost: string | null;
}

export interface DerpNodeAddress {
  /** Host name or IP literal (IPv6 without brackets) clients connect to for DERP. */
  host: string;
  derpPort: number;
  /** Where clients send STUN for this node: null = nowhere; host null = the node's own host. */
  stun: { host: string | null; port: number } | null;
}

const HOST_NAME = /^(?=.{1,253}$)([a-z0-9]([a-z0-9_-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9_-]{0,61}[a-z0-9])?)*\.?$/i;

function bare(host: string): string {
  return host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
}

function validHost(host: string): boolean {
  const b = bare(host);
  return ipaddr.isValid(b) || HOST_NAME.test(b);
}

/** The 32-byte mesh key from its text, or a DerpSettingError saying what is wrong. */
export function parseMeshKey(text: string): Buffer {
  const t = text.trim();
  if (!/^[0-9a-fA-F]{64}$/.test(t)) {
    throw new DerpSettingError(
      `must be 64 hexadecimal digits (32 bytes, as derper's --mesh-psk-file), got ${t.length} characters; make one with: openssl rand -hex 32`,
    );
  }
  const key = Buffer.from(t, 'hex');
  if (key.every((b) => b === 0)) throw new DerpSettingError('is all zeros, which derper treats as no key; make one with: openssl rand -hex 32');
  return key;
}

/** An http(s) origin with an optional /derp path, or a bare host[:port] taken as https. */
function parseOrigin(entry: string, allowDerpPath: boolean): URL {
  const withScheme = entry.includes('://') ? entry : `https://${entry}`;
  let u: URL;
  try {
    u = new URL(withScheme);
  } catch {
    throw new DerpSettingError(`"${entry}" is not a host, host:port or URL`);
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new DerpSettingError(`"${entry}" must be http:// or https://`);
  if (u.username || u.password) throw new DerpSettingError(`"${entry}" must not contain a user name or password`);
  if (u.hash || (u.pathname !== '/' && !(allowDerpPath && u.pathname === '/derp'))) {
    throw new DerpSettingError(`"${entry}" must be a bare origin${allowDerpPath ? ' (or end in /derp)' : ''}, with no other path or fragment`);
  }
  if (!validHost(u.hostname)) throw new DerpSettingError(`"${entry}" has no valid host name`);
  return u;
}

export function parseMeshPeer(entry: string): MeshPeerAddress {
  if (entry.includes('://')) {
    const u = parseOrigin(entry, true);
    if (u.search) throw new DerpSettingError(`"${entry}" must not carry a query`);
    return { entry, url: `${u.origin}/derp`, dialHost: null };
  }
  const parts = entry.split('/');
  if (parts.length > 2) throw new DerpSettingError(`"${entry}" has too many "/": write host, host:port, host/dial-host or a URL`);
  const u = parseOrigin(parts[0], false);
  if (u.search) throw new DerpSettingError(`"${entry}" must not carry a query`);
  const dialHost = parts.length === 2 ? parts[1] : null;
  if (dialHost !== null && !validHost(dialHost)) throw new DerpSettingError(`"${entry}": "${dialHost}" is not a host name or IP address to dial`);
  return { entry, url: `${u.origin}/derp`, dialHost: dialHost === null ? null : bare(dialHost) };
}

function parsePort(text: string, entry: string): number {
  if (!/^\d+$/.test(text) || Number(text) < 1 || Number(text) > 65535) throw new DerpSettingError(`"${entry}": "${text}" is not a port (1 to 65535)`);
  return Number(text);
}

export function parseDerpNode(entry: string, defaultStunPort: number): DerpNodeAddress {
  const u = parseOrigin(entry, false);
  let stun: DerpNodeAddress['stun'] = { host: null, port: defaultStunPort };
  const params = [...u.searchParams.keys()];
  if (params.some((k) => k !== 'stun') || u.searchParams.getAll('stun').length > 1) {
    throw new DerpSettingError(`"${entry}": the only query it may carry is one ?stun=PORT, ?stun=HOST:PORT or ?stun=off`);
  }
  const s = u.searchParams.get('stun');
  if (s !== null) {
    if (s.toLowerCase() === 'off') stun = null;
    else if (/^\d+$/.test(s)) stun = { host: null, port: parsePort(s, entry) };
    else {
      const m = /^(\[[^\]]+\]|[^:]+):(\d+)$/.exec(s);
      if (!m || !validHost(m[1])) throw new DerpSettingError(`"${entry}": stun=${s} is not PORT, HOST:PORT or off`);
      stun = { host: bare(m[1]), port: parsePort(m[2], entry) };
    }
  }
  const host = bare(u.hostname);
  const derpPort = u.port ? Number(u.port) : u.protocol === 'https:' ? 443 : 80;
  return { host, derpPort, stun };
}
