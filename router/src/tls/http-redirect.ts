// Plain HTTP in TLS mode (port 80). Three things only:
//   GET /.well-known/acme-challenge/<token>  -> the ACME client's answer (200 text/plain), or 404;
//   /generate_204                            -> the relay, through the router (Tailscale's captive-portal probe is
//                                               plain HTTP by design: it checks that nothing intercepts port 80);
//   anything else                            -> a redirect to the same path on the public https URL: 301 for GET
//                                               and HEAD, 308 for other methods (308 keeps method and body).
// The redirect target is built from HSE_PUBLIC_URL, never from the request's Host, so a forged Host cannot send a
// browser elsewhere. No HSTS here: browsers ignore it over plain HTTP (RFC 6797, 8.1).
// While HTTPS has no certificate at all, redirecting would send browsers to a dead end, so the answer is a 503
// saying so (the reason itself is in the router log, not shown to the public).
import type http from 'node:http';
import type { Config } from '../../../shared/config.ts';
import { originForm, requestPath } from '../routes.ts';
import type { ChallengeStore } from './challenges.ts';
import { CHALLENGE_PREFIX } from './challenges.ts';

export interface PlainHttpDeps {
  cfg: Config;
  challenges: ChallengeStore;
  /** Hands a request to the router (for /generate_204). */
  toRouter: (req: http.IncomingMessage, res: http.ServerResponse) => void;
  /** Whether HTTPS has a certificate to serve. */
  httpsReady: () => boolean;
}

function text(res: http.ServerResponse, status: number, body: string, extra: Record<string, string> = {}): void {
  res.writeHead(status, {
    'content-type': 'text/plain; charset=utf-8',
    'content-length': String(Buffer.byteLength(body)),
    'cache-control': 'no-store',
    ...extra,
  });
  res.end(body);
}

/** Where a plain-HTTP request belongs on the public https URL. */
export function redirectTarget(publicOrigin: string, target: string): string {
  const path = originForm(target);
  return publicOrigin + (path.startsWith('/') ? path : '/');
}

export function plainHttpHandler(deps: PlainHttpDeps): (req: http.IncomingMessage, res: http.ServerResponse) => void {
  const { cfg, challenges } = deps;
  return (req, res) => {
    const path = requestPath(req.url ?? '/');
    if (path.startsWith(CHALLENGE_PREFIX)) {
      const answer = req.method === 'GET' || req.method === 'HEAD' ? challenges.answerFor(path) : null;
      if (answer === null) text(res, 404, 'hse: no such ACME challenge\n');
      else text(res, 200, answer);
      return;
    }
    if (path === '/generate_204') {
      deps.toRouter(req, res);
      return;
    }
    // The body of a redirected request is not read; close rather than drain an upload we will never use.
    const hasBody = req.headers['content-length'] !== undefined && req.headers['content-length'] !== '0';
    const extra: Record<string, string> = hasBody || req.headers['transfer-encoding'] !== undefined ? { connection: 'close' } : {};
    if (!deps.httpsReady()) {
      text(res, 503, 'hse: HTTPS is not available yet (no certificate); the operator can find why in the router log\n', { ...extra, 'retry-after': '60' });
      return;
    }
    const location = redirectTarget(cfg.publicOrigin, req.url ?? '/');
    const status = req.method === 'GET' || req.method === 'HEAD' ? 301 : 308;
    text(res, status, `Moved to ${location}\n`, { ...extra, location });
  };
}
