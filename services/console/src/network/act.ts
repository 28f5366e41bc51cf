// How a change from a form ends. Success: a one-time notice and a 303 to the page to look at next (so reloading it
// does not repeat the change). Refusal the operator can fix (the admin API's 4xx message, or a form problem found
// here): the same page again with that message, under the refusal's own status. Anything else (the coordination
// service down, a bug) goes to the one error handler (errors.ts).
import type { Context } from 'koa';
import { AdminError } from '../../../../shared/admin-client.ts';
import type { Config } from '../../../../shared/config.ts';
import { capitalise } from '../errors.ts';
import { setFlash } from '../request/flash.ts';
import { publicUrl } from '../request/public-url.ts';

/** A form that cannot be used as sent; the message says what to change. */
export class FormProblem extends Error {
  readonly status: number;
  constructor(message: string, status = 400) {
    super(message);
    this.status = status;
  }
}

export interface Outcome {
  /** The notice shown on the next page. */
  text: string;
  /** Console path to go to. */
  to: string;
}

export async function act(ctx: Context, cfg: Config, run: () => Promise<Outcome>, showError: (message: string) => Promise<string>): Promise<void> {
  let outcome: Outcome;
  try {
    outcome = await run();
  } catch (e) {
    const fixable = (e instanceof AdminError && e.status >= 400 && e.status < 500) || e instanceof FormProblem;
    if (!fixable) throw e;
    const status = (e as AdminError | FormProblem).status;
    const body = await showError(capitalise((e as Error).message));
    ctx.status = status;
    ctx.type = 'html';
    ctx.body = body;
    return;
  }
  setFlash(ctx, 'ok', outcome.text);
  ctx.status = 303;
  ctx.redirect(publicUrl(cfg, outcome.to));
}
