// Security headers on every console response. Pages carry no inline script (the CSP would refuse it): scripts and
// styles are files served by the console itself under /console/static. No HSTS here: the image does not know whether
// the operator's proxy serves every subdomain over https, so that decision stays with the proxy (README, proxy mode).
import type { ConsoleContext, Next } from '../request/context.ts';
import type { Config } from '../../../../shared/config.ts';

export function contentSecurityPolicy(cfg: Config): string {
  // The identity provider: its sign-in buttons post here and are redirected there, which form-action must allow
  // (browsers apply it to the redirect too); people's pictures come from it or its CDN, hence any https image.
  const provider = cfg.oidc ? ` ${cfg.oidc.issuer.origin}` : '';
  return [
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self'",
    `img-src 'self' data:${cfg.oidc ? ' https:' : ''}`,
    "connect-src 'self'",
    "font-src 'self'",
    // Form posts redirect to the public URL; naming it keeps that working when 'self' is spelled differently.
    `form-action 'self' ${cfg.publicOrigin}${provider}`,
    "frame-ancestors 'none'",
    "base-uri 'none'",
  ].join('; ');
}

export function applySecurityHeaders(ctx: ConsoleContext, csp: string): void {
  ctx.set('Content-Security-Policy', csp);
  ctx.set('X-Content-Type-Options', 'nosniff');
  ctx.set('X-Frame-Options', 'DENY');
  ctx.set('Referrer-Policy', 'no-referrer');
  ctx.set('Cross-Origin-Opener-Policy', 'same-origin');
  ctx.set('Cross-Origin-Resource-Policy', 'same-origin');
  ctx.set('Permissions-Policy', 'camera=(), microphone=(), geolocation=(), payment=(), usb=()');
  // Pages and API answers hold account data: never store them. Static files and the event stream set their own.
  ctx.set('Cache-Control', 'no-store');
}

export function securityHeaders(csp: string) {
  return async function securityHeadersMiddleware(ctx: ConsoleContext, next: Next): Promise<void> {
    applySecurityHeaders(ctx, csp);
    await next();
  };
}
