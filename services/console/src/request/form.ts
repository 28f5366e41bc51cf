// The form of a state-changing request. The CSRF guard has usually read it already (to find the token) and left it
// in ctx.state.form; a script that sent the token as a header has not, so it is read here then.
import type { ConsoleContext } from './context.ts';
import { formLimitFor, readForm } from './form-body.ts';

export async function formOf(ctx: ConsoleContext): Promise<URLSearchParams> {
  ctx.state.form ??= await readForm(ctx.req, formLimitFor(ctx.path));
  return ctx.state.form;
}
