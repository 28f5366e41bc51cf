// One place turns failures into answers. A PageError carries a status and a message the person can act on; a Redis
// failure becomes "store unavailable" (503); anything else is a 500 with a reference to the log line. Pages get HTML,
// API and stream paths get JSON. Never a stack trace in a response.
import crypto from 'node:crypto';
import type { Redis } from 'ioredis';
import type { ConsoleContext, Next } from './request/context.ts';
import { AdminError } from '../../../shared/admin-client.ts';
import type { Logger } from '../../../shared/log.ts';
import { FormError } from './request/form-body.ts';
import { applySecurityHeaders } from './security/headers.ts';
import { errorPage } from './views/error-page.ts';
import type { Viewer } from './views/layout.ts';

export class PageError extends Error {
  readonly status: number;
  readonly title: string;
  readonly headers: Record<string, string>;
  constructor(status: number, title: string, message: string, headers: Record<string, string> = {}) {
    super(message);
    this.status = status;
    this.title = title;
    this.headers = headers;
  }
}

export const STORE_UNAVAILABLE =
  'The console cannot reach its store (Redis), so it cannot check sessions or read the activity log right now. It retries on its own; if this lasts, check that Redis is running (see the image log).';

export const COORDINATION_UNAVAILABLE =
  'Machines, users and keys are managed by the coordination service, which is not answering right now. It is restarted on its own; if this lasts, check the image log.';

export function adminErrorTitle(status: number): string {
  if (status === 404) return 'Not found';
  if (status === 409) return 'Not possible right now';
  if (status === 400 || status === 422) return 'Check the form';
  if (status >= 500) return 'Coordination service unavailable';
  return 'Refused';
}

export function capitalise(text: string): string {
  return text.slice(0, 1).toUpperCase() + text.slice(1);
}

/** Errors that mean Redis is not answering, as opposed to a bug. */
export function isStoreError(e: unknown, redis: Redis): boolean {
  if (redis.status !== 'ready') return true;
  const err = e as { name?: string; message?: string; code?: string };
  if (err?.name === 'MaxRetriesPerRequestError') return true;
  return /Connection is closed|Stream isn't writeable|ECONNREFUSED|ENOENT|ECONNRESET|EPIPE|ETIMEDOUT|LOADING|READONLY/.test(String(err?.message ?? ''));
}

export function wantsJson(ctx: ConsoleContext): boolean {
  return ctx.path.startsWith('/console/api/') || ['/console/logs/stream', '/console/machines/stream', '/console/routes/stream'].includes(ctx.path);
}

export interface ErrorOptions {
  redis: Redis;
  log: Logger;
  csp: string;
  /** Who is signed in, so an error page can keep the navigation; null when nobody (or unknown). */
  viewer: (ctx: ConsoleContext) => Promise<Viewer | null>;
}

export function errorHandler(opts: ErrorOptions) {
  return async function errors(ctx: ConsoleContext, next: Next): Promise<void> {
    try {
      await next();
    } catch (e) {
      let status = 500;
      let title = 'Something went wrong';
      let message = '';
      let headers: Record<string, string> = {};
      if (e instanceof PageError) {
        ({ status, title, headers } = e);
        message = e.message;
      } else if (e instanceof AdminError) {
        // The coordination service's own words: they say what was wrong and what to do.
        status = e.status;
        title = adminErrorTitle(e.status);
        message = e.status >= 500 ? `${capitalise(e.message)}. ${COORDINATION_UNAVAILABLE}` : capitalise(e.message);
        if (e.status === 503) headers = { 'Retry-After': '5' };
        if (e.status >= 500) opts.log.warn('admin API failed', { path: ctx.path, status: e.status, error: e.message });
      } else if (e instanceof FormError) {
        status = e.status;
        title = status === 413 ? 'Form too large' : status === 415 ? 'Not a form' : 'Form incomplete';
        message = e.message;
      } else if (isStoreError(e, opts.redis)) {
        status = 503;
        title = 'Store unavailable';
        message = STORE_UNAVAILABLE;
        headers = { 'Retry-After': '5' };
        opts.log.warn('request failed: store unavailable', { path: ctx.path, error: (e as Error).message });
      } else {
        const ref = crypto.randomBytes(4).toString('hex');
        message = `An unexpected error stopped this request. The console log has the details under reference ${ref}.`;
        opts.log.error('request failed', { ref, method: ctx.method, path: ctx.path, error: (e as Error)?.stack ?? String(e) });
      }
      if (ctx.headerSent || !ctx.writable) return;
      const state = ctx.state;
      if (!state.viewer && status < 500 && !wantsJson(ctx)) {
        try {
          state.viewer = (await opts.viewer(ctx)) ?? undefined;
        } catch {
          // Without the store there is no navigation to show; the page still says what went wrong.
        }
      }
      // Drop whatever the failed handler had set (a download's Content-Disposition, say), keep the security headers.
      for (const name of ctx.res.getHeaderNames()) ctx.res.removeHeader(name);
      applySecurityHeaders(ctx, opts.csp);
      for (const [k, v] of Object.entries(headers)) ctx.set(k, v);
      ctx.status = status;
      if (wantsJson(ctx)) {
        ctx.body = { error: message, status };
      } else {
        ctx.type = 'html';
        ctx.body = errorPage(status, title, message, state.viewer ?? null);
      }
    }
  };
}
