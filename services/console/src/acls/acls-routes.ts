// Access controls (the tailnet policy), through the coordination service's admin API, which checks, stores, versions
// and logs every change (with the account, its address and the diff).
//   GET  /console/acls                         the policy in force, its tests, its history; the editor for administrators
//   POST /console/acls/check    text           -> 200: the text as typed, with its problems and tests; nothing changes
//   POST /console/acls          text, ifVersion -> 303 (saved) | 400: the text as typed with every problem at its line
//                                                  and column, the policy in force unchanged | 409: someone saved in
//                                                  between (ifVersion), or the policy is HSE_POLICY_FILE
//   POST /console/acls/revert/:version          -> 303 (the old text saved as a new version) | 404 | 409
// Administrators only for the three posts (auditors see the page without the editor).
import { setTimeout as sleep } from 'node:timers/promises';
import type { PolicyCheck, PolicyProblem } from '../../../../shared/admin-client.ts';
import type { HseError } from '../../../../shared/errors.ts';
import type { NetworkDeps } from '../network/deps.ts';
import { actorOf } from '../network/actor.ts';
import { PageError } from '../errors.ts';
import { type ConsoleContext, type ConsoleRouter, viewerOf } from '../request/context.ts';
import { takeFlash } from '../request/flash.ts';
import { field } from '../request/form-body.ts';
import { formRoute } from '../request/form-route.ts';
import { type AclsView, aclsPage } from '../views/acls-page.ts';

/** The text as the form sent it; browsers send a textarea's line breaks as CRLF, the policy keeps LF. */
function policyText(form: URLSearchParams): string {
  return field(form, 'text').replace(/\r\n?/g, '\n');
}

function ifVersionOf(form: URLSearchParams): number {
  const n = Number(field(form, 'ifVersion'));
  return Number.isInteger(n) && n >= 0 ? n : 0;
}

/** The problems a refused save carries (AdminError details from the admin API), or null for another refusal. */
function refusedProblems(e: HseError): Pick<PolicyCheck, 'errors' | 'warnings'> | null {
  const d = e.details as { errors?: unknown; warnings?: unknown } | undefined;
  const list = (v: unknown): PolicyProblem[] =>
    Array.isArray(v) ? v.filter((p): p is PolicyProblem => typeof p?.line === 'number' && typeof p?.column === 'number' && typeof p?.message === 'string') : [];
  if (e.status !== 400 || !d || !Array.isArray(d.errors)) return null;
  return { errors: list(d.errors), warnings: list(d.warnings) };
}

export function aclsRoutes(router: ConsoleRouter, d: NetworkDeps): void {
  /**
   * The admin API answers a save once the version is stored; the policy it reports as in force follows a moment
   * later, when the coordination service's own change event comes back to it. Waiting for that (a few seconds at
   * most) makes the page after a save show the new version in force rather than the one before.
   */
  const untilInForce = async (ctx: ConsoleContext, version: number): Promise<void> => {
    const deadline = Date.now() + 3_000;
    while (((await d.admin.getPolicy(actorOf(ctx))).version ?? 0) < version && Date.now() < deadline) await sleep(50);
  };

  const show = async (ctx: ConsoleContext, extra: Partial<AclsView> = {}): Promise<string> => {
    const who = actorOf(ctx);
    const [policy, history] = await Promise.all([d.admin.getPolicy(who), d.admin.policyHistory(who)]);
    const flash = extra.error || extra.check ? null : takeFlash(ctx);
    return aclsPage({ viewer: viewerOf(ctx), policy, history, flash, ...extra });
  };

  router.get('/console/acls', d.gate, async (ctx) => {
    ctx.type = 'html';
    ctx.body = await show(ctx);
  });

  formRoute(router, '/console/acls/check', d, {
    role: 'admin',
    run: async (ctx, form) => {
      const text = policyText(form);
      const r = await d.admin.checkPolicy(actorOf(ctx), text);
      return { page: await show(ctx, { draft: { text, ifVersion: ifVersionOf(form) }, check: { kind: 'check', errors: r.errors, warnings: r.warnings } }) };
    },
    refused: (ctx, message, form) => show(ctx, { error: message, draft: { text: policyText(form), ifVersion: ifVersionOf(form) } }),
  });

  formRoute(router, '/console/acls', d, {
    role: 'admin',
    run: async (ctx, form) => {
      const v = await d.admin.setPolicy(actorOf(ctx), policyText(form), ifVersionOf(form));
      await untilInForce(ctx, v.version);
      const warnings = v.warnings.length ? ` Warnings: ${v.warnings.map((w) => `line ${w.line}, column ${w.column}: ${w.message}`).join('; ')}.` : '';
      return { text: `Saved as version ${v.version}. Devices get the new rules within a second.${warnings}`, to: '/console/acls' };
    },
    refused: async (ctx, message, form, e) => {
      const draft = { text: policyText(form), ifVersion: ifVersionOf(form) };
      const problems = refusedProblems(e);
      if (problems) return show(ctx, { draft, check: { kind: 'refused', ...problems } });
      return show(ctx, { error: message, draft });
    },
  });

  formRoute(router, '/console/acls/revert/:version', d, {
    role: 'admin',
    run: async (ctx) => {
      const text = ctx.params.version;
      if (!/^\d{1,12}$/.test(text)) throw new PageError(404, 'Version not found', `There is no policy version "${text}".`);
      const v = await d.admin.revertPolicy(actorOf(ctx), Number(text));
      await untilInForce(ctx, v.version);
      return { text: `Reverted to version ${text}: saved as version ${v.version}, in force now.`, to: '/console/acls' };
    },
    refused: async (ctx, message, _form, e) => {
      // A version that no longer compiles against today's tailnet (a user it names was deleted) is refused like a save.
      const problems = refusedProblems(e);
      if (!problems) return show(ctx, { error: message });
      const old = (await d.admin.policyHistory(actorOf(ctx))).find((h) => String(h.version) === ctx.params.version);
      return show(ctx, { draft: { text: old?.text ?? '', ifVersion: null }, check: { kind: 'refused', ...problems } });
    },
  });
}
