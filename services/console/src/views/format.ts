// How times and device facts read on the network pages. Times are UTC, like the Logs page; relative forms
// ("5 min ago", "in 3 days") sit next to the exact time in a title, so a glance and a check both work.
export const DAY_MS = 86_400_000;
/** A key that expires within this long is "expiring soon" (the Machines filter and the warning badge). */
export const EXPIRING_SOON_MS = 7 * DAY_MS;

/** "2025-01-31 14:05 UTC" */
export function utc(iso: string | null | undefined): string {
  if (!iso) return '—';
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return '—';
  const s = new Date(t).toISOString();
  return `${s.slice(0, 10)} ${s.slice(11, 16)} UTC`;
}

function span(ms: number): string {
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s} s`;
  const m = Math.round(s / 60);
  if (m < 60) return `${m} min`;
  const h = Math.round(m / 60);
  if (h < 24) return `${h} h`;
  const d = Math.round(h / 24);
  if (d < 60) return d === 1 ? '1 day' : `${d} days`;
  const mo = Math.round(d / 30);
  if (mo < 24) return `${mo} months`;
  return `${Math.round(d / 365)} years`;
}

/** "just now", "5 min ago", "3 days ago". */
export function ago(iso: string | null | undefined, now = Date.now()): string {
  if (!iso) return 'never';
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return 'never';
  const d = now - t;
  if (d < 45_000) return 'just now';
  return `${span(d)} ago`;
}

/** "in 3 days", "2 h ago" (for a time that may be past or future). */
export function relative(iso: string, now = Date.now()): string {
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return '';
  return t >= now ? `in ${span(t - now)}` : ago(iso, now);
}

export type ExpiryState = 'never' | 'expired' | 'soon' | 'later';

export function expiryState(expiry: string | null, now = Date.now()): ExpiryState {
  if (expiry === null) return 'never';
  const t = Date.parse(expiry);
  if (Number.isNaN(t)) return 'never';
  if (t <= now) return 'expired';
  return t - now <= EXPIRING_SOON_MS ? 'soon' : 'later';
}

type Hostinfo = Record<string, unknown> | null | undefined;

function text(h: Hostinfo, k: string): string {
  const v = h?.[k];
  return typeof v === 'string' ? v.trim() : '';
}

const OS_NAMES: Record<string, string> = {
  linux: 'Linux',
  windows: 'Windows',
  macos: 'macOS',
  darwin: 'macOS',
  ios: 'iOS',
  android: 'Android',
  freebsd: 'FreeBSD',
  openbsd: 'OpenBSD',
  illumos: 'illumos',
  plan9: 'Plan 9',
  js: 'Browser',
};

/** "Linux · Debian 12", "macOS 14.5", "Windows 11 (10.0.22631)"; "" when the client has not said. */
export function osLabel(h: Hostinfo): string {
  const os = text(h, 'OS');
  const name = OS_NAMES[os.toLowerCase()] ?? os;
  const distro = text(h, 'Distro');
  if (distro) {
    const d = distro.slice(0, 1).toUpperCase() + distro.slice(1);
    return `${name} · ${[d, text(h, 'DistroVersion')].filter(Boolean).join(' ')}`;
  }
  const version = text(h, 'OSVersion');
  return [name, version].filter(Boolean).join(' ');
}

/** The Tailscale client version without its build suffix ("1.102.3" of "1.102.3-t1234abcd-g..."). */
export function clientVersion(h: Hostinfo): string {
  const v = text(h, 'IPNVersion');
  return v.split('-')[0] ?? '';
}

/** The full version string, for a title. */
export function clientVersionFull(h: Hostinfo): string {
  return text(h, 'IPNVersion');
}

/** A key shown by its type prefix and first hex digits: "nodekey:3f2a…9c1d". */
export function shortKey(key: string): string {
  const i = key.indexOf(':');
  const hex = key.slice(i + 1);
  return hex.length > 12 ? `${key.slice(0, i + 1)}${hex.slice(0, 8)}…${hex.slice(-4)}` : key;
}
