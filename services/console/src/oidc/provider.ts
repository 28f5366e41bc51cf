// The identity provider as this console sees it: openid-client (OpenID Certified relying party) does discovery, the
// authorization URL, the code exchange with PKCE, and ID-token validation (signature against the provider's JWKS,
// iss, aud, azp, exp, iat, nonce); UserInfo is asked for the profile and groups a provider keeps out of the ID token.
//
// Discovery runs at start and is retried with backoff (2 s doubling to 5 min) while the provider is unreachable or
// refuses (wrong issuer in its metadata, TLS not trusted, 404): each failure is one log line with the reason and the
// next attempt; meanwhile `unavailable()` says why, and the console keeps local passwords and pre-auth keys working.
// main.ts loads this module (and with it openid-client) only when a provider is configured.
import * as client from 'openid-client';
import type { OidcConfig } from '../../../../shared/config.ts';
import type { Logger } from '../../../../shared/log.ts';
import { ProviderAnswerError } from './answer-error.ts';
import type { FlowSecrets } from './flows.ts';

const FIRST_RETRY_MS = 2_000;
const MAX_RETRY_MS = 300_000;
/** Seconds a request to the provider may take (discovery, token, UserInfo). */
const REQUEST_TIMEOUT_S = 10;

/** The reason an openid-client or fetch failure gives, with its cause (the TLS or socket error) and the provider's words. */
export function describeFailure(e: unknown): string {
  const err = e as { message?: string; error?: string; error_description?: string; cause?: unknown; code?: string };
  const parts = [err?.message ?? String(e)];
  if (err?.error) parts.push(`${err.error}${err.error_description ? `: ${err.error_description}` : ''}`);
  const cause = err?.cause as { message?: string; code?: string; error?: string; error_description?: string } | undefined;
  if (cause && typeof cause === 'object') {
    if (cause.error) parts.push(`${cause.error}${cause.error_description ? `: ${cause.error_description}` : ''}`);
    else if (cause.message) parts.push(cause.code ? `${cause.message} (${cause.code})` : cause.message);
  }
  return [...new Set(parts)].join(' — ');
}

export class IdentityProvider {
  readonly cfg: OidcConfig;
  private readonly log: Logger;
  private config: client.Configuration | null = null;
  private lastError = 'discovery has not finished yet';
  private timer: NodeJS.Timeout | null = null;
  private stopped = false;

  constructor(cfg: OidcConfig, log: Logger) {
    this.cfg = cfg;
    this.log = log;
  }

  /** Starts discovery (and its retries) in the background. */
  start(): void {
    void this.discover(FIRST_RETRY_MS);
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
  }

  /** Why sign-in with the provider cannot start now, or null when it can. */
  unavailable(): string | null {
    return this.config ? null : this.lastError;
  }

  private async discover(nextDelay: number): Promise<void> {
    if (this.stopped) return;
    try {
      const found = await client.discovery(this.cfg.issuer, this.cfg.clientId, undefined, undefined, { timeout: REQUEST_TIMEOUT_S });
      const meta = found.serverMetadata();
      // client_secret_basic is the default the specification gives a provider that lists no methods.
      const methods = meta.token_endpoint_auth_methods_supported ?? ['client_secret_basic'];
      const auth = methods.includes('client_secret_basic') ? client.ClientSecretBasic(this.cfg.clientSecret) : client.ClientSecretPost(this.cfg.clientSecret);
      this.config = new client.Configuration(meta, this.cfg.clientId, this.cfg.clientSecret, auth);
      this.config.timeout = REQUEST_TIMEOUT_S;
      this.log.info('identity provider ready', {
        issuer: meta.issuer,
        authorization: meta.authorization_endpoint,
        redirectUri: this.cfg.redirectUri,
      });
    } catch (e) {
      this.lastError = `the identity provider ${this.cfg.issuer.href} could not be used: ${describeFailure(e)}`;
      this.log.warn('identity provider unreachable or refused; sign-in with it is unavailable until it answers, local passwords and pre-auth keys still work', {
        issuer: this.cfg.issuer.href,
        error: describeFailure(e),
        retryInSeconds: nextDelay / 1000,
      });
      if (this.stopped) return;
      this.timer = setTimeout(() => void this.discover(Math.min(nextDelay * 2, MAX_RETRY_MS)), nextDelay);
      this.timer.unref();
    }
  }

  private ready(): client.Configuration {
    if (!this.config) throw new ProviderAnswerError('provider unavailable', this.lastError);
    return this.config;
  }

  /** Fresh state, nonce and PKCE verifier for one sign-in. */
  newSecrets(): FlowSecrets {
    return { state: client.randomState(), nonce: client.randomNonce(), codeVerifier: client.randomPKCECodeVerifier() };
  }

  /**
   * Where to send the browser to sign in. `anotherAccount` asks the provider to show its sign-in form even to someone
   * signed in there (prompt=login), so a person refused as one account can try another.
   */
  async authorizationUrl(s: FlowSecrets, anotherAccount = false): Promise<URL> {
    const config = this.ready();
    return client.buildAuthorizationUrl(config, {
      redirect_uri: this.cfg.redirectUri,
      scope: this.cfg.scopes.join(' '),
      response_type: 'code',
      code_challenge: await client.calculatePKCECodeChallenge(s.codeVerifier),
      code_challenge_method: 'S256',
      state: s.state,
      nonce: s.nonce,
      ...(anotherAccount ? { prompt: 'login' } : {}),
    });
  }

  /**
   * Finishes a sign-in from the callback's query: checks the response (state, and the issuer parameter of RFC 9207
   * where the provider sends one), exchanges the code with the PKCE verifier, validates the ID token including its
   * nonce, and merges UserInfo into its claims (the ID token wins for what both hold; UserInfo's subject must match).
   */
  async finish(query: string, s: FlowSecrets): Promise<{ issuer: string; claims: Record<string, unknown> }> {
    const config = this.ready();
    // openid-client takes the redirect_uri of the token request from this URL, so it is the public one, whatever
    // address the request reached us on.
    const current = new URL(`${this.cfg.redirectUri}?${query}`);
    let tokens: Awaited<ReturnType<typeof client.authorizationCodeGrant>>;
    try {
      tokens = await client.authorizationCodeGrant(config, current, {
        pkceCodeVerifier: s.codeVerifier,
        expectedState: s.state,
        expectedNonce: s.nonce,
        idTokenExpected: true,
      });
    } catch (e) {
      if (e instanceof client.AuthorizationResponseError) {
        // The provider said no (the person cancelled, or is not allowed to use this client there).
        throw new ProviderAnswerError(`provider refused: ${e.error}`, `${this.cfg.displayName} did not sign you in: ${e.error_description ?? e.error}.`);
      }
      const why = describeFailure(e);
      this.log.warn('sign-in answer refused', { error: why });
      throw new ProviderAnswerError(why, `The answer from ${this.cfg.displayName} could not be accepted (${why}), so you were not signed in.`);
    }
    const idClaims = tokens.claims();
    if (!idClaims) throw new ProviderAnswerError('no ID token', `${this.cfg.displayName} sent no ID token, so you were not signed in.`);
    let info: Record<string, unknown> = {};
    if (config.serverMetadata().userinfo_endpoint) {
      try {
        info = (await client.fetchUserInfo(config, tokens.access_token, idClaims.sub)) as Record<string, unknown>;
      } catch (e) {
        // The ID token alone is enough to know who signed in; UserInfo only adds profile and groups.
        this.log.warn('UserInfo request failed; using the ID token claims alone', { error: describeFailure(e) });
      }
    }
    return { issuer: config.serverMetadata().issuer, claims: { ...info, ...idClaims } };
  }
}
