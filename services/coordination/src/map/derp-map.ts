// The DERP map clients receive. Own mode: one region, the image's relay, reached at the public URL's host and port
// (Tailscale clients always speak TLS to a DERP node unless TS_DEBUG_USE_DERP_HTTP=1 is set on the client, which only
// local try-outs on http:// need). STUN runs on UDP HSE_STUN_PORT of the same host, unless HSE_STUN_HOST names another
// host (the proxy runs elsewhere): then the DERP node does no STUN and a STUN-only node points at that host.
// Public mode: Tailscale's public relays, shipped as data/public-derp-map.json (see README for refreshing it).
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ipaddr from 'ipaddr.js';
import type { Config } from '../../../../shared/config.ts';
import type { DERPMap, DERPNode } from '../tailcfg/tailcfg.ts';

export const PUBLIC_DERP_MAP_FILE = path.join(path.dirname(fileURLToPath(import.meta.url)), '../data/public-derp-map.json');

function addressFields(host: string): Pick<DERPNode, 'IPv4' | 'IPv6'> {
  if (!ipaddr.isValid(host)) return {};
  // An IP literal as host name: pin the family we have and disable the other, so the client does not try DNS.
  return ipaddr.parse(host).kind() === 'ipv4' ? { IPv4: host, IPv6: 'none' } : { IPv4: 'none', IPv6: host };
}

export function buildDerpMap(cfg: Config): DERPMap {
  if (cfg.derpMode === 'public') return JSON.parse(fs.readFileSync(PUBLIC_DERP_MAP_FILE, 'utf8')) as DERPMap;
  const host = cfg.publicUrl.hostname.replace(/^\[|\]$/g, '');
  const port = cfg.publicUrl.port ? Number(cfg.publicUrl.port) : cfg.publicUrl.protocol === 'https:' ? 443 : 80;
  const id = cfg.derpRegionId;
  const nodes: DERPNode[] = [
    {
      Name: `${id}a`,
      RegionID: id,
      HostName: host,
      ...addressFields(host),
      DERPPort: port,
      STUNPort: cfg.stunHost ? -1 : cfg.stunPort,
    },
  ];
  if (cfg.stunHost) {
    nodes.push({ Name: `${id}s`, RegionID: id, HostName: cfg.stunHost, ...addressFields(cfg.stunHost), STUNOnly: true, STUNPort: cfg.stunPort });
  }
  return {
    Regions: { [id]: { RegionID: id, RegionCode: cfg.derpRegionCode, RegionName: cfg.derpRegionName, Nodes: nodes } },
    omitDefaultRegions: true,
  };
}
