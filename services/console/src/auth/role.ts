// Roles. An administrator changes things; an auditor sees every page (machines, users, keys, logs, accounts) and
// changes nothing. Every route that changes something is registered with requireAdmin after the session gate, so an
// auditor's request is refused with 403 and a page saying why, whatever the page showed. The one change everyone may
// make is their own password (accounts/own-account-routes.ts), and signing out.
import type { Context, Next } from 'koa';
import { PageError } from '../errors.ts';
import type { ConsoleState } from './require-session.ts';

export const READ_ONLY_TITLE = 'Read-only account';

export function readOnlyMessage(username: string): string {
  return `Your account "${username}" is an auditor account: it can see everything in the console but cannot change anything, so this change was not made. Ask an administrator to make it, or to give you an administrator account.`;
}

export async function requireAdmin(ctx: Context, next: Next): Promise<void> {
  const viewer = (ctx.state as ConsoleState).viewer;
  if (!viewer) throw new Error('requireAdmin needs the session gate in front of it');
  if (viewer.role !== 'admin') throw new PageError(403, READ_ONLY_TITLE, readOnlyMessage(viewer.username));
  await next();
}
