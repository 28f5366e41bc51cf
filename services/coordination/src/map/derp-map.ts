// The DERP map clients receive. Own mode, by default: one region, the image's relay, reached at the public URL's host
// and port (Tailscale clients always speak TLS to a DERP node unless TS_DEBUG_USE_DERP_HTTP=1 is set on the client,
// which only local try-outs on http:// need). STUN runs on UDP HSE_STUN_PORT of the same host, unless HSE_STUN_HOST
// names another host (the proxy runs elsewhere): then the DERP node does no STUN and a STUN-only node points at that
// host.
//
// Several instances (HSE_DERP_NODES, advanced/ha.md, "Relays"): each listed relay is a node, in the order given.
//   HSE_DERP_REGIONS=one       nodes of one region: a client connects to the first node it can reach and moves to the
//                              next when it fails; the relays' mesh carries packets between clients on different
//                              nodes. An instance may list itself first, so clients it serves prefer its relay.
//   HSE_DERP_REGIONS=per-node  a region each (ids HSE_DERP_REGION_ID upwards): clients pick the nearest by latency and
//                              reach a peer through the peer's home region, so no mesh is needed — but every instance
//                              must list the nodes in the same order, or a region id would name different relays.
// Public mode: Tailscale's public relays, shipped as data/public-derp-map.json (see README for refreshing it).
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ipaddr from 'ipaddr.js';
import type { Config } from '../../../../shared/config.ts';
import type { DerpNodeAddress } from '../../../../shared/derp-addresses.ts';
import type { DERPMap, DERPNode } from '../tailcfg/tailcfg.ts';

export const PUBLIC_DERP_MAP_FILE = path.join(path.dirname(fileURLToPath(import.meta.url)), '../data/public-derp-map.json');

function addressFields(host: string): Pick<DERPNode, 'IPv4' | 'IPv6'> {
  if (!ipaddr.isValid(host)) return {};
  // An IP literal as host name: pin the family we have and disable the other, so the client does not try DNS.
  return ipaddr.parse(host).kind() === 'ipv4' ? { IPv4: host, IPv6: 'none' } : { IPv4: 'none', IPv6: host };
}

export function buildDerpMap(cfg: Config): DERPMap {
  if (cfg.derpMode === 'public') return JSON.parse(fs.readFileSync(PUBLIC_DERP_MAP_FILE, 'utf8')) as DERPMap;
  const id = cfg.derpRegionId;
  if (cfg.derpNodes) return listedNodesMap(cfg, cfg.derpNodes);
  const host = cfg.publicUrl.hostname.replace(/^\[|\]$/g, '');
  const port = cfg.publicUrl.port ? Number(cfg.publicUrl.port) : cfg.publicUrl.protocol === 'https:' ? 443 : 80;
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

/** "900a", "900b", … as derper's maps name nodes; past z, "900n27". */
function nodeName(regionId: number, i: number): string {
  return i < 26 ? `${regionId}${String.fromCharCode(97 + i)}` : `${regionId}n${i + 1}`;
}

/** A listed relay as DERP node(s) of `regionId`: the node, plus a STUN-only node when its STUN is on another host. */
function nodesOf(n: DerpNodeAddress, regionId: number, name: string): DERPNode[] {
  const stun = n.stun;
  const stunHost = stun?.host && stun.host.toLowerCase() !== n.host.toLowerCase() ? stun.host : null;
  const node: DERPNode = {
    Name: name,
    RegionID: regionId,
    HostName: n.host,
    ...addressFields(n.host),
    DERPPort: n.derpPort,
    STUNPort: stun && !stunHost ? stun.port : -1,
  };
  if (!stun || !stunHost) return [node];
  return [node, { Name: `${name}s`, RegionID: regionId, HostName: stunHost, ...addressFields(stunHost), STUNOnly: true, STUNPort: stun.port }];
}

function listedNodesMap(cfg: Config, listed: DerpNodeAddress[]): DERPMap {
  const id = cfg.derpRegionId;
  if (cfg.derpRegions === 'one') {
    const nodes = listed.flatMap((n, i) => nodesOf(n, id, nodeName(id, i)));
    return { Regions: { [id]: { RegionID: id, RegionCode: cfg.derpRegionCode, RegionName: cfg.derpRegionName, Nodes: nodes } }, omitDefaultRegions: true };
  }
  const regions: DERPMap['Regions'] = {};
  listed.forEach((n, i) => {
    const rid = id + i;
    regions[rid] = {
      RegionID: rid,
      RegionCode: `${cfg.derpRegionCode}-${i + 1}`,
      RegionName: `${cfg.derpRegionName} ${i + 1}`,
      Nodes: nodesOf(n, rid, nodeName(rid, 0)),
    };
  });
  return { Regions: regions, omitDefaultRegions: true };
}
