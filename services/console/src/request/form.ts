// The form of a state-changing request. The CSRF guard has usually read it already (to find the token) and left it
// in ctx.state.form; a script that sent the token as a header has not, so it is read here then.
import type { Context } from 'koa';
import type { ConsoleState } from '../auth/require-session.ts';
import { readForm } from './form-body.ts';

export async function formOf(ctx: Context): Promise<URLSearchParams> {
  const state = ctx.state as ConsoleState;
  state.form ??= await readForm(ctx.req);
  return state.form;
}
