// What every route of the remote API works with: the call (who, from where, path parameters, query, body) and what a
// route answers. Tailscale's API answers errors as {"message": "..."} (the official Go client reads "message" and
// "data"), so every refusal here is an HseError turned into that shape in one place (api-server.ts).
import type { IncomingHttpHeaders } from 'node:http';
import { HseError } from '../../../../shared/errors.ts';
import type { ApiKeyRecord } from '../../../../shared/model.ts';
import type { Call, Routes } from '../admin/admin-kit.ts';

export interface ApiCall {
  key: ApiKeyRecord;
  /** "api:<description>": who acts, in the activity log. */
  actor: string;
  /** The client address the router resolved. */
  ip: string;
  params: string[];
  query: URLSearchParams;
  headers: IncomingHttpHeaders;
  /** The request body as sent (JSON, or HuJSON for the policy file). */
  raw: Buffer;
}

export interface ApiAnswer {
  status?: number;
  /** JSON-serialised unless `text` is given. undefined = an empty body. */
  json?: unknown;
  text?: string;
  type?: string;
  headers?: Record<string, string>;
}

export type ApiHandler = (c: ApiCall) => Promise<ApiAnswer>;

export interface ApiRoute {
  handler: ApiHandler;
  /** Changes nothing though it is a POST (validate, preview): read-only keys may call it. */
  readOnly?: boolean;
}

/** "METHOD /api/v2/path/:x" → route; ":x" matches one path segment. */
export type ApiRoutes = Record<string, ApiRoute>;

/** The body as a JSON object; an empty body is {}. */
export function jsonBody(c: ApiCall): Record<string, unknown> {
  if (c.raw.length === 0) return {};
  let v: unknown;
  try {
    v = JSON.parse(c.raw.toString('utf8'));
  } catch {
    throw new HseError(400, 'the request body is not valid JSON');
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new HseError(400, 'the request body must be a JSON object');
  return v as Record<string, unknown>;
}

/** Calls an admin route in-process as the API key's actor, so checks and the activity log are the admin API's own. */
export function adminCaller(admin: Routes) {
  return <T>(route: string, c: Pick<ApiCall, 'actor' | 'ip'>, params: string[] = [], body: Record<string, unknown> = {}): Promise<T> => {
    const h = admin[route];
    if (!h) throw new Error(`no admin route ${route}`);
    const call: Call = { params, body, actor: c.actor, ip: c.ip };
    return h(call) as Promise<T>;
  };
}

export type AdminCaller = ReturnType<typeof adminCaller>;

/** Tailscale's times: RFC 3339 UTC; a device that never expires shows the zero time, as Tailscale's API does. */
export const ZERO_TIME = '0001-01-01T00:00:00Z';

export function isoSeconds(iso: string): string {
  return iso.replace(/\.\d{3}Z$/, 'Z');
}
