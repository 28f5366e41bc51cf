// Devices in Tailscale's API shape (GET /api/v2/tailnet/-/devices, /api/v2/device/{id}/…), served from the tailnet
// state and changed through the admin routes.
//
// Ids: Tailscale gives each device a numeric "id" (legacy) and a "nodeId" (its stable id, preferred); both are
// accepted in paths. hse maps its node id (the number `hse nodes list` shows) to "id", and the node's StableID (the
// one the client itself sees, "n" + 16 hex digits) to "nodeId". Every device listed is authorized: a device waiting
// for approval is not a node yet in hse (it is in the console's approval list and `hse pending list`).
import { HseError } from '../../../../shared/errors.ts';
import { type NodeRecord, nodeFqdn } from '../../../../shared/model.ts';
import type { RouteView } from '../../../../shared/model.ts';
import { advertisedRoutes, canonicalPrefix, EXIT_ROUTES, isExitPrefix } from '../map/routes.ts';
import type { Store } from '../state/store.ts';
import type { Tailnet } from '../state/tailnet.ts';
import { type AdminCaller, type ApiCall, type ApiRoutes, isoSeconds, jsonBody, ZERO_TIME } from './api-kit.ts';

export interface DeviceDeps {
  admin: AdminCaller;
  store: Store;
  tailnet: Tailnet;
  baseDomain: string;
}

type Info = Record<string, unknown>;

const str = (v: unknown): string => (typeof v === 'string' ? v : '');

/** The device as Tailscale's API shows it; `all` adds routes, connectivity, distro and SSH (fields=all). */
export function deviceJson(n: NodeRecord, d: Pick<DeviceDeps, 'tailnet' | 'baseDomain'>, all: boolean): Record<string, unknown> {
  const hi = (n.hostinfo ?? {}) as Info;
  const online = d.tailnet.online.has(n.id);
  const user = d.tailnet.users.get(n.userId);
  const out: Record<string, unknown> = {
    addresses: [n.ipv4, n.ipv6],
    id: String(n.id),
    nodeId: n.stableId,
    authorized: true,
    user: user?.email ?? user?.name ?? `user-${n.userId}`,
    name: nodeFqdn(d.baseDomain, n).replace(/\.$/, ''),
    hostname: n.hostname,
    clientVersion: str(hi.IPNVersion),
    updateAvailable: false,
    os: str(hi.OS),
    tags: n.tags,
    created: isoSeconds(n.created),
    keyExpiryDisabled: n.keyExpiryDisabled === true || n.expiry === null,
    expires: n.expiry === null ? ZERO_TIME : isoSeconds(n.expiry),
    isExternal: false,
    isEphemeral: n.ephemeral,
    connectedToControl: online,
    machineKey: n.machineKey,
    nodeKey: n.nodeKey,
    blocksIncomingConnections: hi.ShieldsUp === true,
    tailnetLockKey: '',
    tailnetLockError: '',
  };
  if (!online && n.lastSeen) out.lastSeen = isoSeconds(n.lastSeen);
  if (all) {
    const ni = (hi.NetInfo ?? {}) as Info;
    out.advertisedRoutes = advertisedRoutes(n);
    out.enabledRoutes = n.approvedRoutes.map((p) => canonicalPrefix(p) ?? p);
    out.sshEnabled = Array.isArray(hi.sshHostKeys) && hi.sshHostKeys.length > 0;
    out.clientConnectivity = {
      endpoints: n.endpoints,
      derp: n.homeDerp ? String(n.homeDerp) : '',
      mappingVariesByDestIP: ni.MappingVariesByDestIP === true,
      latency: {},
      clientSupports: {
        hairPinning: ni.HairPinning === true,
        ipv6: ni.WorkingIPv6 === true,
        pcp: ni.PCP === true,
        pmp: ni.PMP === true,
        udp: ni.WorkingUDP === true,
        upnp: ni.UPnP === true,
      },
    };
    out.distro = { name: str(hi.Distro), version: str(hi.DistroVersion), codeName: str(hi.DistroCodeName) };
  }
  return out;
}

/** A device by its "id" (hse's node id) or "nodeId" (its StableID); 404 in Tailscale's words otherwise. */
export async function findDevice(d: Pick<DeviceDeps, 'store' | 'tailnet'>, ref: string): Promise<NodeRecord> {
  if (/^\d{1,12}$/.test(ref)) {
    const n = await d.store.getNode(Number(ref));
    if (n) return n;
  } else {
    for (const n of d.tailnet.nodes.values()) if (n.stableId === ref) return (await d.store.getNode(n.id)) ?? n;
  }
  throw new HseError(404, 'device not found');
}

/** ?fields=all or default; anything else is refused as Tailscale does. */
function allFields(c: ApiCall): boolean {
  const f = c.query.get('fields') ?? 'default';
  if (f !== 'all' && f !== 'default') throw new HseError(400, `invalid fields value "${f}": use "all" or "default"`);
  return f === 'all';
}

/** The routes body ({routes: [...]}) as canonical prefixes; the exit node is its pair 0.0.0.0/0 and ::/0. */
function wantedRoutes(body: Record<string, unknown>): string[] {
  const raw = body.routes;
  if (!Array.isArray(raw) || !raw.every((r) => typeof r === 'string')) throw new HseError(400, '"routes" must be a list of CIDR prefixes');
  const out = new Set<string>();
  for (const r of raw as string[]) {
    const p = canonicalPrefix(r);
    if (!p) throw new HseError(400, `"${r}" is not a CIDR prefix (for example 10.0.0.0/24)`);
    out.add(p);
  }
  return [...out];
}

export function deviceRoutes(d: DeviceDeps): ApiRoutes {
  const routesOf = async (id: number) => {
    const n = await d.store.getNode(id);
    if (!n) throw new HseError(404, 'device not found');
    return { advertisedRoutes: advertisedRoutes(n), enabledRoutes: n.approvedRoutes.map((p) => canonicalPrefix(p) ?? p) };
  };
  return {
    'GET /api/v2/tailnet/:t/devices': {
      handler: async (c) => {
        const all = allFields(c);
        const nodes = await d.store.listNodes();
        return { json: { devices: nodes.map((n) => deviceJson(n, d, all)) } };
      },
    },
    'GET /api/v2/device/:id': {
      handler: async (c) => ({ json: deviceJson(await findDevice(d, c.params[0]), d, allFields(c)) }),
    },
    'DELETE /api/v2/device/:id': {
      handler: async (c) => {
        const n = await findDevice(d, c.params[0]);
        await d.admin('DELETE /v1/nodes/:id', c, [String(n.id)]);
        return {};
      },
    },
    'POST /api/v2/device/:id/authorized': {
      handler: async (c) => {
        await findDevice(d, c.params[0]);
        const b = jsonBody(c);
        if (typeof b.authorized !== 'boolean') throw new HseError(400, '"authorized" must be true or false');
        // Every device hse knows is authorized; one waiting for approval is approved in the console or with
        // `hse pending approve`. Taking authorization back is not a state hse has: expire the key or delete the device.
        if (!b.authorized) throw new HseError(400, 'hse cannot deauthorize a device; expire its key (POST /device/{id}/expire) or delete it');
        return {};
      },
    },
    'POST /api/v2/device/:id/name': {
      handler: async (c) => {
        const n = await findDevice(d, c.params[0]);
        const b = jsonBody(c);
        if (typeof b.name !== 'string') throw new HseError(400, '"name" is required (an empty name resets it to the host name)');
        // Tailscale accepts the MagicDNS name with or without the tailnet's domain; "" goes back to the host name.
        let name = b.name.trim().toLowerCase().replace(/\.$/, '');
        if (name.endsWith(`.${d.baseDomain}`)) name = name.slice(0, -d.baseDomain.length - 1);
        if (name === '') name = n.hostname.toLowerCase();
        await d.admin('POST /v1/nodes/:id/rename', c, [String(n.id)], { name });
        return {};
      },
    },
    'POST /api/v2/device/:id/tags': {
      handler: async (c) => {
        const n = await findDevice(d, c.params[0]);
        const b = jsonBody(c);
        if (!Array.isArray(b.tags)) throw new HseError(400, '"tags" must be a list like ["tag:server"]');
        await d.admin('POST /v1/nodes/:id/tags', c, [String(n.id)], { tags: b.tags });
        return {};
      },
    },
    'POST /api/v2/device/:id/key': {
      handler: async (c) => {
        const n = await findDevice(d, c.params[0]);
        const b = jsonBody(c);
        if (typeof b.keyExpiryDisabled !== 'boolean') throw new HseError(400, '"keyExpiryDisabled" must be true or false');
        await d.admin('POST /v1/nodes/:id/key-expiry', c, [String(n.id)], { disabled: b.keyExpiryDisabled });
        return {};
      },
    },
    'POST /api/v2/device/:id/expire': {
      handler: async (c) => {
        const n = await findDevice(d, c.params[0]);
        await d.admin('POST /v1/nodes/:id/expire', c, [String(n.id)]);
        return {};
      },
    },
    'GET /api/v2/device/:id/routes': {
      handler: async (c) => ({ json: await routesOf((await findDevice(d, c.params[0])).id) }),
    },
    'POST /api/v2/device/:id/routes': {
      // Replaces the enabled (approved) routes, as Tailscale's "set device routes": routes not listed are unapproved.
      handler: async (c) => {
        const n = await findDevice(d, c.params[0]);
        const wanted = wantedRoutes(jsonBody(c));
        const now = n.approvedRoutes.map((p) => canonicalPrefix(p) ?? p);
        // The exit node is one switch in hse (both halves together): either half listed enables both.
        const wantExit = wanted.some(isExitPrefix);
        const add = [
          ...wanted.filter((p) => !isExitPrefix(p) && !now.includes(p)),
          ...(wantExit && !EXIT_ROUTES.every((e) => now.includes(e)) ? ['exit'] : []),
        ];
        const drop = [...now.filter((p) => !isExitPrefix(p) && !wanted.includes(p)), ...(!wantExit && now.some(isExitPrefix) ? ['exit'] : [])];
        if (drop.length > 0) await d.admin<RouteView[]>('POST /v1/nodes/:id/routes/unapprove', c, [String(n.id)], { prefixes: drop });
        if (add.length > 0) await d.admin<RouteView[]>('POST /v1/nodes/:id/routes/approve', c, [String(n.id)], { prefixes: add });
        return { json: await routesOf(n.id) };
      },
    },
  };
}
