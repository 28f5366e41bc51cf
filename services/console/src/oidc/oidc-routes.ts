// Sign-in with the identity provider, for devices and for the console. Registered only when HSE_OIDC_ISSUER is set.
//   GET  /console/register/:authId      the device page: the device that asked and "Sign in with <provider> to add it"
//                                       (?approve, with HSE_OIDC_OPERATOR_APPROVAL=on: the administrator's page instead)
//   POST /console/oidc/device/:authId   csrf, [another]        -> 303 to the provider
//   POST /console/oidc/login            csrf, next, [another]  -> 303 to the provider
//   GET  /console/oidc/callback         code, state, iss       -> device added | refused page; console session, 303 next
// (`another` = 1: the provider asks for credentials even from someone signed in there, to use another account.)
// The starts are POSTs with the sign-in form's CSRF token, so a link alone cannot send a signed-in person's browser
// through the provider and back (with single sign-on that would add an attacker's device without a click). The
// callback accepts only an answer to a sign-in this browser started (flows.ts), validated by openid-client
// (provider.ts); every outcome is in the activity log with the browser's address.
import type { Redis } from 'ioredis';
import { AdminError, type AdminClient } from '../../../../shared/admin-client.ts';
import type { Config, OidcConfig } from '../../../../shared/config.ts';
import type { PendingAuth, ProviderIdentity } from '../../../../shared/model.ts';
import type { Accounts } from '../auth/accounts.ts';
import type { RecordActivity } from '../auth/login-routes.ts';
import { startSession } from '../auth/start-session.ts';
import { capitalise, PageError } from '../errors.ts';
import { field, readForm } from '../request/form-body.ts';
import { publicUrl, safeNext } from '../request/public-url.ts';
import { loginToken, loginTokenValid, type LoginCsrfOptions } from '../security/csrf.ts';
import { deviceAddedPage, deviceDecidedPage, deviceLinkUnknownPage, deviceRefusedPage, deviceSignInPage, noConsoleAccessPage } from '../views/oidc-pages.ts';
import { consoleRole, deviceRefusal } from './admission.ts';
import { identityFromClaims, identityLabel } from './claims.ts';
import { type Flow, Flows } from './flows.ts';
import { ProviderAccounts } from './provider-accounts.ts';
import { ProviderAnswerError } from './answer-error.ts';
import type { IdentityProvider } from './provider.ts';
import type { ConsoleContext, ConsoleRouteContext, ConsoleRouter, Next } from '../request/context.ts';

export interface OidcDeps {
  cfg: Config;
  provider: IdentityProvider;
  redis: Redis;
  accounts: Accounts;
  admin: AdminClient;
  record: RecordActivity;
  clientIp: (ctx: ConsoleContext) => string;
  loginCsrf: LoginCsrfOptions;
}

const AUTH_ID_RE = /^[A-Za-z0-9_-]{1,64}$/;

export function oidcRoutes(router: ConsoleRouter, d: OidcDeps): void {
  const oidc: OidcConfig = d.provider.cfg;
  const flows = new Flows(d.redis, d.cfg);
  const people = new ProviderAccounts(d.accounts, d.redis);
  const who = (ctx: ConsoleContext, actor = 'device login') => ({ actor, ip: d.clientIp(ctx) });

  /** The waiting registration, or null when the link is unknown or expired. */
  const pendingOf = async (ctx: ConsoleContext, authId: string): Promise<PendingAuth | null> => {
    if (!AUTH_ID_RE.test(authId)) return null;
    try {
      return await d.admin.getPending(who(ctx), authId);
    } catch (e) {
      if (e instanceof AdminError && e.status === 404) return null;
      throw e;
    }
  };

  const checkToken = async (ctx: ConsoleContext): Promise<URLSearchParams> => {
    const form = await readForm(ctx.req);
    if (!loginTokenValid(ctx, d.loginCsrf, field(form, 'csrf'))) {
      throw new PageError(
        403,
        'Sign-in refused: security token mismatch',
        'The page had no valid security token: it was open too long, your browser blocked its cookie, or it was sent from another site. Open the link again and retry.',
      );
    }
    return form;
  };

  const mustBeAvailable = () => {
    const why = d.provider.unavailable();
    if (why) {
      throw new PageError(
        503,
        `${oidc.displayName} unavailable`,
        `Sign-in with ${oidc.displayName} is not available right now: ${why}. Try again in a minute.`,
        {
          'Retry-After': '30',
        },
      );
    }
  };

  router.get('/console/register/:authId', async (ctx: ConsoleRouteContext, next: Next) => {
    if (ctx.query.approve !== undefined && oidc.operatorApproval) return next();
    const pending = await pendingOf(ctx, ctx.params.authId);
    ctx.type = 'html';
    if (!pending) {
      ctx.status = 404;
      ctx.body = deviceLinkUnknownPage(d.cfg.publicOrigin);
      return;
    }
    if (pending.status !== 'pending') {
      ctx.body = deviceDecidedPage(pending);
      return;
    }
    ctx.body = deviceSignInPage({
      pending,
      provider: oidc.displayName,
      csrf: loginToken(ctx, d.loginCsrf),
      unavailable: d.provider.unavailable(),
      approvalHref: oidc.operatorApproval ? `/console/register/${pending.authId}?approve` : null,
    });
  });

  const another = (form: URLSearchParams) => field(form, 'another') === '1';

  router.post('/console/oidc/device/:authId', async (ctx) => {
    const form = await checkToken(ctx);
    mustBeAvailable();
    const pending = await pendingOf(ctx, ctx.params.authId);
    if (pending?.status !== 'pending') {
      ctx.status = pending ? 409 : 404;
      ctx.type = 'html';
      ctx.body = pending ? deviceDecidedPage(pending) : deviceLinkUnknownPage(d.cfg.publicOrigin);
      return;
    }
    const secrets = d.provider.newSecrets();
    await flows.begin(ctx, { purpose: 'device', authId: pending.authId }, secrets);
    ctx.status = 303;
    ctx.redirect((await d.provider.authorizationUrl(secrets, another(form))).href);
  });

  router.post('/console/oidc/login', async (ctx) => {
    const form = await checkToken(ctx);
    mustBeAvailable();
    const secrets = d.provider.newSecrets();
    await flows.begin(ctx, { purpose: 'console', next: safeNext(field(form, 'next')) }, secrets);
    ctx.status = 303;
    ctx.redirect((await d.provider.authorizationUrl(secrets, another(form))).href);
  });

  router.get('/console/oidc/callback', async (ctx) => {
    const state = typeof ctx.query.state === 'string' ? ctx.query.state : '';
    const taken = await flows.take(ctx, state);
    if ('refused' in taken) {
      await d.record(ctx, 'oidc.callback_refused', 'unknown', undefined, { reason: taken.refused });
      throw new PageError(
        400,
        'Sign-in not completed',
        `This answer from ${oidc.displayName} does not belong to a sign-in under way in this browser: ${taken.refused}. Start again from the console's sign-in page or the device's login link.`,
      );
    }
    const flow = taken.flow;
    let identity: ProviderIdentity;
    try {
      const answer = await d.provider.finish(ctx.querystring, flow);
      identity = identityFromClaims(answer.issuer, answer.claims, oidc.groupsClaim);
    } catch (e) {
      if (!(e instanceof ProviderAnswerError)) throw e;
      const action = flow.purpose === 'device' ? 'node.signin_refused' : 'console.signin_failed';
      await d.record(ctx, action, 'unknown', flow.purpose === 'device' ? flow.authId : undefined, { method: 'identity provider', reason: e.reason });
      throw new PageError(400, 'Sign-in not completed', e.message);
    }
    if (flow.purpose === 'device') await deviceSignedIn(ctx, flow, identity);
    else await consoleSignedIn(ctx, flow, identity);
  });

  async function deviceSignedIn(ctx: ConsoleContext, flow: Flow & { purpose: 'device' }, identity: ProviderIdentity): Promise<void> {
    const label = identityLabel(identity);
    const refusal = deviceRefusal(identity, oidc);
    ctx.type = 'html';
    if (refusal) {
      const pending = await pendingOf(ctx, flow.authId);
      await d.record(ctx, 'node.signin_refused', label, pending?.hostname ?? flow.authId, {
        method: 'identity provider',
        reason: refusal,
        email: identity.email,
        emailVerified: identity.emailVerified,
        groups: identity.groups,
      });
      ctx.status = 403;
      ctx.body = deviceRefusedPage({
        reason: refusal,
        who: label,
        pending,
        authId: flow.authId,
        csrf: loginToken(ctx, d.loginCsrf),
        provider: oidc.displayName,
      });
      return;
    }
    try {
      const { node } = await d.admin.signInDevice(who(ctx, label), flow.authId, identity);
      ctx.body = deviceAddedPage(node, label);
    } catch (e) {
      if (e instanceof AdminError && e.status >= 400 && e.status < 500) throw new PageError(e.status, 'Device not added', capitalise(e.message));
      throw e;
    }
  }

  async function consoleSignedIn(ctx: ConsoleContext, flow: Flow & { purpose: 'console' }, identity: ProviderIdentity): Promise<void> {
    const label = identityLabel(identity);
    const role = consoleRole(identity, oidc);
    if (!role) {
      // Groups are read at every sign-in: whoever lost them loses the sessions they still have, too.
      await people.endSessions(identity);
      await d.record(ctx, 'console.signin_failed', label, label, { method: 'identity provider', reason: 'in no console group', groups: identity.groups });
      ctx.status = 403;
      ctx.type = 'html';
      ctx.body = noConsoleAccessPage({ who: label, provider: oidc.displayName, csrf: loginToken(ctx, d.loginCsrf), next: flow.next });
      return;
    }
    const account = await people.signIn(identity, role);
    if (account.disabled) {
      await d.record(ctx, 'console.signin_failed', account.username, account.username, { method: 'identity provider', reason: 'account disabled' });
      throw new PageError(403, 'Account disabled', `Your console account "${account.username}" was disabled by an administrator, so you were not signed in.`);
    }
    await startSession(ctx, account, d.clientIp(ctx), d.loginCsrf);
    await d.record(ctx, 'console.signin', account.username, account.username, {
      method: 'identity provider',
      role,
      email: identity.email,
      groups: identity.groups,
    });
    ctx.status = 303;
    ctx.redirect(publicUrl(d.cfg, flow.next));
  }
}
