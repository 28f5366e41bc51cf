// The admin API: JSON over HTTP on the coordination service's private admin socket (never routed by the router).
// The console and the `hse` CLI are its only clients; both pass who acts (x-hse-actor) and from where
// (x-hse-client-ip), and every change is written to the activity log here, in one place.
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { ActivityLog } from '../../../../shared/activity.ts';
import type { Config } from '../../../../shared/config.ts';
import { dnsSettingsChanges, validateDnsSettings } from '../../../../shared/dns-settings.ts';
import { HseError, isStoreDown, statusOf } from '../../../../shared/errors.ts';
import type { Logger } from '../../../../shared/log.ts';
import type { NodeRecord, NodeView, PreAuthKeyRecord, PreAuthKeyView, UserRecord } from '../../../../shared/model.ts';
import type { MapHub } from '../control/map-hub.ts';
import type { Registrar } from '../control/register.ts';
import { fqdn, isExpired } from '../map/map-builder.ts';
import { keyExpiryAt } from '../state/key-expiry.ts';
import { invalidLabelReason } from '../state/names.ts';
import type { Store } from '../state/store.ts';
import type { Tailnet } from '../state/tailnet.ts';

export interface AdminDeps {
  cfg: Config;
  activity: ActivityLog;
  store: Store;
  tailnet: Tailnet;
  hub: MapHub;
  registrar: Registrar;
  log: Logger;
}

interface Call {
  params: string[];
  body: Record<string, unknown>;
  actor: string;
  ip: string;
}

type Handler = (c: Call) => Promise<unknown>;

/** The largest body is a DNS settings document (up to 1000 extra records); nothing else comes near. */
const MAX_BODY = 256 * 1024;

async function readBody(req: IncomingMessage): Promise<Record<string, unknown>> {
  const chunks: Buffer[] = [];
  let n = 0;
  for await (const c of req as AsyncIterable<Buffer>) {
    n += c.length;
    if (n > MAX_BODY) throw new HseError(413, 'request body too large');
    chunks.push(c);
  }
  if (n === 0) return {};
  try {
    const v = JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown;
    if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new Error();
    return v as Record<string, unknown>;
  } catch {
    throw new HseError(400, 'request body must be a JSON object');
  }
}

function str(b: Record<string, unknown>, k: string): string {
  const v = b[k];
  if (typeof v !== 'string' || v.trim() === '') throw new HseError(400, `"${k}" is required`);
  return v.trim();
}

function id(s: string): number {
  if (!/^\d{1,12}$/.test(s)) throw new HseError(400, `"${s}" is not an id`);
  return Number(s);
}

export function createAdminServer(d: AdminDeps): http.Server {
  const log = (c: Call, action: string, target: string, details: Record<string, unknown> = {}) =>
    d.activity.record({ action, actor: c.actor, ip: c.ip, target, details });

  const nodeView = (n: NodeRecord): NodeView => ({
    ...n,
    keyExpiryDisabled: n.keyExpiryDisabled === true,
    online: d.tailnet.online.has(n.id),
    user: d.tailnet.users.get(n.userId)?.name ?? `user-${n.userId}`,
    fqdn: fqdn(d.cfg, n).replace(/\.$/, ''),
    expired: isExpired(n),
  });
  const keyView = (k: PreAuthKeyRecord): PreAuthKeyView => {
    const { hash: _h, ...rest } = k;
    return { ...rest, user: d.tailnet.users.get(k.userId)?.name ?? `user-${k.userId}`, expired: Date.parse(k.expiration) <= Date.now() };
  };
  /** Accepts a user id or name. */
  const findUser = async (ref: unknown): Promise<UserRecord> => {
    const s = String(ref ?? '').trim();
    if (s === '') throw new HseError(400, '"user" is required');
    const u = /^\d+$/.test(s) ? await d.store.getUser(Number(s)) : await d.store.getUserByName(s);
    if (!u) throw new HseError(404, `no user "${s}"`);
    return u;
  };
  const mustNode = async (s: string): Promise<NodeRecord> => {
    const n = await d.store.getNode(id(s));
    if (!n) throw new HseError(404, `no machine with id ${s}`);
    return n;
  };

  const routes: Record<string, Handler> = {
    'GET /v1/health': async () => ({ ok: true, nodes: d.tailnet.nodes.size, streams: d.hub.streamCount }),

    'GET /v1/users': async () => {
      const users = await d.store.listUsers();
      const counts = new Map<number, number>();
      for (const n of d.tailnet.nodes.values()) counts.set(n.userId, (counts.get(n.userId) ?? 0) + 1);
      return users.map((u) => ({ ...u, machines: counts.get(u.id) ?? 0 }));
    },
    'POST /v1/users': async (c) => {
      const u = await d.store.createUser(str(c.body, 'name'), typeof c.body.displayName === 'string' ? c.body.displayName : undefined);
      await log(c, 'user.create', u.name);
      return u;
    },
    'PATCH /v1/users/:id': async (c) => {
      const before = await d.store.getUser(id(c.params[0]));
      const u = await d.store.renameUser(id(c.params[0]), str(c.body, 'name'));
      await log(c, 'user.rename', u.name, { from: before?.name, to: u.name });
      return u;
    },
    'DELETE /v1/users/:id': async (c) => {
      const { user, keysRemoved } = await d.store.deleteUser(id(c.params[0]));
      await log(c, 'user.delete', user.name, { preAuthKeysRemoved: keysRemoved });
      return user;
    },

    'GET /v1/preauthkeys': async () => (await d.store.listPreAuthKeys()).map(keyView),
    'POST /v1/preauthkeys': async (c) => {
      const u = await findUser(c.body.user);
      const seconds = c.body.expiresInSeconds === undefined ? 3600 : Number(c.body.expiresInSeconds);
      if (!Number.isFinite(seconds) || seconds < 60 || seconds > 365 * 86400) {
        throw new HseError(400, '"expiresInSeconds" must be between 60 and 31536000 (one year)');
      }
      const { key, record } = await d.store.createPreAuthKey({
        userId: u.id,
        reusable: c.body.reusable === true,
        ephemeral: c.body.ephemeral === true,
        expiration: new Date(Date.now() + seconds * 1000),
        createdBy: c.actor,
      });
      await log(c, 'authkey.create', record.prefix, { user: u.name, reusable: record.reusable, ephemeral: record.ephemeral, expiration: record.expiration });
      return { key, ...keyView(record) };
    },
    'POST /v1/preauthkeys/:id/expire': async (c) => {
      const k = await d.store.expirePreAuthKey(id(c.params[0]));
      await log(c, 'authkey.expire', k.prefix);
      return keyView(k);
    },

    'GET /v1/nodes': async () => (await d.store.listNodes()).map(nodeView),
    'GET /v1/nodes/:id': async (c) => nodeView(await mustNode(c.params[0])),
    'POST /v1/nodes/:id/rename': async (c) => {
      const name = str(c.body, 'name').toLowerCase();
      const reason = invalidLabelReason(name);
      if (reason) throw new HseError(400, reason);
      const before = await mustNode(c.params[0]);
      const n = await d.store.renameNode(before.id, name);
      await log(c, 'node.rename', n.givenName, { from: before.givenName, to: n.givenName });
      return nodeView(n);
    },
    'POST /v1/nodes/:id/expire': async (c) => {
      const before = await mustNode(c.params[0]);
      const n = (await d.store.updateNode(before.id, (x) => ({ ...x, expiry: new Date().toISOString() }), true)) ?? before;
      await log(c, 'node.expire', n.givenName);
      return nodeView(n);
    },
    'POST /v1/nodes/:id/key-expiry': async (c) => {
      if (typeof c.body.disabled !== 'boolean') throw new HseError(400, '"disabled" must be true or false');
      const disabled = c.body.disabled;
      const before = await mustNode(c.params[0]);
      // Enabling gives the key a fresh lifetime from now (HSE_NODE_KEY_EXPIRY), not one that may have run out already.
      const n =
        (await d.store.updateNode(
          before.id,
          (x) => ((x.keyExpiryDisabled === true) === disabled ? null : { ...x, keyExpiryDisabled: disabled, expiry: keyExpiryAt(d.cfg, null, disabled) }),
          true,
        )) ?? before;
      if ((before.keyExpiryDisabled === true) !== disabled) {
        await log(c, disabled ? 'node.key_expiry_disable' : 'node.key_expiry_enable', n.givenName, { from: before.expiry, to: n.expiry });
      }
      return nodeView(n);
    },
    'POST /v1/nodes/:id/user': async (c) => {
      const before = await mustNode(c.params[0]);
      const u = await findUser(c.body.user);
      const n = (await d.store.updateNode(before.id, (x) => ({ ...x, userId: u.id }), true)) ?? before;
      await log(c, 'node.move', n.givenName, { from: d.tailnet.users.get(before.userId)?.name, to: u.name });
      return nodeView(n);
    },
    'DELETE /v1/nodes/:id': async (c) => {
      const n = await d.store.deleteNode(id(c.params[0]));
      await log(c, 'node.delete', n.givenName, { addresses: [n.ipv4, n.ipv6] });
      return nodeView(n);
    },

    'GET /v1/dns': async () => d.store.getDnsSettings(),
    'PUT /v1/dns': async (c) => {
      const next = validateDnsSettings(c.body, d.cfg.baseDomain);
      const current = await d.store.getDnsSettings();
      if (Object.keys(dnsSettingsChanges(current, next)).length === 0) return next;
      const before = await d.store.setDnsSettings(next);
      await log(c, 'dns.change', 'dns', dnsSettingsChanges(before, next));
      return next;
    },

    'GET /v1/pending': async () => d.store.listPending(),
    'GET /v1/pending/:id': async (c) => {
      const p = await d.store.getPending(c.params[0]);
      if (!p) throw new HseError(404, 'this login request is unknown or expired; run tailscale up again on the device');
      return p;
    },
    'POST /v1/pending/:id/approve': async (c) => {
      const u = await findUser(c.body.user);
      const n = await d.registrar.approve(c.params[0], u.id, c.actor);
      await log(c, 'node.approve', n.givenName, { user: u.name, addresses: [n.ipv4, n.ipv6] });
      return nodeView(n);
    },
    'POST /v1/pending/:id/reject': async (c) => {
      const p = await d.registrar.reject(c.params[0], c.actor);
      await log(c, 'node.reject', p.hostname, { ip: p.ip });
      return p;
    },
  };

  const compiled = Object.entries(routes).map(([k, h]) => {
    const [method, pattern] = k.split(' ');
    const re = new RegExp(`^${pattern.replace(/:id/g, '([^/]+)')}$`);
    return { method, re, h };
  });

  const send = (res: ServerResponse, status: number, body: unknown) => {
    res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  };

  return http.createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    const match = compiled.map((r) => ({ r, m: r.re.exec(path) })).find((x) => x.m && x.r.method === req.method);
    if (!match) {
      send(res, 404, { error: `no admin route ${req.method} ${path}` });
      return;
    }
    const actor = String(req.headers['x-hse-actor'] ?? 'unknown');
    const ip = String(req.headers['x-hse-client-ip'] ?? '');
    readBody(req)
      .then((body) => match.r.h({ params: match.m!.slice(1).map(decodeURIComponent), body, actor, ip }))
      .then((out) => send(res, 200, out))
      .catch((e: Error) => {
        // The one place an admin call's failure becomes an answer: an HseError's own words; Redis down is a 503 the
        // console and CLI explain; anything else is a bug, logged here.
        if (isStoreDown(e)) {
          d.log.warn('admin request failed: store unavailable', { route: `${req.method} ${path}`, error: e.message });
          send(res, 503, { error: 'the coordination store (Redis) is temporarily unavailable; retrying shortly is safe' });
          return;
        }
        if (!(e instanceof HseError)) d.log.error('admin request failed', { route: `${req.method} ${path}`, error: e.stack ?? e.message });
        send(res, statusOf(e), { error: e instanceof HseError ? e.message : 'internal error; see the coordination log' });
      });
  });
}
