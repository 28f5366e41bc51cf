// Roles. An administrator changes things; an auditor sees every page (machines, users, keys, logs, accounts) and
// changes nothing. Every form that changes something is a form route for administrators (request/form-route.ts), which
// puts requireAdmin after the session gate, so an auditor's request is refused with 403 and a page saying why, whatever
// the page showed. The one change everyone may make is their own password (accounts/own-account-routes.ts), and
// signing out.
import { type ConsoleContext, type Next, viewerOf } from '../request/context.ts';
import { PageError } from '../errors.ts';

export const READ_ONLY_TITLE = 'Read-only account';

export function readOnlyMessage(username: string): string {
  return `Your account "${username}" is an auditor account: it can see everything in the console but cannot change anything, so this change was not made. Ask an administrator to make it, or to give you an administrator account.`;
}

export async function requireAdmin(ctx: ConsoleContext, next: Next): Promise<void> {
  const viewer = viewerOf(ctx);
  if (viewer.role !== 'admin') throw new PageError(403, READ_ONLY_TITLE, readOnlyMessage(viewer.username));
  await next();
}
