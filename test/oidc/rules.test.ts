// The pure parts of sign-in with the identity provider: claims to identity (groups claim paths, types that are not
// trusted), who may add devices and which console role groups give, and the names new users and console accounts
// get — always valid, whatever the provider sends.
import test from 'ava';
import fc from 'fast-check';
import { USERNAME_RE } from '../../services/console/src/auth/accounts.ts';
import { consoleRole, deviceRefusal } from '../../services/console/src/oidc/admission.ts';
import { claimAt, identityFromClaims } from '../../services/console/src/oidc/claims.ts';
import { accountNameBase } from '../../services/console/src/oidc/provider-accounts.ts';
import { USER_NAME_RE, userNameBase, userNameCandidate } from '../../services/coordination/src/state/identity-user.ts';
import type { ProviderIdentity } from '../../shared/model.ts';

const ISS = 'https://id.example.com';

function identity(over: Partial<ProviderIdentity> = {}): ProviderIdentity {
  return {
    issuer: ISS,
    subject: 's-1',
    email: 'alice@example.com',
    emailVerified: true,
    name: 'Alice',
    preferredUsername: 'alice',
    picture: null,
    groups: ['eng'],
    ...over,
  };
}

const RULES = { allowedDomains: [], allowedUsers: [], allowedGroups: [], requireVerifiedEmail: true, adminGroups: ['admins'], auditorGroups: ['audit'] };

test('claims: standard names, e-mail lower-cased, "true" as a string accepted, pictures only over https', (t) => {
  const id = identityFromClaims(
    ISS,
    { sub: 'abc', email: 'Alice@Example.COM', email_verified: 'true', name: 'Alice A', picture: 'javascript:alert(1)', groups: ['eng', 'eng', 7, ''] },
    'groups',
  );
  t.is(id.email, 'alice@example.com');
  t.true(id.emailVerified);
  t.is(id.picture, null);
  t.deepEqual(id.groups, ['eng']);
  t.is(identityFromClaims(ISS, { sub: 'abc', picture: 'https://cdn.example/a.png' }, 'groups').picture, 'https://cdn.example/a.png');
  t.throws(() => identityFromClaims(ISS, { email: 'x@example.com' }, 'groups'), { message: /no subject/ });
});

test("claims: groups from a dotted path (Keycloak's realm_access.roles) or a single string", (t) => {
  t.deepEqual(identityFromClaims(ISS, { sub: 'a', realm_access: { roles: ['ops', 'eng'] } }, 'realm_access.roles').groups, ['ops', 'eng']);
  t.deepEqual(identityFromClaims(ISS, { sub: 'a', 'https://example.com/groups': 'eng' }, 'https://example.com/groups').groups, ['eng']);
  t.is(claimAt({ a: [1] }, 'a.b'), undefined);
});

test('devices: every configured list must admit; unset lists admit everyone', (t) => {
  t.is(deviceRefusal(identity(), RULES), null);
  t.regex(deviceRefusal(identity(), { ...RULES, allowedDomains: ['corp.example'] }) ?? '', /not in a domain allowed/);
  t.is(deviceRefusal(identity(), { ...RULES, allowedDomains: ['example.com'] }), null);
  t.regex(
    deviceRefusal(identity({ email: 'alice@sub.example.com' }), { ...RULES, allowedDomains: ['example.com'] }) ?? '',
    /not in a domain/,
    'domains match exactly',
  );
  t.regex(deviceRefusal(identity(), { ...RULES, allowedUsers: ['bob@example.com'] }) ?? '', /not on the list/);
  t.is(deviceRefusal(identity(), { ...RULES, allowedUsers: ['alice@example.com'] }), null);
  t.regex(deviceRefusal(identity(), { ...RULES, allowedGroups: ['ops'] }) ?? '', /not in any of the identity provider groups/);
  t.regex(deviceRefusal(identity(), { ...RULES, allowedDomains: ['example.com'], allowedGroups: ['ops'] }) ?? '', /groups/, 'both lists apply');
});

test('devices: an unverified or missing e-mail is not believed by the e-mail rules, unless verification is not required', (t) => {
  const rules = { ...RULES, allowedDomains: ['example.com'] };
  t.regex(deviceRefusal(identity({ emailVerified: false }), rules) ?? '', /not .*verified/);
  t.is(deviceRefusal(identity({ emailVerified: false }), { ...rules, requireVerifiedEmail: false }), null);
  t.regex(deviceRefusal(identity({ email: null }), rules) ?? '', /no e-mail address/);
  t.is(deviceRefusal(identity({ emailVerified: false }), RULES), null, 'without e-mail rules the address does not matter');
});

test('console: the admin group wins over the auditor group; neither = no role', (t) => {
  t.is(consoleRole(identity({ groups: ['audit', 'admins'] }), RULES), 'admin');
  t.is(consoleRole(identity({ groups: ['audit'] }), RULES), 'auditor');
  t.is(consoleRole(identity({ groups: ['eng'] }), RULES), null);
  t.is(consoleRole(identity({ groups: ['admins'] }), { ...RULES, adminGroups: [] }), null);
});

const anyIdentity = fc.record({
  issuer: fc.constant(ISS),
  subject: fc.string({ minLength: 1, maxLength: 255 }),
  email: fc.option(fc.oneof(fc.emailAddress(), fc.string({ maxLength: 320 })), { nil: null }),
  emailVerified: fc.boolean(),
  name: fc.option(fc.string({ maxLength: 256 }), { nil: null }),
  preferredUsername: fc.option(fc.string({ maxLength: 256 }), { nil: null }),
  picture: fc.constant(null),
  groups: fc.array(fc.string()),
});

test('property: whatever the provider sends, a new user and a new console account get valid names, also with a suffix', (t) => {
  fc.assert(
    fc.property(anyIdentity, fc.nat(99), (id, n) => {
      const user = userNameBase(id);
      const account = accountNameBase(id);
      return (
        USER_NAME_RE.test(user) &&
        USER_NAME_RE.test(userNameCandidate(user, n)) &&
        USERNAME_RE.test(account) &&
        USERNAME_RE.test(n === 0 ? account : `${account}-${n + 1}`)
      );
    }),
  );
  t.is(userNameBase(identity()), 'alice@example.com');
  t.is(userNameCandidate('alice@example.com', 1), 'alice@example.com-2');
  t.is(accountNameBase(identity({ email: 'Alice@Example.com' })), 'Alice@Example.com');
});
