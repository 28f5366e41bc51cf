// Tailnet users made by signing in with the identity provider. A provider account is known by its issuer and subject
// (OpenID Connect Core §5.7: only that pair is stable and unique; an e-mail address can be reassigned or shared), so
// that pair is the index and the e-mail only a suggestion for the user's name. The profile the console shows (display
// name, e-mail, picture) and the provider groups the policy refers to are refreshed from the provider at each sign-in;
// the user name, once chosen, stays (an administrator may rename it).
import crypto from 'node:crypto';
import type { ProviderIdentity, UserRecord } from '../../../../shared/model.ts';
import { identityField } from '../../../../shared/redis-keys.ts';

/** What a tailnet user name may be (the same rule as names an operator types). */
export const USER_NAME_RE = /^[a-z0-9][a-z0-9._@-]{0,62}$/;

/**
 * The name a new user is given: the e-mail address when it is a valid user name (what Tailscale shows as the login
 * name), else the provider's preferred user name, else either reduced to allowed characters, else a name derived
 * from the subject.
 */
export function userNameBase(id: ProviderIdentity): string {
  for (const c of [id.email, id.preferredUsername]) {
    const n = c?.trim().toLowerCase();
    if (n && USER_NAME_RE.test(n)) return n;
  }
  const reduced = (id.email ?? id.preferredUsername ?? id.name ?? '')
    .toLowerCase()
    .normalize('NFKD')
    .replace(/[^a-z0-9._@-]+/g, '-')
    .replace(/^[^a-z0-9]+/, '')
    .slice(0, 55);
  if (reduced !== '') return reduced;
  return `user-${crypto.createHash('sha256').update(identityField(id.issuer, id.subject)).digest('hex').slice(0, 10)}`;
}

/** The n-th alternative when a name is taken (n = 0 is the name itself): "alice@example.com-2", still at most 63. */
export function userNameCandidate(base: string, n: number): string {
  if (n === 0) return base;
  const suffix = `-${n + 1}`;
  return `${base.slice(0, 63 - suffix.length)}${suffix}`;
}

/** The display name for a provider account. */
export function displayNameOf(id: ProviderIdentity): string {
  return (id.name ?? id.preferredUsername ?? id.email ?? '').trim().slice(0, 100);
}

/** The fields refreshed from the provider at every sign-in. */
export function providerProfile(
  id: ProviderIdentity,
  now: Date,
): Pick<UserRecord, 'email' | 'picture' | 'idpGroups' | 'lastSignIn'> & { displayName?: string } {
  const displayName = displayNameOf(id);
  return {
    ...(displayName ? { displayName } : {}),
    email: id.email ?? undefined,
    picture: id.picture ?? undefined,
    idpGroups: [...new Set(id.groups)].sort(),
    lastSignIn: now.toISOString(),
  };
}
