// Who may do what after signing in with the provider. Pure: the identity and the settings in, a decision out.
//
// Devices: each configured list must admit the person (unset lists admit everyone), as Headscale does:
//   HSE_OIDC_ALLOWED_DOMAINS  the e-mail address's domain is listed;
//   HSE_OIDC_ALLOWED_USERS    the e-mail address is listed;
//   HSE_OIDC_ALLOWED_GROUPS   at least one of the person's groups is listed.
// An e-mail address the provider does not mark verified is not believed for the first two while
// HSE_OIDC_REQUIRE_VERIFIED_EMAIL is on (the default): anyone can type any address into a self-service account.
//
// Console: a member of an HSE_OIDC_ADMIN_GROUPS group is an administrator, else of an HSE_OIDC_AUDITOR_GROUPS group
// an auditor, else has no console access. The device lists do not apply to the console; its groups are the rule.
import type { OidcConfig } from '../../../../shared/config.ts';
import type { ProviderIdentity } from '../../../../shared/model.ts';
import type { Role } from '../auth/accounts.ts';

type Rules = Pick<OidcConfig, 'allowedDomains' | 'allowedUsers' | 'allowedGroups' | 'requireVerifiedEmail' | 'adminGroups' | 'auditorGroups'>;

function inAny(groups: string[], wanted: string[]): boolean {
  return groups.some((g) => wanted.includes(g));
}

/** Why this person may not add a device, in words for them; null when they may. */
export function deviceRefusal(id: ProviderIdentity, rules: Rules): string | null {
  const emailRules = rules.allowedDomains.length > 0 || rules.allowedUsers.length > 0;
  if (emailRules) {
    if (!id.email) return 'Your account at the identity provider has no e-mail address, and devices may only be added by people with an allowed address.';
    if (rules.requireVerifiedEmail && !id.emailVerified) {
      return `The identity provider does not mark your e-mail address ${id.email} as verified, so it cannot be checked against the addresses allowed to add devices. Verify it there and sign in again (or an administrator turns off HSE_OIDC_REQUIRE_VERIFIED_EMAIL).`;
    }
  }
  const email = id.email ?? '';
  if (rules.allowedDomains.length > 0) {
    const domain = email.slice(email.lastIndexOf('@') + 1);
    if (!rules.allowedDomains.includes(domain)) {
      return `Your e-mail address ${email} is not in a domain allowed to add devices (${rules.allowedDomains.join(', ')}). Sign in with an account of your organisation.`;
    }
  }
  if (rules.allowedUsers.length > 0 && !rules.allowedUsers.includes(email)) {
    return `Your account ${email} is not on the list of people allowed to add devices. Ask an administrator to add you.`;
  }
  if (rules.allowedGroups.length > 0 && !inAny(id.groups, rules.allowedGroups)) {
    return 'You are not in any of the identity provider groups allowed to add devices. Ask an administrator to add you to one.';
  }
  return null;
}

/** The console role the person's groups give, or null for none. */
export function consoleRole(id: ProviderIdentity, rules: Rules): Role | null {
  if (inAny(id.groups, rules.adminGroups)) return 'admin';
  if (inAny(id.groups, rules.auditorGroups)) return 'auditor';
  return null;
}
