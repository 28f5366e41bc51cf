// Who acts, for the coordination service's admin API: the signed-in console account and the client address the
// router resolved. The admin API writes the activity entry for each change with these, so the console never writes
// a second entry for the same change.
import type { Context } from 'koa';
import type { Actor } from '../../../../shared/admin-client.ts';
import type { ConsoleState } from '../auth/require-session.ts';
import { clientAddress } from '../request/client-address.ts';

export function actorOf(ctx: Context): Actor {
  const viewer = (ctx.state as ConsoleState).viewer;
  if (!viewer) throw new Error('actorOf() needs the session gate in front of the route');
  return { actor: viewer.username, ip: clientAddress(ctx.req.headers) };
}
