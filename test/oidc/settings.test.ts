// The HSE_OIDC_* settings (shared/config.ts): what a working configuration becomes, and every refusal naming its
// variable — also as a real start of a process, which must exit 2 after one line.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import test from 'ava';
import { ConfigError, parseConfig } from '../../shared/config.ts';
import { freePort, runProcess } from '../harness/process.ts';

const BASE = {
  HSE_PUBLIC_URL: 'https://vpn.example.com',
  HSE_TLS: 'off',
  HSE_OIDC_ISSUER: 'https://id.example.com/realms/staff',
  HSE_OIDC_CLIENT_ID: 'hse',
  HSE_OIDC_CLIENT_SECRET: 's3cret',
};

function refused(env: Record<string, string>): ConfigError {
  try {
    parseConfig(env);
  } catch (e) {
    if (e instanceof ConfigError) return e;
    throw e;
  }
  throw new Error(`accepted: ${JSON.stringify(env)}`);
}

test('without HSE_OIDC_ISSUER there is no identity provider', (t) => {
  t.is(parseConfig({}).oidc, null);
});

test('a minimal provider configuration: defaults, and the redirect URI on the public URL', (t) => {
  const o = parseConfig(BASE).oidc!;
  t.is(o.issuer.href, 'https://id.example.com/realms/staff');
  t.is(o.redirectUri, 'https://vpn.example.com/console/oidc/callback');
  t.deepEqual(o.scopes, ['openid', 'profile', 'email']);
  t.is(o.groupsClaim, 'groups');
  t.true(o.requireVerifiedEmail);
  t.true(o.consolePasswords);
  t.false(o.operatorApproval);
  t.is(o.displayName, 'id.example.com');
  t.deepEqual([o.allowedDomains, o.allowedUsers, o.allowedGroups, o.adminGroups, o.auditorGroups], [[], [], [], [], []]);
});

test('lists: domains and users lower-cased, groups split on commas only (names may hold spaces)', (t) => {
  const o = parseConfig({
    ...BASE,
    HSE_OIDC_ALLOWED_DOMAINS: 'Example.COM, @corp.example',
    HSE_OIDC_ALLOWED_USERS: 'Alice@Example.com bob@corp.example',
    HSE_OIDC_ALLOWED_GROUPS: 'eng, Domain Admins',
    HSE_OIDC_ADMIN_GROUPS: 'hse-admins',
    HSE_OIDC_AUDITOR_GROUPS: 'Security Team,auditors',
    HSE_OIDC_SCOPES: 'openid profile email groups',
    HSE_OIDC_GROUPS_CLAIM: 'realm_access.roles',
    HSE_OIDC_NAME: 'Keycloak',
  }).oidc!;
  t.deepEqual(o.allowedDomains, ['example.com', 'corp.example']);
  t.deepEqual(o.allowedUsers, ['alice@example.com', 'bob@corp.example']);
  t.deepEqual(o.allowedGroups, ['eng', 'Domain Admins']);
  t.deepEqual(o.auditorGroups, ['Security Team', 'auditors']);
  t.deepEqual(o.scopes, ['openid', 'profile', 'email', 'groups']);
  t.is(o.groupsClaim, 'realm_access.roles');
  t.is(o.displayName, 'Keycloak');
});

test('the client secret may come from a file, without its final newline', (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hse-oidc-cfg-'));
  try {
    const file = path.join(dir, 'secret');
    fs.writeFileSync(file, 'from-a-file\n');
    const { HSE_OIDC_CLIENT_SECRET: _s, ...rest } = BASE;
    t.is(parseConfig({ ...rest, HSE_OIDC_CLIENT_SECRET_FILE: file }).oidc!.clientSecret, 'from-a-file');
    fs.writeFileSync(file, '\n');
    t.is(refused({ ...rest, HSE_OIDC_CLIENT_SECRET_FILE: file }).variable, 'HSE_OIDC_CLIENT_SECRET_FILE');
    t.regex(refused({ ...rest, HSE_OIDC_CLIENT_SECRET_FILE: path.join(dir, 'missing') }).reason, /cannot read .*ENOENT/);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

const REFUSALS: [string, Record<string, string>, string, RegExp][] = [
  ['a provider setting without the issuer', { HSE_OIDC_CLIENT_ID: 'hse' }, 'HSE_OIDC_ISSUER', /is unset, but HSE_OIDC_CLIENT_ID is set/],
  ['an issuer that is not a URL', { ...BASE, HSE_OIDC_ISSUER: 'id.example.com' }, 'HSE_OIDC_ISSUER', /is not a URL/],
  ['a plain-http issuer', { ...BASE, HSE_OIDC_ISSUER: 'http://id.example.com' }, 'HSE_OIDC_ISSUER', /must start with https/],
  ['an issuer with a query', { ...BASE, HSE_OIDC_ISSUER: 'https://id.example.com/?x=1' }, 'HSE_OIDC_ISSUER', /issuer identifier alone/],
  ['no client id', { ...BASE, HSE_OIDC_CLIENT_ID: '' }, 'HSE_OIDC_CLIENT_ID', /is required with HSE_OIDC_ISSUER/],
  ['no client secret', { ...BASE, HSE_OIDC_CLIENT_SECRET: '' }, 'HSE_OIDC_CLIENT_SECRET', /is required/],
  ['both secret settings', { ...BASE, HSE_OIDC_CLIENT_SECRET_FILE: '/run/secrets/x' }, 'HSE_OIDC_CLIENT_SECRET_FILE', /not both/],
  ['scopes without openid', { ...BASE, HSE_OIDC_SCOPES: 'profile email' }, 'HSE_OIDC_SCOPES', /lacks "openid"/],
  ['a domain that is not one', { ...BASE, HSE_OIDC_ALLOWED_DOMAINS: 'example' }, 'HSE_OIDC_ALLOWED_DOMAINS', /is not an e-mail domain/],
  ['a user that is not an address', { ...BASE, HSE_OIDC_ALLOWED_USERS: 'alice' }, 'HSE_OIDC_ALLOWED_USERS', /is not an e-mail address/],
  ['a groups claim with spaces', { ...BASE, HSE_OIDC_GROUPS_CLAIM: 'my groups' }, 'HSE_OIDC_GROUPS_CLAIM', /is not a claim name/],
  ['a switch that is not on/off', { ...BASE, HSE_OIDC_OPERATOR_APPROVAL: 'maybe' }, 'HSE_OIDC_OPERATOR_APPROVAL', /is not on\/off/],
  [
    'passwords off with nobody to administer',
    { ...BASE, HSE_OIDC_CONSOLE_PASSWORDS: 'off' },
    'HSE_OIDC_CONSOLE_PASSWORDS',
    /HSE_OIDC_ADMIN_GROUPS is empty, so nobody could administer/,
  ],
];

for (const [name, env, variable, reason] of REFUSALS) {
  test(`refused: ${name}`, (t) => {
    const e = refused(env);
    t.is(e.variable, variable);
    t.regex(e.reason, reason);
  });
}

test('a refused provider setting stops a real process with status 2 and one line naming the variable', async (t) => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'hse-oidc-cfg-'));
  try {
    const proc = runProcess('services/console/src/main.ts', {
      HSE_DATA_DIR: dataDir,
      HSE_HTTP_PORT: String(await freePort()),
      HSE_OIDC_ISSUER: 'http://id.example.com',
      HSE_OIDC_CLIENT_ID: 'hse',
      HSE_OIDC_CLIENT_SECRET: 'x',
    });
    t.is(await proc.exited(), 2);
    const lines = proc.output().trimEnd().split('\n');
    t.is(lines.length, 1, proc.output());
    t.regex(lines[0], /^hse console: refused configuration: HSE_OIDC_ISSUER: "http:\/\/id\.example\.com" must start with https:\/\//);
  } finally {
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
});
