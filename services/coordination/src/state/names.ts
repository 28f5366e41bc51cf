// MagicDNS names. A node's label comes from the host name its device reports, reduced to what DNS allows; when two
// devices report the same name, the later one gets "-1", "-2", ... like Tailscale does. Uniqueness is claimed in Redis
// (HSETNX on the name index) so concurrent registrations cannot collide.

/** Lowercase letters, digits and '-', at most 63 characters, no leading/trailing '-'; "node" when nothing is left. */
export function sanitiseLabel(hostname: string): string {
  const s = hostname
    .toLowerCase()
    .normalize('NFKD')
    .replace(/[^a-z0-9-]+/g, '-')
    .replace(/-+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 63)
    .replace(/-+$/g, '');
  return s === '' ? 'node' : s;
}

/** The n-th alternative for a taken label (n = 0 is the label itself), still at most 63 characters. */
export function labelCandidate(label: string, n: number): string {
  if (n === 0) return label;
  const suffix = `-${n}`;
  return `${label.slice(0, 63 - suffix.length).replace(/-+$/g, '')}${suffix}`;
}

/** Validates a name an operator chose (rename); returns the reason it is refused, or null. */
export function invalidLabelReason(name: string): string | null {
  if (name.length < 1 || name.length > 63) return 'a machine name must be 1 to 63 characters';
  if (!/^[a-z0-9]([a-z0-9-]*[a-z0-9])?$/.test(name)) {
    return 'a machine name may use only lowercase letters, digits and "-", and must not start or end with "-"';
  }
  return null;
}
