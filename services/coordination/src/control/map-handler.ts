// POST /machine/map. Every request first records what the client reports (disco key, endpoints, home DERP region,
// Hostinfo). Then: Stream:true opens a long-poll stream (map-hub); Stream:false with OmitPeers is a "lite" endpoint
// update answered with an empty 200; Stream:false without OmitPeers gets one full map and the response ends.
import type { Http2ServerResponse } from 'node:http2';
import { HseError } from '../../../../shared/errors.ts';
import { normaliseKey } from '../../../../shared/keys.ts';
import type { Logger } from '../../../../shared/log.ts';
import { redact } from '../../../../shared/log.ts';
import type { NodeRecord } from '../../../../shared/model.ts';
import type { Store } from '../state/store.ts';
import { capVersionProblem } from '../tailcfg/capver.ts';
import { cleanEndpoints, cleanHostinfo } from '../tailcfg/hostinfo.ts';
import { encodeJsonBytesFrame } from './map-frame.ts';
import type { MapHub } from './map-hub.ts';
import type { MapRequest } from '../tailcfg/tailcfg.ts';

/** What changed between the stored node and a map request: nothing, only fast-changing fields, or more. */
function applyRequest(n: NodeRecord, req: MapRequest): { next: NodeRecord; change: 'none' | 'patch' | 'full' } {
  const next = { ...n };
  let change: 'none' | 'patch' | 'full' = 'none';
  const disco = req.DiscoKey ? normaliseKey('discokey', req.DiscoKey) : null;
  if (disco && disco !== n.discoKey) {
    next.discoKey = disco;
    change = 'patch';
  }
  if (Array.isArray(req.Endpoints)) {
    const eps = cleanEndpoints(req.Endpoints);
    if (JSON.stringify(eps) !== JSON.stringify(n.endpoints)) {
      next.endpoints = eps;
      change = 'patch';
    }
  }
  // Peers decode this Hostinfo into typed structs: only what they can decode is kept (hostinfo.ts).
  const hostinfo = cleanHostinfo(req.Hostinfo);
  if (hostinfo) {
    const derp = Number(hostinfo.NetInfo?.PreferredDERP ?? 0) || 0;
    if (derp !== n.homeDerp) {
      next.homeDerp = derp;
      if (change === 'none') change = 'patch';
    }
    const { NetInfo: _a, ...stable } = hostinfo;
    const { NetInfo: _b, ...prevStable } = (n.hostinfo ?? {}) as typeof hostinfo;
    if (JSON.stringify(stable) !== JSON.stringify(prevStable)) change = 'full';
    next.hostinfo = hostinfo as Record<string, unknown>;
    if (typeof hostinfo.Hostname === 'string' && hostinfo.Hostname !== '') next.hostname = hostinfo.Hostname;
  }
  if (req.Version !== n.capVersion) {
    next.capVersion = req.Version;
    if (change === 'none') change = 'patch';
  }
  return { next, change };
}

export async function handleMap(
  deps: { store: Store; hub: MapHub; log: Logger },
  req: MapRequest,
  machineKey: string,
  res: Http2ServerResponse,
): Promise<void> {
  if (typeof req !== 'object' || req === null) throw new HseError(400, 'map request must be a JSON object');
  const versionProblem = capVersionProblem(req.Version);
  if (versionProblem) throw new HseError(400, versionProblem);
  const nodeKey = normaliseKey('nodekey', req.NodeKey);
  if (!nodeKey) throw new HseError(400, 'NodeKey is missing or not a nodekey:<hex> value');
  const node = await deps.store.getNodeByNodeKey(nodeKey);
  if (!node) throw new HseError(404, 'node not found; log in again (tailscale up)');
  if (node.machineKey !== machineKey) {
    deps.log.warn('map refused: node key used from another machine', { nodeKey: redact(nodeKey, 16) });
    throw new HseError(403, 'this node key is registered to a different machine');
  }
  let current = node;
  const { change } = applyRequest(node, req);
  if (change !== 'none') {
    current =
      (await deps.store.updateNode(
        node.id,
        (n) => {
          const r = applyRequest(n, req);
          return r.change === 'none' ? null : r.next;
        },
        change === 'full',
      )) ?? node;
  }
  if (!req.Stream) {
    res.writeHead(200, { 'content-type': 'application/octet-stream' });
    if (req.OmitPeers) {
      res.end();
      return;
    }
    const json = await deps.hub.fullMapJson(current, () => !res.destroyed);
    if (json === null) return; // the client went away while the policy caught up with it
    res.end(encodeJsonBytesFrame(json, req.Compress === 'zstd'));
    return;
  }
  res.writeHead(200, { 'content-type': 'application/octet-stream' });
  await deps.hub.open(current, res, req.Compress === 'zstd');
}
