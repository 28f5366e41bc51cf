// What a client reports about itself (Hostinfo, Endpoints) is passed on to every peer in their network maps, and
// the official client decodes maps into typed Go structs: one field of the wrong JSON type (Hostinfo.OS = 5, an
// endpoint that is not "ip:port") makes json.Unmarshal fail for the whole MapResponse, so every peer of that node
// stops receiving maps. Found by fuzzing (test/reliability/fuzz-coordination.test.ts) and shown with the official
// client (test/reliability/map-poisoning.test.ts). So these values are cleaned where they enter (register, map
// requests) and again where maps are built (records stored before this check): each known field keeps its value only
// when it has the type tailcfg.Hostinfo gives it; unknown fields are dropped (a client treats a missing field as its
// zero value). Reference: tailscale tailcfg/tailcfg.go Hostinfo, NetInfo, Service, Location; types/opt/bool.go.
import ipaddr from 'ipaddr.js';
import type { Hostinfo } from './tailcfg.ts';

type Check = (v: unknown) => boolean;

const str: Check = (v) => typeof v === 'string';
const bool: Check = (v) => typeof v === 'boolean';
/** opt.Bool accepts only true, false and null on the wire. */
const optBool: Check = (v) => typeof v === 'boolean' || v === null;
const int =
  (min: number, max: number): Check =>
  (v) =>
    typeof v === 'number' && Number.isInteger(v) && v >= min && v <= max;
const num: Check = (v) => typeof v === 'number' && Number.isFinite(v);
const strings: Check = (v) => Array.isArray(v) && v.length <= 1024 && v.every((x) => typeof x === 'string');
const prefixes: Check = (v) => Array.isArray(v) && v.length <= 1024 && v.every((x) => typeof x === 'string' && isPrefix(x));
const floatMap: Check = (v) => isObject(v) && Object.values(v).every(num);

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function isPrefix(s: string): boolean {
  try {
    ipaddr.parseCIDR(s);
    return true;
  } catch {
    return false;
  }
}

/** Keeps the fields of `v` that `schema` knows and whose value passes its check. */
function pick(v: unknown, schema: Record<string, Check>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (!isObject(v)) return out;
  for (const [k, check] of Object.entries(schema)) if (Object.hasOwn(v, k) && check(v[k])) out[k] = v[k];
  return out;
}

const NET_INFO: Record<string, Check> = {
  MappingVariesByDestIP: optBool,
  WorkingIPv6: optBool,
  OSHasIPv6: optBool,
  WorkingUDP: optBool,
  WorkingICMPv4: optBool,
  HavePortMap: bool,
  UPnP: optBool,
  PMP: optBool,
  PCP: optBool,
  PreferredDERP: int(0, 2 ** 31 - 1),
  LinkType: str,
  DERPLatency: floatMap,
  FirewallMode: str,
};
const SERVICE: Record<string, Check> = { Proto: str, Port: int(0, 65535), Description: str };
const LOCATION: Record<string, Check> = {
  Country: str,
  CountryCode: str,
  City: str,
  CityCode: str,
  Latitude: num,
  Longitude: num,
  Priority: int(-(2 ** 31), 2 ** 31 - 1),
};

const HOSTINFO: Record<string, Check> = {
  IPNVersion: str,
  FrontendLogID: str,
  BackendLogID: str,
  OS: str,
  OSVersion: str,
  Container: optBool,
  Env: str,
  Distro: str,
  DistroVersion: str,
  DistroCodeName: str,
  App: str,
  Desktop: optBool,
  Package: str,
  DeviceModel: str,
  PushDeviceToken: str,
  Hostname: str,
  ShieldsUp: bool,
  ShareeNode: bool,
  NoLogsNoSupport: bool,
  RemoteConfig: bool,
  WireIngress: bool,
  IngressEnabled: bool,
  AllowsUpdate: bool,
  Machine: str,
  GoArch: str,
  GoArchVar: str,
  GoVersion: str,
  RoutableIPs: prefixes,
  RequestTags: strings,
  WoLMACs: strings,
  sshHostKeys: strings,
  Cloud: str,
  Userspace: optBool,
  UserspaceRouter: optBool,
  AppConnector: optBool,
  ServicesHash: str,
  PeerRelay: bool,
  ExitNodeID: str,
  StateEncrypted: optBool,
};

/** A Hostinfo every client can decode; null when the client sent none (or not an object). */
export function cleanHostinfo(v: unknown): Hostinfo | null {
  if (!isObject(v)) return null;
  const out: Hostinfo = pick(v, HOSTINFO);
  if (isObject(v.NetInfo)) out.NetInfo = pick(v.NetInfo, NET_INFO);
  if (isObject(v.Location)) out.Location = pick(v.Location, LOCATION);
  if (Array.isArray(v.Services))
    out.Services = v.Services.filter(isObject)
      .slice(0, 1024)
      .map((s) => pick(s, SERVICE));
  return out;
}

/** "ip:port" or "[ipv6]:port", as Go's netip.AddrPort parses it. */
export function isAddrPort(s: unknown): s is string {
  if (typeof s !== 'string' || s.length > 64) return false;
  const m = /^(?:\[([0-9A-Fa-f:.]+)\]|(\d{1,3}(?:\.\d{1,3}){3})):(\d{1,5})$/.exec(s);
  if (!m || Number(m[3]) > 65535) return false;
  return m[1] !== undefined ? ipaddr.IPv6.isValid(m[1]) : ipaddr.IPv4.isValidFourPartDecimal(m[2]);
}

/** The endpoints a client reported that peers can decode; at most 64. */
export function cleanEndpoints(v: unknown): string[] {
  return Array.isArray(v) ? v.filter(isAddrPort).slice(0, 64) : [];
}
