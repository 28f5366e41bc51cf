// The remote API: a subset of Tailscale's public API v2 under /api/v2, served by the coordination service (the router
// sends it every path but /console and /derp), so tools written for Tailscale (its Go client, Terraform, scripts) work
// against hse with only the base URL changed. The tailnet in paths is "-" (one tailnet per server; any other name
// is 404). Every change goes through the admin routes in-process (admin/admin-server.ts adminRoutes): the same checks
// and activity-log entries as the console and the CLI, with the actor "api:<key description>" and the client address
// the router resolved.
//
//   request ──► credentials (Authorization: Bearer <key>, or Basic with the key as user name, as Tailscale accepts)
//           ──► per-address budget of failed attempts (10 per 10 min; shared/attempt-limit.ts) ──► 429 when spent
//           ──► key valid? (known, unexpired, unrevoked) ──► 401 {"message": "API token invalid"}
//           ──► route ──► 404 {"message": "not found"} ──► read-only key on a change ──► 403
//           ──► handler ──► JSON (or HuJSON) ─ errors as {"message", "data"?} with their status
import type { IncomingMessage, ServerResponse } from 'node:http';
import { AttemptLimiter } from '../../../../shared/attempt-limit.ts';
import type { Config } from '../../../../shared/config.ts';
import { HseError, isStoreDown, statusOf } from '../../../../shared/errors.ts';
import type { Logger } from '../../../../shared/log.ts';
import { counter } from '../../../../shared/metrics.ts';
import { CLIENT_IP_HEADER } from '../../../../shared/paths.ts';
import { K } from '../../../../shared/redis-keys.ts';
import type { Routes } from '../admin/admin-kit.ts';
import type { LivePolicy } from '../map/live-policy.ts';
import type { ApiKeyStore } from '../state/api-keys.ts';
import type { Store } from '../state/store.ts';
import type { Tailnet } from '../state/tailnet.ts';
import { adminCaller, type ApiAnswer, type ApiCall, type ApiRoute, type ApiRoutes } from './api-kit.ts';
import { deviceRoutes } from './devices.ts';
import { dnsRoutes } from './dns.ts';
import { keyRoutes } from './keys.ts';
import { policyRoutes } from './policy.ts';
import { settingsRoutes } from './settings.ts';
import { userRoutes } from './users.ts';

export interface ApiDeps {
  cfg: Pick<Config, 'nodeKeyExpirySeconds' | 'policyFile'>;
  admin: Routes;
  apiKeys: ApiKeyStore;
  store: Store;
  tailnet: Tailnet;
  policy: LivePolicy;
  baseDomain: string;
  log: Logger;
}

/** The same budget as the console's sign-in: 10 failures per address (an IPv6 /64) in 10 minutes. */
export const API_AUTH_MAX_FAILURES = 10;
export const API_AUTH_WINDOW_MS = 600_000;
const MAX_BODY = 1024 * 1024;

const apiRequests = counter('hse_api_requests_total', 'Remote API (/api/v2) requests by result: ok, client_error, server_error, unauthorized, limited.', [
  'result',
]);

/** The key from Authorization: "Bearer <key>", or Basic with the key as the user name (password empty or ignored). */
export function credentialOf(header: string | undefined): string | null {
  if (!header) return null;
  const bearer = /^Bearer\s+(\S+)$/i.exec(header);
  if (bearer) return bearer[1];
  const basic = /^Basic\s+([A-Za-z0-9+/=]+)$/i.exec(header);
  if (!basic) return null;
  const decoded = Buffer.from(basic[1], 'base64').toString('utf8');
  const user = decoded.split(':')[0];
  return user === '' ? null : user;
}

async function readRaw(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let n = 0;
  for await (const c of req as AsyncIterable<Buffer>) {
    n += c.length;
    if (n > MAX_BODY) throw new HseError(413, 'request body too large (1 MiB at most)');
    chunks.push(c);
  }
  return Buffer.concat(chunks);
}

function send(res: ServerResponse, status: number, a: ApiAnswer): void {
  const headers: Record<string, string> = { 'cache-control': 'no-store', ...a.headers };
  if (a.text !== undefined) {
    res.writeHead(status, { ...headers, 'content-type': `${a.type ?? 'text/plain'}; charset=utf-8` }).end(a.text);
  } else if (a.json !== undefined) {
    res.writeHead(status, { ...headers, 'content-type': 'application/json' }).end(JSON.stringify(a.json));
  } else {
    res.writeHead(status, headers).end();
  }
}

/** An error in Tailscale's shape: {"message": "..."}, with "data" when the error carries per-item detail. */
function errorAnswer(e: HseError): ApiAnswer {
  const data = Array.isArray(e.details) ? e.details : undefined;
  const details = e.details as { errors?: { line: number; column: number; message: string }[] } | undefined;
  const problems =
    !data && Array.isArray(details?.errors) ? [{ user: '', errors: details.errors.map((p) => `line ${p.line}, column ${p.column}: ${p.message}`) }] : undefined;
  return {
    json: { message: e.message, ...(data || problems ? { data: data ?? problems } : {}) },
    headers: e.retryAfter ? { 'retry-after': String(e.retryAfter) } : {},
  };
}

export function createApiHandler(d: ApiDeps): (req: IncomingMessage, res: ServerResponse) => void {
  const admin = adminCaller(d.admin);
  const limiter = new AttemptLimiter(d.store.redis, { prefix: K.apiAuthLimitPrefix, max: API_AUTH_MAX_FAILURES, windowMs: API_AUTH_WINDOW_MS });
  const routes: ApiRoutes = {
    ...deviceRoutes({ admin, store: d.store, tailnet: d.tailnet, baseDomain: d.baseDomain }),
    ...keyRoutes({ admin, store: d.store }),
    ...policyRoutes({ admin, live: d.policy }),
    ...dnsRoutes(admin),
    ...userRoutes({ store: d.store, tailnet: d.tailnet }),
    ...settingsRoutes(d.cfg),
  };
  const compiled = Object.entries(routes).map(([k, route]) => {
    const [method, pattern] = k.split(' ');
    const names = [...pattern.matchAll(/:(\w+)/g)].map((m) => m[1]);
    const re = new RegExp(`^${pattern.replace(/:\w+/g, '([^/]+)')}$`);
    return { method, re, names, route };
  });

  /** The route for a request, with its path parameters (the tailnet "-" checked and dropped from them). */
  const match = (method: string, path: string): { route: ApiRoute; params: string[] } | null => {
    for (const r of compiled) {
      const m = r.re.exec(path);
      if (!m || (r.method !== method && !(method === 'HEAD' && r.method === 'GET'))) continue;
      let values: string[];
      try {
        values = m.slice(1).map(decodeURIComponent);
      } catch {
        throw new HseError(400, 'the path has a malformed %-escape');
      }
      const t = r.names.indexOf('t');
      // One tailnet per server: "-" (the caller's default tailnet), as Tailscale's clients send it.
      if (t !== -1 && values[t] !== '-') return null;
      return { route: r.route, params: values };
    }
    return null;
  };

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const ip = String(req.headers[CLIENT_IP_HEADER] ?? '');
    const url = new URL(req.url ?? '/', 'http://api.invalid');
    const method = req.method ?? 'GET';
    const raw = await readRaw(req);
    const presented = credentialOf(req.headers.authorization);
    if (presented === null) {
      apiRequests.inc({ result: 'unauthorized' });
      send(res, 401, { json: { message: 'API token invalid: send an hse API key as "Authorization: Bearer <key>" (or as the basic-auth user name)' } });
      return;
    }
    const attempt = await limiter.attempt(ip);
    if ('retryAfter' in attempt) {
      apiRequests.inc({ result: 'limited' });
      d.log.info('API authentication rate-limited', { ip, retryAfter: attempt.retryAfter });
      send(res, 429, {
        json: { message: `too many failed authentications from this address; try again in ${attempt.retryAfter} s` },
        headers: { 'retry-after': String(attempt.retryAfter) },
      });
      return;
    }
    const key = await d.apiKeys.verify(presented);
    if (!key) {
      apiRequests.inc({ result: 'unauthorized' });
      d.log.info('API key refused', { ip, prefix: presented.slice(0, 20) });
      send(res, 401, { json: { message: 'API token invalid' } });
      return;
    }
    await attempt.succeeded();
    void d.apiKeys.touch(key.id, ip).catch(() => {});
    const found = match(method, url.pathname);
    if (!found) {
      apiRequests.inc({ result: 'client_error' });
      send(res, 404, { json: { message: 'not found' } });
      return;
    }
    const changes = method !== 'GET' && method !== 'HEAD' && found.route.readOnly !== true;
    if (changes && key.role !== 'admin') {
      apiRequests.inc({ result: 'client_error' });
      send(res, 403, { json: { message: `this API key ("${key.description}") is read-only; ask an administrator for a key that may make changes` } });
      return;
    }
    const call: ApiCall = { key, actor: `api:${key.description}`, ip, params: found.params, query: url.searchParams, headers: req.headers, raw };
    const answer = await found.route.handler(call);
    apiRequests.inc({ result: 'ok' });
    send(res, answer.status ?? 200, answer);
  }

  return (req, res) => {
    handle(req, res).catch((e: Error) => {
      if (res.headersSent) {
        res.destroy();
        return;
      }
      // The one place an API call's failure becomes an answer, in Tailscale's error shape.
      if (isStoreDown(e)) {
        apiRequests.inc({ result: 'server_error' });
        d.log.warn('API request failed: store unavailable', { path: req.url, error: e.message });
        send(res, 503, {
          json: { message: 'the coordination store (Redis) is temporarily unavailable; retrying shortly is safe' },
          headers: { 'retry-after': '2' },
        });
        return;
      }
      if (!(e instanceof HseError)) d.log.error('API request failed', { path: req.url, error: e.stack ?? e.message });
      const status = statusOf(e);
      apiRequests.inc({ result: status >= 500 ? 'server_error' : 'client_error' });
      send(res, status, e instanceof HseError ? { ...errorAnswer(e) } : { json: { message: 'internal error; see the coordination log' } });
    });
  };
}
