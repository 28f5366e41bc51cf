// Starts the tests' OpenID provider (test/harness/oidc-idp-server.ts: oidc-provider over HTTPS with a certificate of
// the test CA) as its own process, and knows its users:
//   alice    alice@example.com        verified   eng            adds devices; has a picture
//   bob      bob@example.com          verified   sales          adds devices; no console group
//   mallory  mallory@elsewhere.example verified  eng            outside the allowed domain
//   erin     erin@example.com         verified   (none)         in no allowed group
//   dave     dave@example.com         NOT verified eng          e-mail not verified
//   olivia   olivia@example.com       verified   hse-admins     console administrator
//   carol    carol@example.com        verified   hse-auditors   console auditor
// The provider's issuer is https://localhost:<port>: another site than the hse under test (https://127.0.0.1:…),
// as a real provider is, so cookies and redirects cross sites the way they do in use. The certificate of
// test/harness/ca.ts names both. It listens on 127.0.0.1 and, where the machine has it, ::1 (localhost may resolve to
// either).
//
//   const idp = await startIdp({ ca, redirectUris: [`${publicUrl}/console/oidc/callback`] });
//   ... HSE_OIDC_ISSUER: idp.issuer, HSE_OIDC_CLIENT_ID: IDP_CLIENT.id, HSE_OIDC_CLIENT_SECRET: IDP_CLIENT.secret ...
//   await idp.stop();
import https from 'node:https';
import net from 'node:net';
import type { TestCA } from './ca.ts';
import type { IdpServerConfig, IdpUser } from './oidc-idp-server.ts';
import { freePort, type Proc, runProcess } from './process.ts';

export const IDP_CLIENT = { id: 'hse-test', secret: 'hse-test-client-secret-0123456789' };
/** A second client registered at the same provider (another application): its codes must not work for hse. */
export const OTHER_CLIENT = { id: 'other-app', secret: 'other-app-client-secret-0123456789' };

const user = (login: string, email: string, groups: string[], emailVerified = true, picture = false): IdpUser => ({
  sub: `sub-${login}-${Buffer.from(login).toString('hex')}`,
  login,
  password: `${login}-password`,
  email,
  emailVerified,
  name: `${login.slice(0, 1).toUpperCase()}${login.slice(1)} Example`,
  groups,
  picture,
});

export const USERS = {
  alice: user('alice', 'alice@example.com', ['eng'], true, true),
  bob: user('bob', 'bob@example.com', ['sales']),
  mallory: user('mallory', 'mallory@elsewhere.example', ['eng']),
  erin: user('erin', 'erin@example.com', []),
  dave: user('dave', 'dave@example.com', ['eng'], false),
  olivia: user('olivia', 'olivia@example.com', ['hse-admins']),
  carol: user('carol', 'carol@example.com', ['hse-auditors']),
};

/** The HSE_OIDC_* settings the tests run hse with against this provider. */
export function oidcEnv(idp: TestIdp, extra: Record<string, string> = {}): Record<string, string> {
  return {
    HSE_OIDC_ISSUER: idp.issuer,
    HSE_OIDC_CLIENT_ID: IDP_CLIENT.id,
    HSE_OIDC_CLIENT_SECRET: IDP_CLIENT.secret,
    HSE_OIDC_SCOPES: 'openid profile email groups',
    HSE_OIDC_NAME: 'Test IdP',
    HSE_OIDC_ALLOWED_DOMAINS: 'example.com',
    HSE_OIDC_ALLOWED_GROUPS: 'eng,sales',
    HSE_OIDC_ADMIN_GROUPS: 'hse-admins',
    HSE_OIDC_AUDITOR_GROUPS: 'hse-auditors',
    // The console process fetches from the provider with Node, which trusts the test CA only this way.
    NODE_EXTRA_CA_CERTS: idp.caFile,
    ...extra,
  };
}

export interface TestIdp {
  issuer: string;
  port: number;
  caFile: string;
  proc: Proc;
  /** The next token response carries an ID token with `claim` set to `value`, re-signed with the provider's key. */
  tamperNextIdToken(claim: string, value: unknown): Promise<void>;
  /** Changes the user's groups at the provider (what the next sign-in reports). */
  setGroups(user: IdpUser, groups: string[]): Promise<void>;
  stop(): Promise<void>;
}

function canListen(host: string): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.once('error', () => resolve(false));
    s.listen(0, host, () => s.close(() => resolve(true)));
  });
}

export interface IdpOptions {
  ca: TestCA;
  /** Redirect URIs registered for the hse client (and the other client). */
  redirectUris: string[];
  /** Port to listen on; default a free one. Fix it to start hse before the provider. */
  port?: number;
  /** Issuer host; default localhost. */
  host?: string;
}

export async function startIdp(opts: IdpOptions): Promise<TestIdp> {
  const port = opts.port ?? (await freePort());
  const issuer = `https://${opts.host ?? 'localhost'}:${port}`;
  const hosts = ['127.0.0.1', ...((await canListen('::1')) ? ['::1'] : [])];
  const config: IdpServerConfig = {
    issuer,
    port,
    hosts,
    certFile: opts.ca.certFile,
    keyFile: opts.ca.keyFile,
    users: Object.values(USERS),
    clients: [
      { client_id: IDP_CLIENT.id, client_secret: IDP_CLIENT.secret, redirect_uris: opts.redirectUris },
      { client_id: OTHER_CLIENT.id, client_secret: OTHER_CLIENT.secret, redirect_uris: opts.redirectUris },
    ],
  };
  const proc = runProcess('test/harness/oidc-idp-server.ts', { OIDC_IDP_CONFIG: JSON.stringify(config) });
  /** Posts to one of the provider's test-only endpoints (oidc-idp-server.ts). */
  const testControl = async (path: string, json: unknown): Promise<void> => {
    const body = new URLSearchParams({ json: JSON.stringify(json) }).toString();
    const status = await new Promise<number>((resolve, reject) => {
      const req = https.request({ host: '127.0.0.1', port, path, method: 'POST', ca: opts.ca.caPem, servername: 'localhost', agent: false }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.on('error', reject);
      req.setHeader('content-type', 'application/x-www-form-urlencoded');
      req.end(body);
    });
    if (status !== 204) throw new Error(`the test provider answered ${status} to ${path}`);
  };
  try {
    await proc.waitFor(/test provider listening/, 30_000);
  } catch (e) {
    await proc.stop();
    throw e;
  }
  return {
    issuer,
    port,
    caFile: opts.ca.caFile,
    proc,
    tamperNextIdToken: (claim, value) => testControl('/__test/tamper', { claim, value }),
    setGroups: (u, groups) => testControl('/__test/groups', { login: u.login, groups }),
    stop: async () => {
      await proc.stop();
    },
  };
}
