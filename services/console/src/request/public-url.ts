// Absolute URLs for redirects and links that leave the page. They are built from HSE_PUBLIC_URL, never from the Host
// or X-Forwarded-Host headers, so behind a TLS-terminating proxy a redirect lands on the public https address and a
// forged Host cannot steer it elsewhere.
import type { Config } from '../../../../shared/config.ts';

export function publicUrl(cfg: Config, path: string): string {
  return `${cfg.publicOrigin}${path}`;
}

/**
 * Where to go after signing in: only a path inside the console (no scheme, no host, no "//", no backslash), else the
 * console's home. This keeps the login form from being an open redirect.
 */
export function safeNext(next: unknown): string {
  if (typeof next !== 'string' || next.length > 512) return '/console';
  if (!/^\/console(\/[A-Za-z0-9._~!$&'()*+,;=:@%/?-]*)?$/.test(next)) return '/console';
  if (next.includes('//') || next.includes('\\') || next.startsWith('/console/login') || next.startsWith('/console/logout')) return '/console';
  return next;
}
