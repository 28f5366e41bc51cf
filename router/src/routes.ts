// Which service a request goes to, by path prefix alone (docs/architecture.md, "Processes"):
//   /console, /console/...           -> console
//   /derp, /derp/..., /generate_204  -> relay   (/generate_204 is the clients' captive-portal probe, answered by the
//                                                DERP server in Tailscale's design, so it lives with the relay)
//   everything else                  -> coordination
// A prefix matches whole path segments only, so /consolex and /derpy go to coordination.
import type { ServiceName } from '../../shared/paths.ts';

/**
 * The path part of a request target. Origin-form ("/a/b?q") is the normal case; absolute-form
 * ("http://host/a/b?q", legal in HTTP/1.1 and sent by some clients) is reduced to its path so it routes the same.
 */
export function requestPath(target: string): string {
  if (target.startsWith('/')) {
    const q = target.indexOf('?');
    return q === -1 ? target : target.slice(0, q);
  }
  try {
    return new URL(target).pathname;
  } catch {
    return target;
  }
}

function under(path: string, prefix: string): boolean {
  return path === prefix || path.startsWith(`${prefix}/`);
}

export function routeFor(path: string): ServiceName {
  if (under(path, '/console')) return 'console';
  if (under(path, '/derp') || path === '/generate_204') return 'relay';
  return 'coordination';
}

/** The origin-form target to send upstream: absolute-form is reduced so services see the usual "/path?query". */
export function originForm(target: string): string {
  if (target.startsWith('/')) return target;
  try {
    const u = new URL(target);
    return u.pathname + u.search;
  } catch {
    return target;
  }
}
