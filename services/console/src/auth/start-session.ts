// The one way a console session begins, whatever proved who the person is (password or identity provider): the
// session's data replaced, a fresh id (so an id planted or seen before sign-in is worthless afterwards: no fixation),
// and the sign-in form's CSRF cookie cleared.
import type { ConsoleContext } from '../request/context.ts';
import { clearLoginToken, newToken, type LoginCsrfOptions } from '../security/csrf.ts';
import { accountKey, type Account } from './accounts.ts';
import type { SessionData } from './session.ts';

export async function startSession(ctx: ConsoleContext, account: Account, ip: string, loginCsrf: LoginCsrfOptions): Promise<void> {
  const now = Date.now();
  // The account's immutable id binds the session to this account: one created later under the same name is another.
  const data: SessionData = { account: accountKey(account.username), accountId: account.id, role: account.role, csrf: newToken(), authAt: now, seen: now, ip };
  const sess = ctx.session;
  if (!sess) throw new Error('startSession needs the session middleware in front of it');
  for (const k of Object.keys(sess.toJSON())) Reflect.deleteProperty(sess, k);
  Object.assign(sess, data);
  await sess.regenerate();
  clearLoginToken(ctx, loginCsrf);
}
