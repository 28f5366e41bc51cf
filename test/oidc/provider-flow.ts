// A browser stand-in for sign-ins with the test provider at the HTTP level: one cookie jar for hse and one for the
// provider (two sites, as in a browser), redirects followed by hand so a test can stop at the provider's answer and
// change it — the state, the code, the issuer — before it reaches hse.
import { Client, type Reply } from '../harness/console-client.ts';
import type { IdpUser } from '../harness/oidc-idp-server.ts';

export class ProviderBrowser {
  readonly hse: Client;
  readonly idp: Client;
  private readonly idpOrigin: string;

  constructor(hseBase: string, issuer: string, ca: string, localAddress?: string) {
    this.hse = new Client(hseBase, localAddress, ca);
    this.idp = new Client(issuer, undefined, ca);
    this.idpOrigin = new URL(issuer).origin;
  }

  /** The path and query of an absolute URL on the provider. */
  private idpPath(location: string): string {
    const u = new URL(location);
    if (u.origin !== this.idpOrigin) throw new Error(`expected a redirect to the provider, got ${location}`);
    return `${u.pathname}${u.search}`;
  }

  /** Opens the device's login link and presses "Sign in with … to add it"; returns the redirect to the provider. */
  async startDevice(authUrl: string): Promise<string> {
    const path = new URL(authUrl).pathname;
    const page = await this.hse.request(path);
    if (page.status !== 200) throw new Error(`device page answered ${page.status}: ${page.body.slice(0, 500)}`);
    const r = await this.hse.request(`/console/oidc/device/${path.split('/').pop()}`, { form: { csrf: Client.csrfOf(page.body) } });
    if (r.status !== 303) throw new Error(`starting the device sign-in answered ${r.status}: ${r.body.slice(0, 500)}`);
    return String(r.headers.location);
  }

  /** Opens the console's sign-in page and presses "Sign in with …"; returns the redirect to the provider. */
  async startConsole(next?: string): Promise<string> {
    const csrf = await this.hse.loginForm();
    const r = await this.hse.request('/console/oidc/login', { form: { csrf, ...(next ? { next } : {}) } });
    if (r.status !== 303) throw new Error(`starting the console sign-in answered ${r.status}: ${r.body.slice(0, 500)}`);
    return String(r.headers.location);
  }

  /**
   * Follows the provider from the authorization URL: fills in its login form as `user` when it asks, and returns the
   * redirect back to hse (the callback URL with code and state) without following it.
   */
  async signInAtProvider(authorizationUrl: string, user: IdpUser): Promise<string> {
    let location = authorizationUrl;
    for (let hops = 0; hops < 12; hops++) {
      if (new URL(location).origin !== this.idpOrigin) return location;
      const r: Reply = await this.idp.request(this.idpPath(location));
      if (r.status === 200 && r.body.includes('name="login"')) {
        const action = /action="([^"]+)"/.exec(r.body)?.[1];
        if (!action) throw new Error(`provider login form without action:\n${r.body}`);
        const posted = await this.idp.request(action, { form: { login: user.login, password: user.password } });
        if (posted.status !== 303) throw new Error(`provider login answered ${posted.status}: ${posted.body.slice(0, 500)}`);
        location = new URL(String(posted.headers.location), this.idpOrigin).href;
        continue;
      }
      if (r.status === 200 && /document\.forms\[0\]\.submit\(\)/.test(r.body)) {
        // A page that posts itself at once (the provider ending the previous account's session): post it.
        const action = /<form method="post" action="([^"]+)"/.exec(r.body)?.[1];
        if (!action) throw new Error(`self-posting page without action:\n${r.body}`);
        const fields = Object.fromEntries([...r.body.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)"\/?>/g)].map((m) => [m[1], m[2]]));
        const posted = await this.idp.request(this.idpPath(new URL(action, this.idpOrigin).href), { form: fields });
        if (posted.status < 300 || posted.status >= 400) throw new Error(`self-posting page answered ${posted.status}: ${posted.body.slice(0, 500)}`);
        location = new URL(String(posted.headers.location), this.idpOrigin).href;
        continue;
      }
      if (r.status < 300 || r.status >= 400) throw new Error(`provider answered ${r.status} at ${location}: ${r.body.slice(0, 500)}`);
      location = new URL(String(r.headers.location), this.idpOrigin).href;
    }
    throw new Error('the provider redirected too often');
  }

  /** Delivers the provider's answer (the callback URL, possibly changed by the test) to hse. */
  callback(callbackUrl: string): Promise<Reply> {
    const u = new URL(callbackUrl);
    return this.hse.request(`${u.pathname}${u.search}`);
  }
}

/** The callback URL with one query parameter replaced (or removed with null). */
export function withParam(url: string, name: string, value: string | null): string {
  const u = new URL(url);
  if (value === null) u.searchParams.delete(name);
  else u.searchParams.set(name, value);
  return u.href;
}
