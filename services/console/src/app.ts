// The console as a Koa application: middleware order and routes. Everything it needs is passed in (main.ts wires the
// real Redis connections), so the order below is the whole request pipeline:
//   errors -> security headers -> cookie security -> static files -> readiness -> session -> CSRF -> routes -> 404
import { drainRequestBody } from './request/drain-body.ts';
import { createRequire } from 'node:module';
import type RouterClass from '@koa/router';
import type { Redis } from 'ioredis';
import Koa from 'koa';
import session from 'koa-session';
import type { ActivityLog } from '../../../shared/activity.ts';
import type { AdminClient } from '../../../shared/admin-client.ts';
import type { Config } from '../../../shared/config.ts';
import type { Logger } from '../../../shared/log.ts';
import { accountsRoutes } from './accounts/accounts-routes.ts';
import { aclsRoutes } from './acls/acls-routes.ts';
import { ownAccountRoutes } from './accounts/own-account-routes.ts';
import { logsRoutes } from './activity/logs-routes.ts';
import { streamRoute } from './activity/stream-route.ts';
import type { ActivityTail } from './activity/tail.ts';
import { AccountThrottle } from './auth/account-throttle.ts';
import { Accounts } from './auth/accounts.ts';
import { loginRoutes, type RecordActivity } from './auth/login-routes.ts';
import { csrfGuard, requireSession } from './auth/require-session.ts';
import { currentSession, loginCookieName, sessionOptions } from './auth/session.ts';
import { accountOfSession } from './auth/session-check.ts';
import { SigninLimiter } from './auth/signin-limit.ts';
import { errorHandler, PageError, STORE_UNAVAILABLE } from './errors.ts';
import type { ChangeFeed } from './network/change-feed.ts';
import type { NetworkDeps } from './network/deps.ts';
import { dnsRoutes } from './network/dns-routes.ts';
import { apiKeysRoutes } from './network/apikeys-routes.ts';
import { keysRoutes } from './network/keys-routes.ts';
import { webhooksRoutes } from './network/webhooks-routes.ts';
import { machinesRoutes } from './network/machines-routes.ts';
import { machinesStreamRoute } from './network/machines-stream.ts';
import { registerRoutes } from './network/register-routes.ts';
import { routesRoutes } from './network/routes-routes.ts';
import { usersRoutes } from './network/users-routes.ts';
import { clientAddress } from './request/client-address.ts';
import type { ConsoleContext, ConsoleContextFields, ConsoleState, Next } from './request/context.ts';
import { formLimitFor, readForm } from './request/form-body.ts';
import { publicUrl } from './request/public-url.ts';
import { contentSecurityPolicy, securityHeaders } from './security/headers.ts';
import { oidcRoutes } from './oidc/oidc-routes.ts';
import type { IdentityProvider } from './oidc/provider.ts';
import { serveStatic } from './static-files.ts';
import type { Viewer } from './views/layout.ts';
import { homePath } from './views/nav.ts';

// @koa/router's ES-module build imports node:http as a module namespace, which loads undici (node-http.ts in shared/
// says why); its CommonJS build requires it, which does not: 1.6 MiB less heap in the console.
const Router = createRequire(import.meta.url)('@koa/router') as typeof RouterClass;

export interface ConsoleDeps {
  cfg: Config;
  log: Logger;
  redis: Redis;
  /** The activity-log writer (built once by main). */
  activity: ActivityLog;
  tail: ActivityTail;
  /** The coordination service's admin API: machines, users, keys, device approval, DNS, the policy, routes. */
  admin: AdminClient;
  /** State changes (K.changes), for the live Machines and Routes views. */
  feed: ChangeFeed;
  /** Sign-in with the identity provider (HSE_OIDC_*), or null when none is configured. */
  provider: IdentityProvider | null;
}

export interface ConsoleApp {
  app: Koa<ConsoleState, ConsoleContextFields>;
  accounts: Accounts;
  /** Called by main once the cookie key is loaded and the first administrator exists; until then pages answer 503. */
  setReady(cookieKeys: string[]): void;
}

export function createConsole(d: ConsoleDeps): ConsoleApp {
  const { cfg, log, redis } = d;
  const app = new Koa<ConsoleState, ConsoleContextFields>();
  // The client address comes only from the router's header (request/client-address.ts); Koa's own X-Forwarded-*
  // handling stays off so nothing else can be believed by accident.
  app.proxy = false;
  // Koa would log every error to stderr on its own; errors.ts already logs what matters, once.
  app.silent = true;
  let ready = false;

  const accounts = new Accounts(redis);
  const clientIp = (ctx: Pick<ConsoleContext, 'req'>) => clientAddress(ctx.req.headers);
  const limiter = new SigninLimiter(redis, clientIp);
  const throttle = new AccountThrottle(redis);
  const record: RecordActivity = async (ctx, action, actor, target, details) => {
    await d.activity.record({ action, actor, ip: clientIp(ctx), target, details });
  };
  const csp = contentSecurityPolicy(cfg);

  // Error pages keep the navigation for a signed-in person, so the way back is one click.
  const viewerOf = async (ctx: ConsoleContext): Promise<Viewer | null> => {
    if (!ready) return null;
    const s = currentSession(ctx);
    const account = s ? await accountOfSession(accounts, s) : null;
    return s && account ? { username: account.username, role: account.role, csrf: s.csrf } : null;
  };
  app.use(drainRequestBody);
  app.use(errorHandler({ redis, log, csp, viewer: viewerOf }));
  app.use(securityHeaders(csp));
  app.use(async (ctx: ConsoleContext, next: Next) => {
    // Whether cookies are Secure follows the public URL (https => Secure), not how the router reached us over the
    // Unix socket; this also lets the cookie library send Secure cookies on this plain connection.
    ctx.cookies.secure = cfg.secure;
    await next();
  });
  app.use(serveStatic);
  app.use(async (_ctx: ConsoleContext, next: Next) => {
    if (!ready) throw new PageError(503, 'Console starting', `The console is starting and is not ready yet. ${STORE_UNAVAILABLE}`, { 'Retry-After': '5' });
    await next();
  });
  app.use(session(sessionOptions(cfg, redis) as Parameters<typeof session>[0], app));

  app.use(csrfGuard((ctx) => readForm(ctx.req, formLimitFor(ctx.path))));

  const router = new Router<ConsoleState, ConsoleContextFields>();
  const gate = requireSession(cfg, accounts);
  const loginCsrf = { cookieName: loginCookieName(cfg), secure: cfg.secure };

  router.get('/console', (ctx) => {
    ctx.redirect(publicUrl(cfg, currentSession(ctx) ? homePath() : '/console/login'));
  });
  router.get('/console/', (ctx) => {
    ctx.redirect(publicUrl(cfg, currentSession(ctx) ? homePath() : '/console/login'));
  });
  const choices = { passwords: cfg.oidc?.consolePasswords ?? true, provider: cfg.oidc ? { name: cfg.oidc.displayName } : null };
  const guard = { limiter, throttle, record, clientIp, log: log.child('auth') };
  loginRoutes(router, { cfg, accounts, loginCsrf, choices, ...guard });
  logsRoutes(router, { cfg, redis, log: log.child('logs'), gate });
  streamRoute(router, { redis, accounts, tail: d.tail, log: log.child('tail'), gate });
  const network: NetworkDeps = { cfg, admin: d.admin, gate, feed: d.feed, redis, accounts, log: log.child('network') };
  // The streams before /console/machines/:id, which would otherwise take "stream" for a machine id.
  machinesStreamRoute(router, network);
  machinesRoutes(router, network);
  routesRoutes(router, network);
  // Before registerRoutes: with a provider, the device's login link opens the provider's page, not the approval form.
  if (d.provider) {
    oidcRoutes(router, { cfg, provider: d.provider, redis, accounts, admin: d.admin, record, clientIp, loginCsrf });
  }
  registerRoutes(router, network);
  usersRoutes(router, network);
  keysRoutes(router, network);
  dnsRoutes(router, network);
  aclsRoutes(router, network);
  apiKeysRoutes(router, network);
  webhooksRoutes(router, network);
  accountsRoutes(router, { cfg, accounts, gate, record });
  ownAccountRoutes(router, { cfg, accounts, gate, record, guard });

  app.use(router.routes());
  app.use(async (ctx: ConsoleContext) => {
    // Reached only when no route answered.
    const m = router.match(ctx.path, ctx.method);
    if (m.path.length > 0 && !m.route) {
      const allow = [...new Set(m.path.flatMap((l) => l.methods))].join(', ');
      throw new PageError(405, 'Method not allowed', `${ctx.method} is not used at this address.`, { Allow: allow });
    }
    throw new PageError(404, 'Page not found', `There is no console page at ${ctx.path}. It may come with a later version, or the link is mistyped.`);
  });

  return {
    app,
    accounts,
    setReady(cookieKeys: string[]) {
      app.keys = cookieKeys;
      ready = true;
    },
  };
}
