// A real OpenID provider for the tests, run as its own process by test/harness/oidc-idp.ts: oidc-provider (OpenID
// Certified) serving HTTPS on loopback with a certificate of the test CA, with test users, their groups, and a plain
// login form (fields `login` and `password`) a browser or an HTTP client fills in. Consent is given on the users'
// behalf, as a company provider does for its own applications. Claims follow the scopes as the specification says
// (conformIdTokenClaims): with an access token issued, the ID token carries `sub` and the profile, e-mail and groups
// arrive through UserInfo, the way many providers send groups.
//
// Two things only tests have, on loopback like the rest: POST /__test/tamper (form field json = {claim, value})
// makes the next token response carry an ID token with that claim changed, re-signed with this provider's own
// signing key — a provider that misbehaves (wrong iss, aud, nonce) with a valid signature, which nothing else can
// produce; POST /__test/groups (json = {login, groups}) changes a user's groups, as an administrator of the
// provider would.
//
// Configuration: JSON in the environment variable OIDC_IDP_CONFIG (IdpServerConfig below). Prints "listening" once
// it accepts connections.
import crypto from 'node:crypto';
import fs from 'node:fs';
import https from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import Provider from 'oidc-provider';

export interface IdpUser {
  sub: string;
  login: string;
  password: string;
  email: string;
  emailVerified: boolean;
  name: string;
  groups: string[];
  /** Whether the provider has a picture of this user (served by this process, /__test/picture/<login>.svg). */
  picture: boolean;
}

export interface IdpClient {
  client_id: string;
  client_secret: string;
  redirect_uris: string[];
}

export interface IdpServerConfig {
  issuer: string;
  port: number;
  /** Addresses to listen on (loopback only). */
  hosts: string[];
  certFile: string;
  keyFile: string;
  users: IdpUser[];
  clients: IdpClient[];
}

const cfg = JSON.parse(process.env.OIDC_IDP_CONFIG ?? '{}') as IdpServerConfig;

const { privateKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
const kid = crypto.randomBytes(8).toString('hex');
const signingJwk = { ...(privateKey.export({ format: 'jwk' }) as Record<string, string>), kid, alg: 'RS256', use: 'sig' };

let tamper: { claim: string; value: unknown } | null = null;

const b64url = (v: Buffer | string) => Buffer.from(v).toString('base64url');

/** The ID token with one claim replaced, signed again (RS256) with the provider's key under the same kid. */
function tampered(idToken: string, claim: string, value: unknown): string {
  const [head, body] = idToken.split('.');
  const payload = JSON.parse(Buffer.from(body, 'base64url').toString('utf8')) as Record<string, unknown>;
  payload[claim] = value;
  const input = `${head}.${b64url(JSON.stringify(payload))}`;
  return `${input}.${b64url(crypto.sign('sha256', Buffer.from(input), privateKey))}`;
}

const provider = new Provider(cfg.issuer, {
  clients: cfg.clients.map((c) => ({ ...c, grant_types: ['authorization_code'], response_types: ['code'], token_endpoint_auth_method: 'client_secret_basic' })),
  jwks: { keys: [signingJwk] },
  cookies: { keys: [crypto.randomBytes(32).toString('base64url')] },
  scopes: ['openid', 'email', 'profile', 'groups'],
  claims: {
    openid: ['sub'],
    email: ['email', 'email_verified'],
    profile: ['name', 'preferred_username', 'picture'],
    groups: ['groups'],
  },
  features: { devInteractions: { enabled: false } },
  pkce: { required: () => true },
  interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
  async findAccount(_ctx, sub) {
    const u = cfg.users.find((x) => x.sub === sub);
    if (!u) return undefined;
    return {
      accountId: sub,
      async claims() {
        const picture = u.picture ? { picture: `${cfg.issuer}/__test/picture/${u.login}.svg` } : {};
        return { sub, email: u.email, email_verified: u.emailVerified, name: u.name, preferred_username: u.login, groups: u.groups, ...picture };
      },
    };
  },
});

provider.use(async (ctx, next) => {
  await next();
  if (ctx.path === '/token' && tamper && ctx.status === 200) {
    const body = ctx.body as { id_token?: string };
    if (body?.id_token) {
      ctx.body = { ...body, id_token: tampered(body.id_token, tamper.claim, tamper.value) };
      tamper = null;
    }
  }
});

const esc = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

function loginForm(uid: string, error = ''): string {
  return `<!doctype html><html><head><title>Test provider sign-in</title></head><body>
<h1>Test provider</h1>${error ? `<p id="error">${esc(error)}</p>` : ''}
<form method="post" action="/interaction/${esc(uid)}/login">
<label>Login <input name="login" id="login" autocomplete="username"></label>
<label>Password <input name="password" id="password" type="password"></label>
<button type="submit" id="submit">Sign in</button>
</form></body></html>`;
}

async function readForm(req: IncomingMessage): Promise<URLSearchParams> {
  const chunks: Buffer[] = [];
  for await (const c of req as AsyncIterable<Buffer>) chunks.push(c);
  return new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
}

async function interaction(req: IncomingMessage, res: ServerResponse, uid: string, action: string | undefined): Promise<void> {
  const details = await provider.interactionDetails(req, res);
  if (details.uid !== uid) throw new Error('interaction mismatch');
  if (action === 'login' && req.method === 'POST') {
    const form = await readForm(req);
    const user = cfg.users.find((u) => u.login === form.get('login') && u.password === form.get('password'));
    if (!user) {
      res.writeHead(200, { 'content-type': 'text/html' }).end(loginForm(uid, 'Wrong login or password.'));
      return;
    }
    await provider.interactionFinished(req, res, { login: { accountId: user.sub } }, { mergeWithLastSubmission: false });
    return;
  }
  if (details.prompt.name === 'login') {
    res.writeHead(200, { 'content-type': 'text/html' }).end(loginForm(uid));
    return;
  }
  // Consent on the user's behalf: grant what the client asked for.
  const { params, session, prompt } = details;
  const grant = details.grantId
    ? await provider.Grant.find(details.grantId)
    : new provider.Grant({ accountId: session!.accountId, clientId: params.client_id as string });
  if (!grant) throw new Error('grant not found');
  const missing = prompt.details as { missingOIDCScope?: string[]; missingOIDCClaims?: string[]; missingResourceScopes?: Record<string, string[]> };
  if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(' '));
  if (missing.missingOIDCClaims) grant.addOIDCClaims(missing.missingOIDCClaims);
  for (const [indicator, scopes] of Object.entries(missing.missingResourceScopes ?? {})) grant.addResourceScope(indicator, scopes.join(' '));
  await provider.interactionFinished(req, res, { consent: { grantId: await grant.save() } }, { mergeWithLastSubmission: true });
}

const providerHandler = provider.callback();

async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
  const url = new URL(req.url ?? '/', cfg.issuer);
  const m = /^\/interaction\/([^/]+)(?:\/(login))?$/.exec(url.pathname);
  if (m) return interaction(req, res, m[1], m[2]);
  const pic = /^\/__test\/picture\/([a-z]+)\.svg$/.exec(url.pathname);
  if (pic) {
    const initial = esc(pic[1].slice(0, 1).toUpperCase());
    res.writeHead(200, { 'content-type': 'image/svg+xml', 'cross-origin-resource-policy': 'cross-origin' });
    res.end(
      `<svg xmlns="http://www.w3.org/2000/svg" width="64" height="64"><circle cx="32" cy="32" r="32" fill="#3b6"/><text x="32" y="42" font-size="30" text-anchor="middle" fill="#fff" font-family="sans-serif">${initial}</text></svg>`,
    );
    return;
  }
  if (url.pathname === '/__test/groups' && req.method === 'POST') {
    const change = JSON.parse((await readForm(req)).get('json') ?? '{}') as { login: string; groups: string[] };
    const u = cfg.users.find((x) => x.login === change.login);
    if (!u) throw new Error(`no user ${change.login}`);
    u.groups = change.groups;
    res.writeHead(204).end();
    return;
  }
  if (url.pathname === '/__test/tamper' && req.method === 'POST') {
    tamper = JSON.parse((await readForm(req)).get('json') ?? 'null') as typeof tamper;
    res.writeHead(204).end();
    return;
  }
  providerHandler(req, res);
}

const tls = { cert: fs.readFileSync(cfg.certFile), key: fs.readFileSync(cfg.keyFile) };
let listening = 0;
for (const host of cfg.hosts) {
  const server = https.createServer(tls, (req, res) => {
    handle(req, res).catch((e: Error) => {
      process.stderr.write(`test provider: ${req.method} ${req.url}: ${e.stack ?? e.message}\n`);
      if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' });
      res.end(`test provider error: ${e.message}`);
    });
  });
  server.listen(cfg.port, host, () => {
    listening++;
    if (listening === cfg.hosts.length) process.stdout.write(`test provider listening on ${cfg.hosts.join(', ')} port ${cfg.port} as ${cfg.issuer}\n`);
  });
}
process.on('SIGTERM', () => process.exit(0));
