// One way every signed-in form of the console is handled (sign-in, sign-out and the identity provider's buttons,
// which come before a session, have their own routes). For POST <path>:
//   1. the CSRF token: checked by csrfGuard (auth/require-session.ts) for every state-changing request before routing,
//      which also leaves the parsed form in ctx.state.form;
//   2. the session gate, then the role: administrators only, unless the form is everyone's (their own password);
//   3. the change, given the form;
//   4. done: a one-time notice and a 303 to the page to look at next, so reloading it does not repeat the change — or,
//      for a secret shown once (a new key, a generated password), that page at once, never through the session;
//   5. refused in a way the operator can fix (the admin API's 4xx in its own words, or a FormProblem found here): the
//      same page again with the message, under the refusal's status, the form as typed.
// Anything else (the coordination service down, a bug) goes to the one error handler (errors.ts).
import { AdminError } from '../../../../shared/admin-client.ts';
import { HseError } from '../../../../shared/errors.ts';
import type { Config } from '../../../../shared/config.ts';
import { requireAdmin } from '../auth/role.ts';
import { capitalise } from '../errors.ts';
import type { ConsoleMiddleware, ConsoleRouteContext, ConsoleRouter } from './context.ts';
import { setFlash } from './flash.ts';
import { formOf } from './form.ts';
import { publicUrl } from './public-url.ts';

/** A form that cannot be used as sent (status 400 unless said otherwise); the message says what to change. */
export class FormProblem extends HseError {
  constructor(message: string, status = 400) {
    super(status, message);
  }
}

/** Where a successful change leads: a notice and the console path to go to, or a page to show now. */
export type Outcome = { text: string; to: string } | { page: string };

export interface FormRoute {
  /** Who may send the form: administrators (every change to the tailnet or the accounts), or anyone signed in. */
  role: 'admin' | 'anyone';
  run(ctx: ConsoleRouteContext, form: URLSearchParams): Promise<Outcome>;
  /** The page again, with the refusal's message above the form (and the refusal itself, for its details). */
  refused(ctx: ConsoleRouteContext, message: string, form: URLSearchParams, refusal: HseError): Promise<string>;
}

export interface FormRouteDeps {
  cfg: Config;
  gate: ConsoleMiddleware;
}

/** Registers POST `path` as a console form (steps above). */
export function formRoute(router: ConsoleRouter, path: string, d: FormRouteDeps, route: FormRoute): void {
  const handle = async (ctx: ConsoleRouteContext): Promise<void> => {
    const form = await formOf(ctx);
    let outcome: Outcome;
    try {
      outcome = await route.run(ctx, form);
    } catch (e) {
      const fixable = (e instanceof AdminError || e instanceof FormProblem) && e.status >= 400 && e.status < 500;
      if (!fixable) throw e;
      // The admin API words its refusals as clauses ("user \"alice\" already exists"); FormProblems are sentences.
      const body = await route.refused(ctx, e instanceof AdminError ? capitalise(e.message) : e.message, form, e);
      ctx.status = e.status;
      ctx.type = 'html';
      ctx.body = body;
      return;
    }
    if ('page' in outcome) {
      ctx.type = 'html';
      ctx.body = outcome.page;
      return;
    }
    setFlash(ctx, 'ok', outcome.text);
    ctx.status = 303;
    ctx.redirect(publicUrl(d.cfg, outcome.to));
  };
  if (route.role === 'admin') router.post(path, d.gate, requireAdmin, handle);
  else router.post(path, d.gate, handle);
}
