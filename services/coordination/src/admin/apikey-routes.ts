// Admin API for the remote API's keys (console "API keys", `hse apikeys`): list (never the secret), create (the secret
// is in the answer, once), revoke. Each change in the activity log. The admin API trusts its two callers to have
// checked who may do this: the console lets administrators only, and offers read-only keys; the CLI runs as the
// server's own user.
import { HseError } from '../../../../shared/errors.ts';
import type { ApiKeyRecord } from '../../../../shared/model.ts';
import type { ApiKeyStore } from '../state/api-keys.ts';
import { type Call, id, type Routes, str } from './admin-kit.ts';

export interface ApiKeyRouteDeps {
  keys: ApiKeyStore;
  log: (c: Call, action: string, target: string, details?: Record<string, unknown>) => Promise<unknown>;
}

/** One day to one year; Tailscale's own API keys last 1 to 90 days, hse allows up to a year. */
export const API_KEY_MIN_SECONDS = 86_400;
export const API_KEY_MAX_SECONDS = 365 * 86_400;

/** What the activity log calls a key and its changes: letters, digits, spaces and . _ - : @ /, at most 50. */
export const DESCRIPTION_RE = /^[A-Za-z0-9 ._:@/-]{1,50}$/;

export function apiKeyRoutes(d: ApiKeyRouteDeps): Routes {
  return {
    'GET /v1/apikeys': async () => d.keys.list(),
    'POST /v1/apikeys': async (c) => {
      const description = str(c.body, 'description');
      if (!DESCRIPTION_RE.test(description)) {
        throw new HseError(400, '"description" is 1 to 50 characters: letters, digits, spaces and . _ - : @ / (it names the key in the activity log)');
      }
      const seconds = c.body.expiresInSeconds === undefined ? 90 * 86_400 : Number(c.body.expiresInSeconds);
      if (!Number.isInteger(seconds) || seconds < API_KEY_MIN_SECONDS || seconds > API_KEY_MAX_SECONDS) {
        throw new HseError(400, '"expiresInSeconds" must be between 86400 (one day) and 31536000 (one year)');
      }
      const role = c.body.role ?? 'admin';
      if (role !== 'admin' && role !== 'readonly') throw new HseError(400, '"role" is "admin" (may change things) or "readonly"');
      const { key, record } = await d.keys.create({
        description,
        role: role as ApiKeyRecord['role'],
        createdBy: c.actor,
        expiration: new Date(Date.now() + seconds * 1000),
      });
      await d.log(c, 'apikey.create', record.prefix, { description, role, expiration: record.expiration });
      const { hash: _h, ...shown } = record;
      return { key, ...shown, lastUsed: null, expired: false };
    },
    'POST /v1/apikeys/:id/revoke': async (c) => {
      const k = await d.keys.revoke(id(c.params[0]));
      await d.log(c, 'apikey.revoke', k.prefix, { description: k.description });
      return k;
    },
  };
}
