// Users in Tailscale's API shape (GET /api/v2/tailnet/-/users, GET /api/v2/users/{id}). hse has one kind of tailnet
// user: every one is a "member" with role "member" and status "active" (console accounts, which have roles, are not
// tailnet users). The login name is the user's e-mail address when the identity provider gave one, else its name.
import { HseError } from '../../../../shared/errors.ts';
import type { UserRecord } from '../../../../shared/model.ts';
import type { Store } from '../state/store.ts';
import type { Tailnet } from '../state/tailnet.ts';
import { type ApiRoutes, isoSeconds } from './api-kit.ts';

export function userJson(u: UserRecord, tailnet: Tailnet): Record<string, unknown> {
  let devices = 0;
  let connected = false;
  let lastSeen = '';
  for (const n of tailnet.nodes.values()) {
    if (n.userId !== u.id || n.tags.length > 0) continue;
    devices++;
    if (tailnet.online.has(n.id)) connected = true;
    if (n.lastSeen && n.lastSeen > lastSeen) lastSeen = n.lastSeen;
  }
  return {
    id: String(u.id),
    displayName: u.displayName,
    loginName: u.email ?? u.name,
    profilePicUrl: u.picture ?? '',
    tailnetId: '-',
    created: isoSeconds(u.created),
    type: 'member',
    role: 'member',
    status: 'active',
    deviceCount: devices,
    lastSeen: isoSeconds(connected ? new Date().toISOString() : lastSeen || u.created),
    currentlyConnected: connected,
  };
}

export function userRoutes(d: { store: Store; tailnet: Tailnet }): ApiRoutes {
  return {
    'GET /api/v2/tailnet/:t/users': {
      handler: async (c) => {
        const type = c.query.get('type');
        const role = c.query.get('role');
        const users = (type && type !== 'member') || (role && role !== 'member') ? [] : await d.store.listUsers();
        return { json: { users: users.map((u) => userJson(u, d.tailnet)) } };
      },
    },
    'GET /api/v2/users/:id': {
      handler: async (c) => {
        const u = /^\d{1,12}$/.test(c.params[0]) ? await d.store.getUser(Number(c.params[0])) : await d.store.getUserByName(c.params[0]);
        if (!u) throw new HseError(404, 'user not found');
        return { json: userJson(u, d.tailnet) };
      },
    },
  };
}
