// Sign-ins under way. Starting one stores its secrets (state, nonce, PKCE verifier) and what it is for in Redis under
// its state value for FLOW_TTL_S, and ties it to the browser that started it: a random binding value in a signed,
// HttpOnly cookie (path /console/oidc), whose hash the stored flow keeps. The callback takes the flow named by the
// returned state — once (GETDEL), so a replayed callback finds nothing — and only if the cookie of this browser
// matches, so a callback URL carried to another browser (login CSRF, a stolen code) is refused. One binding serves
// any number of sign-ins in parallel tabs.
import crypto from 'node:crypto';
import type { Redis } from 'ioredis';
import type { Config } from '../../../../shared/config.ts';
import { K } from '../../../../shared/redis-keys.ts';
import { tokensMatch } from '../security/csrf.ts';
import type { ConsoleContext } from '../request/context.ts';

/** What one sign-in carries from the start to the callback (kept server-side here). */
export interface FlowSecrets {
  state: string;
  nonce: string;
  codeVerifier: string;
}

/** Ten minutes from the button to the provider's answer, as long as a person reasonably takes to sign in. */
export const FLOW_TTL_S = 600;
const BINDING_MAX_AGE_MS = 60 * 60 * 1000;
const STATE_RE = /^[A-Za-z0-9_-]{20,128}$/;

/** What a sign-in is for: adding the device of a login request, or a console session (then where to go after). */
export type FlowPurpose = { purpose: 'device'; authId: string } | { purpose: 'console'; next: string };

export type Flow = FlowSecrets &
  FlowPurpose & {
    /** sha256 (base64url) of the browser's binding value. */
    binding: string;
  };

export function bindingCookieName(cfg: Config): string {
  return cfg.secure ? '__Secure-hse_oidc' : 'hse_oidc';
}

const hash = (v: string) => crypto.createHash('sha256').update(v).digest('base64url');

export class Flows {
  private readonly redis: Redis;
  private readonly cfg: Config;
  constructor(redis: Redis, cfg: Config) {
    this.redis = redis;
    this.cfg = cfg;
  }

  private binding(ctx: ConsoleContext): string | null {
    const v = ctx.cookies.get(bindingCookieName(this.cfg), { signed: true });
    return v && /^[A-Za-z0-9_-]{43}$/.test(v) ? v : null;
  }

  /** Stores a new flow with `secrets` (fresh from the provider, for its authorization URL) for this browser. */
  async begin(ctx: ConsoleContext, what: FlowPurpose, secrets: FlowSecrets): Promise<void> {
    const binding = this.binding(ctx) ?? crypto.randomBytes(32).toString('base64url');
    ctx.cookies.set(bindingCookieName(this.cfg), binding, {
      signed: true,
      httpOnly: true,
      // Lax: sent on the provider's top-level redirect back to us, not on cross-site subrequests.
      sameSite: 'lax',
      secure: this.cfg.secure,
      path: '/console/oidc',
      maxAge: BINDING_MAX_AGE_MS,
      overwrite: true,
    });
    const flow: Flow = { ...secrets, ...what, binding: hash(binding) } as Flow;
    await this.redis.set(`${K.consoleOidcFlowPrefix}${secrets.state}`, JSON.stringify(flow), 'EX', FLOW_TTL_S);
  }

  /**
   * The flow the callback's state names, removed as it is read; null when there is none (unknown, expired, already
   * used) or it was started in another browser.
   */
  async take(ctx: ConsoleContext, state: string): Promise<{ flow: Flow } | { refused: string }> {
    if (!STATE_RE.test(state)) return { refused: 'the answer carries no valid state value' };
    const json = await this.redis.getdel(`${K.consoleOidcFlowPrefix}${state}`);
    if (json === null) return { refused: 'no sign-in with this state is under way: it was already used, has expired, or was never started here' };
    const flow = JSON.parse(json) as Flow;
    const binding = this.binding(ctx);
    if (!binding || !tokensMatch(hash(binding), flow.binding)) return { refused: 'the sign-in was started in another browser' };
    return { flow };
  }
}
