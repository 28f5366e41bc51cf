// The console's request context, typed once: what middleware leaves in ctx.state for the handlers after it, and what
// the server-side session (koa-session, auth/session.ts) holds. Every console module takes a ConsoleContext, the app
// and its router are built with these types, so nothing reads ctx.state or ctx.session through a cast.
import type { Router } from '@koa/router';
import type { Middleware, Next, ParameterizedContext } from 'koa';
import type { SessionData } from '../auth/session.ts';
import type { Viewer } from '../views/layout.ts';
import type { Flash } from './flash.ts';

export interface ConsoleState {
  /** The signed-in account, set by the session gate (auth/require-session.ts) for every route behind it. */
  viewer?: Viewer;
  /** The parsed form, once the CSRF guard has read it; handlers use this instead of reading the body again. */
  form?: URLSearchParams;
  /** Set by koa-ratelimit when it refuses a sign-in attempt (auth/signin-limit.ts): seconds until the next try. */
  rateLimit?: { after?: number };
}

/**
 * The session object koa-session puts on ctx.session: our fields (absent until someone signs in) and the library's
 * own methods that the console uses.
 */
export interface ConsoleSession extends Partial<SessionData> {
  /** One-time notice for the next page (flash.ts). */
  flash?: Flash;
  /** True until the session has been stored once. */
  readonly isNew: boolean;
  /** The session id in the store (the cookie carries it signed). */
  readonly externalKey?: string;
  toJSON(): Record<string, unknown>;
  /** Same data under a new id (sign-in, password change). */
  regenerate(): Promise<void> | undefined;
}

export interface ConsoleContextFields {
  session: ConsoleSession | null;
}

export type ConsoleContext = ParameterizedContext<ConsoleState, ConsoleContextFields>;
export type ConsoleMiddleware = Middleware<ConsoleState, ConsoleContextFields>;
export type ConsoleRouter = Router<ConsoleState, ConsoleContextFields>;
/** The context of a routed request: ConsoleContext plus the path's parameters (ctx.params). */
export type ConsoleRouteContext = ConsoleContext & { params: Record<string, string> };
export type { Next };

/** The signed-in account of a route behind the session gate; a route without the gate in front is a bug. */
export function viewerOf(ctx: ConsoleContext): Viewer {
  const v = ctx.state.viewer;
  if (!v) throw new Error(`${ctx.method} ${ctx.path} needs the session gate in front of it`);
  return v;
}
