// From the validated claims (ID token merged with UserInfo) to the ProviderIdentity hse keeps. Standard claims as
// OpenID Connect Core §5.1 names them: sub, email, email_verified, name, preferred_username, picture. Groups come from
// the claim HSE_OIDC_GROUPS_CLAIM names: "groups" by default, or a dotted path into nested claims for providers that
// nest them (Keycloak's realm_access.roles). Claims of the wrong type are ignored, not trusted.
import type { ProviderIdentity } from '../../../../shared/model.ts';

function text(v: unknown, max: number): string | null {
  if (typeof v !== 'string') return null;
  const t = v.trim();
  return t === '' || t.length > max ? null : t;
}

/** The value at a dotted path ("realm_access.roles"); a claim whose own name contains the dots is found first. */
export function claimAt(claims: Record<string, unknown>, path: string): unknown {
  if (path in claims) return claims[path];
  let here: unknown = claims;
  for (const part of path.split('.')) {
    if (typeof here !== 'object' || here === null || Array.isArray(here)) return undefined;
    here = (here as Record<string, unknown>)[part];
  }
  return here;
}

/** Groups as a list of names: an array of strings, or a single string (some providers send one group so). */
export function groupsFrom(v: unknown): string[] {
  const list = Array.isArray(v) ? v : typeof v === 'string' ? [v] : [];
  const names = list.filter((g): g is string => typeof g === 'string' && g.trim() !== '' && g.length <= 256).map((g) => g.trim());
  return [...new Set(names)].slice(0, 1000);
}

export function identityFromClaims(issuer: string, claims: Record<string, unknown>, groupsClaim: string): ProviderIdentity {
  const subject = text(claims.sub, 255);
  if (!subject) throw new Error('the ID token has no subject');
  const picture = text(claims.picture, 2048);
  return {
    issuer,
    subject,
    email: text(claims.email, 320)?.toLowerCase() ?? null,
    // Some providers send "true" as a string.
    emailVerified: claims.email_verified === true || claims.email_verified === 'true',
    name: text(claims.name, 256),
    preferredUsername: text(claims.preferred_username, 256),
    // Shown as an image in the console: only https, never javascript: or data: from a claim.
    picture: picture && /^https:\/\/[^\s"'<>]+$/.test(picture) ? picture : null,
    groups: groupsFrom(claimAt(claims, groupsClaim)),
  };
}

/** How a person is named in pages and the activity log: e-mail, else user name, else name, else the subject. */
export function identityLabel(id: ProviderIdentity): string {
  return id.email ?? id.preferredUsername ?? id.name ?? id.subject;
}
