// Who acts, for the coordination service's admin API: the signed-in console account and the client address the
// router resolved. The admin API writes the activity entry for each change with these, so the console never writes
// a second entry for the same change.
import { type ConsoleContext, viewerOf } from '../request/context.ts';
import type { Actor } from '../../../../shared/admin-client.ts';
import { clientAddress } from '../request/client-address.ts';

export function actorOf(ctx: ConsoleContext): Actor {
  return { actor: viewerOf(ctx).username, ip: clientAddress(ctx.req.headers) };
}
