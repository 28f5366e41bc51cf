// The small languages inside the policy's strings: selectors ("group:eng", "tag:db", "alice@", "10.0.0.0/8", "*",
// "autogroup:member"), "selector:ports" destinations, port lists, protocol names, and grants' "ip" entries.
//
// Reference: Tailscale's policy-file syntax reference (targets and selectors, ACL dst and proto, grant ip) and the
// refusals its control plane gives (captured in headscale's compatibility test data). hse differences:
//   - a user is "alice@" (login name), "alice@example.com" (the user's address) or "user:*@example.com" (every user
//     with an address in the domain); a bare "alice" is a host name, and when no such host exists the error suggests
//     "alice@";
//   - a selector with spaces around it is refused, not trimmed;
//   - ports on protocols without ports (icmp, gre, …) must be "*".
import { type Interval, parseAddr, parsePrefix } from './ip.ts';

export type Selector =
  | { kind: 'all' }
  | { kind: 'user'; login: string }
  | { kind: 'group'; name: string }
  | { kind: 'tag'; name: string }
  | { kind: 'host'; name: string }
  | { kind: 'prefix'; interval: Interval; text: string }
  | { kind: 'autogroup'; name: 'member' | 'tagged' | 'self' | 'internet' | 'danger-all' | 'nonroot' };

export type Parsed<T> = { ok: true; value: T } | { ok: false; reason: string };

const ok = <T>(value: T): Parsed<T> => ({ ok: true, value });
const no = <T>(reason: string): Parsed<T> => ({ ok: false, reason });

const AUTOGROUPS = new Set(['member', 'tagged', 'self', 'internet', 'danger-all', 'nonroot']);
const UNSUPPORTED_AUTOGROUPS: Record<string, string> = {
  admin: 'hse has no user roles yet, so autogroup:admin is not supported',
  owner: 'hse has no user roles yet, so autogroup:owner is not supported',
  'it-admin': 'hse has no user roles yet, so autogroup:it-admin is not supported',
  'network-admin': 'hse has no user roles yet, so autogroup:network-admin is not supported',
  'billing-admin': 'hse has no user roles yet, so autogroup:billing-admin is not supported',
  auditor: 'hse has no user roles yet, so autogroup:auditor is not supported',
  shared: 'hse has no node sharing, so autogroup:shared is not supported',
};

const TAG_NAME = /^[A-Za-z][A-Za-z0-9_-]*$/;
const HOST_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;
const USER_LOGIN = /^[^\s@:]+@[^\s@:]*$/;

export function tagNameProblem(tag: string): string | null {
  if (!tag.startsWith('tag:')) return `${tag} is not a tag (tags start with "tag:")`;
  if (!TAG_NAME.test(tag.slice(4))) return `${tag}: a tag name starts with a letter after "tag:" and has only letters, digits, "-" and "_"`;
  return null;
}

/** One selector, as it may appear in src, dst (before the ports), tagOwners, autoApprovers, ssh or nodeAttrs. */
export function parseSelector(s: string): Parsed<Selector> {
  if (s !== s.trim() || s === '') return no(s === '' ? 'an empty string is not a selector' : `"${s}" has spaces around it`);
  if (s === '*') return ok({ kind: 'all' });
  if (s.startsWith('group:')) {
    if (s.length === 6) return no('"group:" needs a name after it');
    return ok({ kind: 'group', name: s });
  }
  if (s.startsWith('tag:')) {
    const problem = tagNameProblem(s);
    return problem ? no(problem) : ok({ kind: 'tag', name: s });
  }
  if (s.startsWith('autogroup:')) {
    const name = s.slice(10);
    if (AUTOGROUPS.has(name)) return ok({ kind: 'autogroup', name: name as 'member' });
    return no(UNSUPPORTED_AUTOGROUPS[name] ?? `${s} is not an autogroup hse knows (autogroup:member, autogroup:tagged, autogroup:self, autogroup:internet)`);
  }
  if (s.startsWith('user:')) {
    // user:*@<domain>: every user whose address is in the domain.
    if (!/^user:\*@[^\s@*]+$/.test(s)) return no(`${s}: write "user:*@<domain>" for every user with an address in that domain`);
    return ok({ kind: 'user', login: s });
  }
  if (s.startsWith('localpart:')) return no(`${s}: localpart:*@<domain> names local users, in an SSH rule's "users"`);
  if (s.includes('/')) {
    const p = parsePrefix(s);
    return p.ok ? ok({ kind: 'prefix', interval: p.interval, text: s }) : no(p.reason);
  }
  const addr = parseAddr(s);
  if (addr) return ok({ kind: 'prefix', interval: addr, text: s });
  if (s.includes('@')) {
    if (!USER_LOGIN.test(s)) return no(`${s} is not a user: write the login name followed by @ ("alice@") or the user's address`);
    return ok({ kind: 'user', login: s });
  }
  if (HOST_NAME.test(s)) return ok({ kind: 'host', name: s });
  return no(`${s} is not a selector (a user "alice@", "group:…", "tag:…", a host name, an address or CIDR, "*" or "autogroup:…")`);
}

/** The text a person wrote for a selector, for messages. */
export function selectorText(sel: Selector): string {
  switch (sel.kind) {
    case 'all':
      return '*';
    case 'user':
      return sel.login;
    case 'group':
    case 'tag':
    case 'host':
      return sel.name;
    case 'prefix':
      return sel.text;
    case 'autogroup':
      return `autogroup:${sel.name}`;
  }
}

export interface PortRange {
  first: number;
  last: number;
}

export const ALL_PORTS: readonly PortRange[] = [{ first: 0, last: 65535 }];

/** "*", "22", "80,443", "8000-8100", "22,8000-8100" → ranges. Port 0 is not a port; "*" means every port. */
export function parsePorts(s: string): Parsed<PortRange[]> {
  if (s === '*') return ok([{ first: 0, last: 65535 }]);
  if (s === '') return no('no ports after the colon (write "*" for every port)');
  const out: PortRange[] = [];
  for (const part of s.split(',')) {
    const m = /^(\d{1,5})(?:-(\d{1,5}))?$/.exec(part);
    if (!m) return no(`"${part}" is not a port, a range "first-last" or "*"`);
    const first = Number(m[1]);
    const last = m[2] === undefined ? first : Number(m[2]);
    if (first < 1 || last > 65535) return no(`port ${first < 1 ? first : last} is outside 1-65535 (write "*" for every port)`);
    if (first > last) return no(`the range ${part} runs backwards`);
    out.push({ first, last });
  }
  return ok(out);
}

/** "tag:web:443" / "[fd7a::1]:22" / "fd00::/64:443" → selector text and port text (split at the last colon). */
export function splitHostPort(s: string): Parsed<{ host: string; ports: string }> {
  if (s.startsWith('[')) {
    const close = s.indexOf(']:');
    if (close < 0) return no(`${s}: after "[address]" comes ":" and the ports`);
    return ok({ host: s.slice(1, close), ports: s.slice(close + 2) });
  }
  const colon = s.lastIndexOf(':');
  if (colon < 0) return no(`${s} has no ports: write it as "${s}:*" for every port, or "${s}:22" for one`);
  return ok({ host: s.slice(0, colon), ports: s.slice(colon + 1) });
}

/** IANA numbers of the protocol names Tailscale's policy accepts. */
export const PROTOCOLS: Record<string, number> = {
  icmp: 1,
  igmp: 2,
  ipv4: 4,
  'ip-in-ip': 4,
  tcp: 6,
  egp: 8,
  igp: 9,
  udp: 17,
  gre: 47,
  esp: 50,
  ah: 51,
  'ipv6-icmp': 58,
  sctp: 132,
  fc: 133,
};

const NAME_OF: Record<number, string> = Object.fromEntries(Object.entries(PROTOCOLS).map(([k, v]) => [v, k]));

/** Protocols whose packets have ports; on any other protocol only "*" makes sense. */
export const PORTED_PROTOCOLS = new Set([6, 17, 132]);

export function protocolName(n: number): string {
  return NAME_OF[n] ?? String(n);
}

/** "tcp", "UDP", "6", "132" → number. Numbers 1-255 without leading zeros. */
export function parseProto(s: string): Parsed<number> {
  const lower = s.toLowerCase();
  if (lower in PROTOCOLS) return ok(PROTOCOLS[lower]);
  if (/^[1-9]\d{0,2}$/.test(s) && Number(s) <= 255) return ok(Number(s));
  return no(`"${s}" is not a protocol: use a name (tcp, udp, icmp, sctp, gre, esp, …) or a number 1-255`);
}

/** One grant "ip" entry: the protocol (null = TCP, UDP and ICMP, the client's default) and its ports. */
export interface IpSpec {
  proto: number | null;
  ports: PortRange[];
}

/** "*", "443", "80,443", "8000-8100", "tcp:443", "udp:53", "icmp:*", "tcp:*". */
export function parseGrantIp(s: string): Parsed<IpSpec> {
  if (s === '*') return ok({ proto: null, ports: [...ALL_PORTS] });
  const colon = s.indexOf(':');
  if (colon < 0) {
    if (/^[A-Za-z]/.test(s)) return no(`"${s}" needs ports after the protocol: write "${s}:*"`);
    const ports = parsePorts(s);
    return ports.ok ? ok({ proto: null, ports: ports.value }) : ports;
  }
  if (s.indexOf(':', colon + 1) >= 0) return no(`"${s}" has more than one colon; write "protocol:ports"`);
  const proto = parseProto(s.slice(0, colon));
  if (!proto.ok) return proto;
  const ports = parsePorts(s.slice(colon + 1));
  if (!ports.ok) return ports;
  if (!PORTED_PROTOCOLS.has(proto.value) && !isAllPorts(ports.value)) return no(`${protocolName(proto.value)} has no ports: write "${s.slice(0, colon)}:*"`);
  return ok({ proto: proto.value, ports: ports.value });
}

export function isAllPorts(p: readonly PortRange[]): boolean {
  return p.length === 1 && p[0].first === 0 && p[0].last === 65535;
}

/** "22", "80-443", "22,80" for messages; "*" for every port. */
export function portsText(p: readonly PortRange[]): string {
  if (isAllPorts(p)) return '*';
  return p.map((r) => (r.first === r.last ? String(r.first) : `${r.first}-${r.last}`)).join(',');
}

/** A local user name on the SSH side: "root", "autogroup:nonroot", or a Unix login name. */
export function sshUserProblem(u: string): string | null {
  if (u === 'root' || u === 'autogroup:nonroot') return null;
  if (u === '' || u === '*') return `"${u}" is not a local user; name the users, or use "autogroup:nonroot" for every user but root`;
  if (u.startsWith('localpart:')) return null;
  if (u.startsWith('autogroup:')) return `${u} cannot be a local user; only autogroup:nonroot can`;
  if (!/^[A-Za-z_][A-Za-z0-9._-]*\$?$/.test(u) || u.length > 64) return `"${u}" is not a valid local user name`;
  return null;
}
