// The admin API: JSON over HTTP on the coordination service's private admin socket (never routed by the router).
// The console and the `hse` CLI are its only clients; both pass who acts (x-hse-actor) and from where
// (x-hse-client-ip), and every change is written to the activity log here, in one place.
import type http from 'node:http';
import type { ServerResponse } from 'node:http';
import * as nodeHttp from '../../../../shared/node-http.ts';
import type { ActivityLog } from '../../../../shared/activity.ts';
import type { Config } from '../../../../shared/config.ts';
import { dnsSettingsChanges, validateDnsSettings } from '../../../../shared/dns-settings.ts';
import { HseError, isStoreDown, statusOf } from '../../../../shared/errors.ts';
import type { Logger } from '../../../../shared/log.ts';
import {
  isExpired,
  type NodeRecord,
  type NodeView,
  nodeFqdn,
  type PreAuthKeyRecord,
  type PreAuthKeyView,
  type ProviderIdentity,
  type UserRecord,
} from '../../../../shared/model.ts';
import type { MapHub } from '../control/map-hub.ts';
import type { LivePolicy } from '../map/live-policy.ts';
import type { PolicyStore } from '../state/policy-store.ts';
import { policyRoutes } from './policy-routes.ts';
import { routeRoutes } from './route-routes.ts';
import { apiKeyRoutes } from './apikey-routes.ts';
import { webhookRoutes } from './webhook-routes.ts';
import type { WebhookStore } from '../state/webhook-store.ts';
import type { ApiKeyStore } from '../state/api-keys.ts';
import { type Call, id, readBody, type Routes, str } from './admin-kit.ts';
import type { Registrar } from '../control/register.ts';
import { keyExpiryAt } from '../state/key-expiry.ts';
import { invalidLabelReason } from '../state/names.ts';
import type { Store } from '../state/store.ts';
import type { Tailnet } from '../state/tailnet.ts';

export interface AdminDeps {
  cfg: Config;
  apiKeys: ApiKeyStore;
  webhooks: WebhookStore;
  activity: ActivityLog;
  store: Store;
  policy: LivePolicy;
  policyStore: PolicyStore;
  tailnet: Tailnet;
  hub: MapHub;
  registrar: Registrar;
  log: Logger;
}

/** Optional text of at most `max` characters: null when absent, refused when of another type or too long. */
function optionalText(b: Record<string, unknown>, k: string, max: number): string | null {
  const v = b[k];
  if (v === undefined || v === null) return null;
  if (typeof v !== 'string' || v.length > max) throw new HseError(400, `"${k}" must be a string of at most ${max} characters`);
  return v;
}

/** The identity the console obtained from the provider (shared/model.ts ProviderIdentity), checked for shape. */
function identityOf(body: Record<string, unknown>): ProviderIdentity {
  const v = body.identity;
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new HseError(400, '"identity" is required');
  const b = v as Record<string, unknown>;
  const issuer = optionalText(b, 'issuer', 2048);
  const subject = optionalText(b, 'subject', 255);
  if (!issuer || !subject) throw new HseError(400, '"identity" needs "issuer" and "subject"');
  const groups = b.groups ?? [];
  if (!Array.isArray(groups) || groups.length > 1000 || !groups.every((g) => typeof g === 'string' && g.length <= 256)) {
    throw new HseError(400, '"identity.groups" must be a list of at most 1000 names of at most 256 characters');
  }
  const picture = optionalText(b, 'picture', 2048);
  return {
    issuer,
    subject,
    email: optionalText(b, 'email', 320),
    emailVerified: b.emailVerified === true,
    name: optionalText(b, 'name', 256),
    preferredUsername: optionalText(b, 'preferredUsername', 256),
    picture: picture && /^https:\/\//.test(picture) ? picture : null,
    groups: groups as string[],
  };
}

/** What webhook events say about this server: the tailnet's name (its MagicDNS domain) and the console's address. */
export function webhookContext(cfg: Config) {
  return { tailnet: cfg.baseDomain, baseDomain: cfg.baseDomain, publicOrigin: cfg.publicOrigin };
}

/**
 * Every admin call as "METHOD /v1/path" → handler: what the admin socket serves (createAdminServer), and what the
 * remote API (api/) calls in-process, so a change made through either is checked and logged the same way.
 */
export function adminRoutes(d: AdminDeps): Routes {
  const log = (c: Call, action: string, target: string, details: Record<string, unknown> = {}) =>
    d.activity.record({ action, actor: c.actor, ip: c.ip, target, details });

  const nodeView = (n: NodeRecord): NodeView => ({
    ...n,
    keyExpiryDisabled: n.keyExpiryDisabled === true,
    online: d.tailnet.online.has(n.id),
    user: d.tailnet.users.get(n.userId)?.name ?? `user-${n.userId}`,
    fqdn: nodeFqdn(d.cfg.baseDomain, n).replace(/\.$/, ''),
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
  /** Tags from a request body, each defined in the policy's tagOwners (the only tags a device may carry). */
  const definedTags = (v: unknown): string[] => {
    if (v === undefined) return [];
    if (!Array.isArray(v) || !v.every((t) => typeof t === 'string')) throw new HseError(400, '"tags" must be a list like ["tag:server", "tag:db"]');
    const tags = [...new Set(v.map((t) => (t.startsWith('tag:') ? t : `tag:${t}`).toLowerCase()))].sort();
    const defined = d.policy.policy.definedTags();
    const unknown = tags.filter((t) => !defined.includes(t));
    if (unknown.length > 0) {
      throw new HseError(
        400,
        `${unknown.join(', ')} ${unknown.length === 1 ? 'is' : 'are'} not defined in the policy's tagOwners${defined.length > 0 ? ` (defined: ${defined.join(', ')})` : ' (it defines no tags)'}`,
      );
    }
    return tags;
  };
  const mustNode = async (s: string): Promise<NodeRecord> => {
    const n = await d.store.getNode(id(s));
    if (!n) throw new HseError(404, `no machine with id ${s}`);
    return n;
  };

  const routes: Routes = {
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
        tags: definedTags(c.body.tags),
        expiration: new Date(Date.now() + seconds * 1000),
        createdBy: c.actor,
        description: optionalText(c.body, 'description', 50) ?? undefined,
      });
      await log(c, 'authkey.create', record.prefix, {
        user: u.name,
        reusable: record.reusable,
        ephemeral: record.ephemeral,
        tags: record.tags,
        expiration: record.expiration,
      });
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
    'POST /v1/nodes/:id/tags': async (c) => {
      const before = await mustNode(c.params[0]);
      const tags = definedTags(c.body.tags ?? []);
      // A node owned by tags has no key expiry (as Tailscale); one that goes back to its user gets the default lifetime.
      const expiryFor = (x: NodeRecord) => (tags.length > 0 ? null : x.tags.length > 0 ? keyExpiryAt(d.cfg, null, x.keyExpiryDisabled === true) : x.expiry);
      const n = (await d.store.updateNode(before.id, (x) => (x.tags.join() === tags.join() ? null : { ...x, tags, expiry: expiryFor(x) }), true)) ?? before;
      await log(c, 'node.tags', n.givenName, { from: before.tags, to: n.tags });
      return nodeView(n);
    },
    'DELETE /v1/nodes/:id': async (c) => {
      const n = await d.store.deleteNode(id(c.params[0]));
      await log(c, 'node.delete', n.givenName, { addresses: [n.ipv4, n.ipv6], nodeId: n.stableId });
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
      await log(c, 'node.approve', n.givenName, { user: u.name, addresses: [n.ipv4, n.ipv6], nodeId: n.stableId, machineId: n.id });
      return nodeView(n);
    },
    'POST /v1/pending/:id/signin': async (c) => {
      const identity = identityOf(c.body);
      const { node, user, userCreated } = await d.registrar.signInDevice(c.params[0], identity);
      // The person who signed in acts, under the user name they have here; the address is their browser's.
      const as = { ...c, actor: user.name };
      if (userCreated) await log(as, 'user.create', user.name, { via: 'identity provider', email: user.email, subject: identity.subject });
      await log(as, 'node.register', node.givenName, {
        method: 'identity provider',
        user: user.name,
        groups: user.idpGroups,
        addresses: [node.ipv4, node.ipv6],
        nodeId: node.stableId,
        machineId: node.id,
      });
      return { node: nodeView(node), user };
    },
    'POST /v1/pending/:id/reject': async (c) => {
      const p = await d.registrar.reject(c.params[0], c.actor);
      await log(c, 'node.reject', p.hostname, { ip: p.ip });
      return p;
    },
    ...policyRoutes({ live: d.policy, store: d.policyStore, file: d.cfg.policyFile, log }),
    ...routeRoutes({ store: d.store, tailnet: d.tailnet, hub: d.hub, log }),
    ...apiKeyRoutes({ keys: d.apiKeys, log }),
    ...webhookRoutes({ webhooks: d.webhooks, ctx: webhookContext(d.cfg), log }),
  };
  return routes;
}

export function createAdminServer(d: AdminDeps, routes: Routes = adminRoutes(d)): http.Server {
  const compiled = Object.entries(routes).map(([k, h]) => {
    const [method, pattern] = k.split(' ');
    const re = new RegExp(`^${pattern.replace(/:id/g, '([^/]+)')}$`);
    return { method, re, h };
  });

  const send = (res: ServerResponse, status: number, body: unknown) => {
    res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  };

  return nodeHttp.createServer((req, res) => {
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
        send(res, statusOf(e), e instanceof HseError ? { error: e.message, details: e.details } : { error: 'internal error; see the coordination log' });
      });
  });
}
