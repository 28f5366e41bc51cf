// The tailnet's DNS settings as operators edit them (console DNS page, `hse dns get` / `hse dns set`), and the one
// check every change passes through before it is stored. The coordination service turns them into the DNSConfig of
// every map (services/coordination/src/map/dns-config.ts). A refusal is an HseError(400) whose message starts with
// the field, as the JSON names it, and says what to write instead.
//
// What the Tailscale client (v1.102.3) does with each field is in tailscale's tailcfg.DNSConfig and
// ipn/ipnlocal/node_backend.go dnsConfigForNetmap; which resolver addresses it can use is in
// net/dns/resolver/forwarder.go (forwarder.send) and net/dns/publicdns/publicdns.go.
import net from 'node:net';
import { HseError } from './errors.ts';

export interface ExtraRecord {
  /** Any DNS name, without the trailing dot. */
  name: string;
  type: 'A' | 'AAAA';
  /** An IPv4 address for A, IPv6 for AAAA. */
  value: string;
}

export interface DnsSettings {
  /** Devices resolve each other's names under HSE_BASE_DOMAIN through their local resolver (100.100.100.100). */
  magicDNS: boolean;
  /** true: every query goes to `nameservers` ("override local DNS"); false: the device's own resolvers stay in charge. */
  overrideLocalDNS: boolean;
  /** Global nameservers: IPv4/IPv6, IP:port ([IPv6]:port), or a DNS-over-HTTPS URL the client knows. */
  nameservers: string[];
  /** Split DNS: queries under a domain go to its own nameservers. */
  splitDNS: Record<string, string[]>;
  searchDomains: string[];
  extraRecords: ExtraRecord[];
}

/** MagicDNS on and nothing else: what every tailnet starts with (and what it had before DNS settings existed). */
export function defaultDnsSettings(): DnsSettings {
  return { magicDNS: true, overrideLocalDNS: false, nameservers: [], splitDNS: {}, searchDomains: [], extraRecords: [] };
}

const FIELDS = ['magicDNS', 'overrideLocalDNS', 'nameservers', 'splitDNS', 'searchDomains', 'extraRecords'] as const;

/** Bounds that keep every map small; far above what a tailnet needs. */
const MAX_NAMESERVERS = 16;
const MAX_SPLIT_DOMAINS = 256;
const MAX_SEARCH_DOMAINS = 64;
const MAX_EXTRA_RECORDS = 1000;

/**
 * DNS-over-HTTPS URLs the v1.102 client can use: it speaks DoH only to providers whose addresses it knows
 * (publicdns.go `populate`, `DoHIPsOfBase`), and answers every query to any other https:// resolver with
 * "arbitrary https:// resolvers not supported yet". NextDNS and Control D take a profile in the path.
 */
const KNOWN_DOH = new Set([
  'https://cloudflare-dns.com/dns-query',
  'https://security.cloudflare-dns.com/dns-query',
  'https://family.cloudflare-dns.com/dns-query',
  'https://dns.google/dns-query',
  'https://dns.quad9.net/dns-query',
  'https://dns11.quad9.net/dns-query',
  'https://dns10.quad9.net/dns-query',
  'https://dns.mullvad.net/dns-query',
  'https://adblock.dns.mullvad.net/dns-query',
  'https://base.dns.mullvad.net/dns-query',
  'https://extended.dns.mullvad.net/dns-query',
  'https://family.dns.mullvad.net/dns-query',
  'https://all.dns.mullvad.net/dns-query',
  'https://wikimedia-dns.org/dns-query',
  'https://freedns.controld.com/p0',
  'https://freedns.controld.com/p1',
  'https://freedns.controld.com/p2',
  'https://freedns.controld.com/p3',
  'https://freedns.controld.com/family',
  'https://private.canadianshield.cira.ca/dns-query',
  'https://protected.canadianshield.cira.ca/dns-query',
  'https://family.canadianshield.cira.ca/dns-query',
]);
/** NextDNS: the profile is 1 to 12 bytes in hex, optionally followed by /device/... or ?query (DoHIPsOfBase). */
const NEXTDNS = /^https:\/\/dns\.nextdns\.io\/[0-9a-f]{1,24}([/?][\x21-\x7e]*)?$/;
const CONTROLD = /^https:\/\/dns\.controld\.com\/[\x21-\x7e]+$/;

/** The client's own resolver: forwarding to it would loop. */
const QUAD_100 = new Set(['100.100.100.100', 'fd7a:115c:a1e0::53']);

const LABEL = /^[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?$/;

function refuse(message: string): never {
  throw new HseError(400, message);
}

function isIPv4(s: string): boolean {
  return net.isIPv4(s);
}

function isIPv6(s: string): boolean {
  return !s.includes('%') && net.isIPv6(s);
}

/** Why `addr` cannot be a resolver address for the client, or null when it can. */
export function resolverProblem(addr: string): string | null {
  if (addr.startsWith('https://')) {
    if (KNOWN_DOH.has(addr) || NEXTDNS.test(addr) || CONTROLD.test(addr)) return null;
    return `"${addr}" is a DNS-over-HTTPS URL the Tailscale client cannot use: it speaks DoH only to providers it knows (for example https://dns.google/dns-query, https://cloudflare-dns.com/dns-query, https://dns.quad9.net/dns-query, https://dns.nextdns.io/<profile>); give your resolver's IP address instead`;
  }
  if (addr.startsWith('tls://')) return `"${addr}": the Tailscale client does not support DNS-over-TLS; give the resolver's IP address instead`;
  if (addr.startsWith('http://')) return `"${addr}": plain-HTTP DNS is not supported; give the resolver's IP address instead`;
  let host = addr;
  let port: string | null = null;
  const v6 = /^\[([^\]]+)\]:(\d+)$/.exec(addr);
  const v4 = /^([0-9.]+):(\d+)$/.exec(addr);
  if (v6) [, host, port] = v6;
  else if (v4) [, host, port] = v4;
  const ok = v6 ? isIPv6(host) : isIPv4(host) || (port === null && isIPv6(host));
  if (!ok) return `"${addr}" is not an IPv4 or IPv6 address, an IP:port ([IPv6]:port), or a DNS-over-HTTPS URL`;
  if (port !== null && (Number(port) < 1 || Number(port) > 65535)) return `"${addr}" has a port outside 1 to 65535`;
  if (QUAD_100.has(host)) return `"${addr}" is the device's own Tailscale resolver; list the nameservers it should forward to`;
  return null;
}

/** A DNS name in lowercase without the trailing dot, or null when `s` is not one. */
function dnsName(s: string): string | null {
  const name = s.trim().toLowerCase().replace(/\.$/, '');
  if (name === '' || name.length > 253) return null;
  return name.split('.').every((l) => LABEL.test(l)) ? name : null;
}

function isUnder(name: string, domain: string): boolean {
  return name === domain || name.endsWith(`.${domain}`);
}

function list(raw: unknown, field: string): unknown[] {
  if (raw === undefined || raw === null) return [];
  if (!Array.isArray(raw)) refuse(`${field}: must be a list`);
  return raw;
}

function text(raw: unknown, field: string): string {
  if (typeof raw !== 'string') refuse(`${field}: ${JSON.stringify(raw) ?? 'undefined'} is not a string`);
  return raw.trim();
}

function flag(raw: unknown, field: string, dflt: boolean): boolean {
  if (raw === undefined) return dflt;
  if (typeof raw !== 'boolean') refuse(`${field}: must be true or false`);
  return raw;
}

function resolvers(raw: unknown, field: string, min: number): string[] {
  const out: string[] = [];
  for (const item of list(raw, field)) {
    const addr = text(item, field).toLowerCase();
    const problem = resolverProblem(addr);
    if (problem) refuse(`${field}: ${problem}`);
    if (!out.includes(addr)) out.push(addr);
  }
  if (out.length < min) refuse(`${field}: give at least one nameserver`);
  if (out.length > MAX_NAMESERVERS) refuse(`${field}: at most ${MAX_NAMESERVERS} nameservers`);
  return out;
}

function splitDNS(raw: unknown, baseDomain: string): Record<string, string[]> {
  if (raw === undefined || raw === null) return {};
  if (typeof raw !== 'object' || Array.isArray(raw)) refuse('splitDNS: must be an object of domain -> list of nameservers');
  const entries = Object.entries(raw as Record<string, unknown>);
  if (entries.length > MAX_SPLIT_DOMAINS) refuse(`splitDNS: at most ${MAX_SPLIT_DOMAINS} domains`);
  const out: Record<string, string[]> = {};
  for (const [key, servers] of entries) {
    const domain = dnsName(key);
    if (!domain) refuse(`splitDNS: "${key}" is not a DNS domain (for example corp.example.com)`);
    if (isUnder(domain, baseDomain)) {
      refuse(`splitDNS: "${domain}" is the tailnet's own domain (HSE_BASE_DOMAIN ${baseDomain}) or under it; MagicDNS answers those names`);
    }
    if (out[domain]) refuse(`splitDNS: "${domain}" is listed twice`);
    out[domain] = resolvers(servers, `splitDNS "${domain}"`, 1);
  }
  return out;
}

function searchDomains(raw: unknown): string[] {
  const out: string[] = [];
  for (const item of list(raw, 'searchDomains')) {
    const s = text(item, 'searchDomains');
    const domain = dnsName(s);
    if (!domain) refuse(`searchDomains: "${s}" is not a DNS domain (for example corp.example.com)`);
    if (!out.includes(domain)) out.push(domain);
  }
  if (out.length > MAX_SEARCH_DOMAINS) refuse(`searchDomains: at most ${MAX_SEARCH_DOMAINS} domains`);
  return out;
}

function extraRecords(raw: unknown): ExtraRecord[] {
  const out: ExtraRecord[] = [];
  const items = list(raw, 'extraRecords');
  if (items.length > MAX_EXTRA_RECORDS) refuse(`extraRecords: at most ${MAX_EXTRA_RECORDS} records`);
  for (const item of items) {
    if (typeof item !== 'object' || item === null || Array.isArray(item)) refuse('extraRecords: each record is an object {"name", "type", "value"}');
    const r = item as Record<string, unknown>;
    const extra = Object.keys(r).filter((k) => !['name', 'type', 'value'].includes(k));
    if (extra.length > 0) refuse(`extraRecords: unknown field "${extra[0]}" (a record has name, type and value)`);
    const rawName = text(r.name, 'extraRecords name');
    const name = dnsName(rawName);
    if (!name) refuse(`extraRecords: "${rawName}" is not a DNS name (for example grafana.example.com)`);
    const value = text(r.value, `extraRecords "${name}" value`).toLowerCase();
    const rawType = r.type === undefined || r.type === '' ? (isIPv6(value) ? 'AAAA' : 'A') : text(r.type, `extraRecords "${name}" type`).toUpperCase();
    if (rawType !== 'A' && rawType !== 'AAAA')
      refuse(`extraRecords "${name}": type "${rawType}" is not supported; the Tailscale client answers only A and AAAA records`);
    const type = rawType as 'A' | 'AAAA';
    if (type === 'A' && !isIPv4(value)) refuse(`extraRecords "${name}": "${value}" is not an IPv4 address (an A record needs one)`);
    if (type === 'AAAA' && !isIPv6(value)) refuse(`extraRecords "${name}": "${value}" is not an IPv6 address (an AAAA record needs one)`);
    if (!out.some((x) => x.name === name && x.type === type && x.value === value)) out.push({ name, type, value });
  }
  return out;
}

/**
 * Checks DNS settings as sent by the console or the CLI and returns them normalised (lowercase names without the
 * trailing dot, duplicates dropped). A field left out takes its default, so a file holding only what differs works.
 */
export function validateDnsSettings(raw: unknown, baseDomain: string): DnsSettings {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) refuse('DNS settings must be a JSON object');
  const r = raw as Record<string, unknown>;
  const extra = Object.keys(r).filter((k) => !(FIELDS as readonly string[]).includes(k));
  if (extra.length > 0) refuse(`unknown field "${extra[0]}"; DNS settings have ${FIELDS.join(', ')}`);
  const overrideLocalDNS = flag(r.overrideLocalDNS, 'overrideLocalDNS', false);
  const nameservers = resolvers(r.nameservers, 'nameservers', 0);
  if (overrideLocalDNS && nameservers.length === 0) {
    refuse('overrideLocalDNS: needs at least one global nameserver to send every query to; add one under nameservers');
  }
  return {
    magicDNS: flag(r.magicDNS, 'magicDNS', true),
    overrideLocalDNS,
    nameservers,
    splitDNS: splitDNS(r.splitDNS, baseDomain),
    searchDomains: searchDomains(r.searchDomains),
    extraRecords: extraRecords(r.extraRecords),
  };
}

/** What changed, field by field, for the activity log: {field: {from, to}}. */
export function dnsSettingsChanges(before: DnsSettings, after: DnsSettings): Record<string, { from: unknown; to: unknown }> {
  const out: Record<string, { from: unknown; to: unknown }> = {};
  for (const f of FIELDS) {
    if (JSON.stringify(before[f]) !== JSON.stringify(after[f])) out[f] = { from: before[f], to: after[f] };
  }
  return out;
}
