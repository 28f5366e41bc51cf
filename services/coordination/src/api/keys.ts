// Auth keys in Tailscale's API shape (POST/GET /api/v2/tailnet/-/keys, GET/DELETE …/keys/{id}): hse's pre-auth keys,
// created and expired through the admin routes.
//
// A Tailscale auth key belongs to the user whose API key made it; an hse API key belongs to a console account, not to
// a tailnet user. So a tagged key (the usual kind for automation: the device is owned by its tags) is made for the
// tailnet user "tagged-devices", created the first time it is needed, as headscale does; an untagged key needs the
// user it registers devices for, given in the hse-only field "user" (a name or id). "preauthorized" is accepted and
// shown as given: hse has no device approval for key logins, so every key behaves as preauthorized, as on a tailnet
// with device approval off.
import { HseError } from '../../../../shared/errors.ts';
import type { PreAuthKeyView, UserRecord } from '../../../../shared/model.ts';
import type { Store } from '../state/store.ts';
import { type AdminCaller, type ApiCall, type ApiRoutes, isoSeconds, jsonBody } from './api-kit.ts';

/** The tailnet user tagged keys made through the API are filed under. */
export const TAGGED_DEVICES_USER = 'tagged-devices';

/** Tailscale's default auth-key lifetime when expirySeconds is 0 or absent: 90 days. */
const DEFAULT_EXPIRY_S = 90 * 86_400;

export interface KeyDeps {
  admin: AdminCaller;
  store: Store;
}

export function keyJson(k: PreAuthKeyView, withSecret?: string): Record<string, unknown> {
  const invalid = k.expired || (!k.reusable && k.used) || k.revoked !== undefined;
  return {
    id: String(k.id),
    keyType: 'auth',
    ...(withSecret ? { key: withSecret } : {}),
    description: k.description ?? '',
    created: isoSeconds(k.created),
    updated: isoSeconds(k.created),
    expires: isoSeconds(k.expiration),
    ...(k.revoked ? { revoked: isoSeconds(k.revoked) } : {}),
    invalid,
    capabilities: { devices: { create: { reusable: k.reusable, ephemeral: k.ephemeral, preauthorized: true, tags: k.tags } } },
    tags: k.tags,
    userId: String(k.userId),
  };
}

export function keyRoutes(d: KeyDeps): ApiRoutes {
  const find = async (c: ApiCall): Promise<PreAuthKeyView> => {
    const ref = c.params[1];
    const all = await d.admin<PreAuthKeyView[]>('GET /v1/preauthkeys', c);
    const k = /^\d{1,12}$/.test(ref) ? all.find((x) => x.id === Number(ref)) : undefined;
    if (!k) throw new HseError(404, 'key not found');
    return k;
  };
  const ownerFor = async (c: ApiCall, user: unknown, tags: string[]): Promise<string> => {
    if (user !== undefined) {
      if (typeof user !== 'string' && typeof user !== 'number') throw new HseError(400, '"user" is a user name or id');
      return String(user);
    }
    if (tags.length === 0) {
      throw new HseError(400, 'an auth key without tags registers devices for a user: give "user" (an hse user name or id), or give the key tags');
    }
    if (!(await d.store.getUserByName(TAGGED_DEVICES_USER))) {
      try {
        await d.admin<UserRecord>('POST /v1/users', c, [], { name: TAGGED_DEVICES_USER, displayName: 'Tagged devices' });
      } catch (e) {
        if (!(e instanceof HseError && e.status === 409)) throw e; // made meanwhile by another call
      }
    }
    return TAGGED_DEVICES_USER;
  };
  return {
    'GET /api/v2/tailnet/:t/keys': {
      // Active keys only, as Tailscale lists them.
      handler: async (c) => {
        const all = await d.admin<PreAuthKeyView[]>('GET /v1/preauthkeys', c);
        return { json: { keys: all.filter((k) => !k.expired && !(k.used && !k.reusable)).map((k) => keyJson(k)) } };
      },
    },
    'POST /api/v2/tailnet/:t/keys': {
      handler: async (c) => {
        const b = jsonBody(c);
        if (b.keyType !== undefined && b.keyType !== 'auth') {
          throw new HseError(
            400,
            `hse makes auth keys only through this API (keyType "${String(b.keyType)}" is not available); API keys are made in the console`,
          );
        }
        const create = ((b.capabilities as Record<string, unknown> | undefined)?.devices as Record<string, unknown> | undefined)?.create as
          | Record<string, unknown>
          | undefined;
        if (!create || typeof create !== 'object') throw new HseError(400, '"capabilities.devices.create" is required');
        const tags = create.tags ?? [];
        if (!Array.isArray(tags) || !tags.every((t) => typeof t === 'string')) throw new HseError(400, '"tags" must be a list like ["tag:ci"]');
        const expirySeconds = b.expirySeconds === undefined || b.expirySeconds === 0 ? DEFAULT_EXPIRY_S : Number(b.expirySeconds);
        if (!Number.isInteger(expirySeconds)) throw new HseError(400, '"expirySeconds" must be a whole number of seconds');
        const description = b.description === undefined ? undefined : String(b.description);
        if (description !== undefined && description.length > 50) throw new HseError(400, '"description" is at most 50 characters');
        const user = await ownerFor(c, b.user, tags as string[]);
        const k = await d.admin<PreAuthKeyView & { key: string }>('POST /v1/preauthkeys', c, [], {
          user,
          reusable: create.reusable === true,
          ephemeral: create.ephemeral === true,
          tags,
          expiresInSeconds: expirySeconds,
          description,
        });
        return { json: { ...keyJson(k, k.key), expirySeconds } };
      },
    },
    'GET /api/v2/tailnet/:t/keys/:id': { handler: async (c) => ({ json: keyJson(await find(c)) }) },
    'DELETE /api/v2/tailnet/:t/keys/:id': {
      handler: async (c) => {
        const k = await find(c);
        await d.admin('POST /v1/preauthkeys/:id/expire', c, [String(k.id)]);
        return {};
      },
    },
  };
}
