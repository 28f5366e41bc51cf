// Filters for the Logs page, its exports, its live tail and the JSON API, read from the query string:
//   action   exact action ("console.signin"), or a prefix ending in "*" or "." ("console.*", "node.")
//   actor    exact actor, any case
//   address  one IP address or a CIDR range ("203.0.113.7", "10.0.0.0/8", "2001:db8::/32")
//   text     words found anywhere in the entry (action, actor, address, target, details), any case
//   from,to  UTC times: "2025-01-31", "2025-01-31T14:05", full ISO 8601, or milliseconds since 1970
// A value that cannot be understood is reported back and ignored, never guessed at.
import ipaddr from 'ipaddr.js';
import type { ActivityEntry } from '../../../../shared/activity.ts';
import { parseAddress } from '../../../../shared/trusted-proxies.ts';

export interface RawFilter {
  action: string;
  actor: string;
  address: string;
  text: string;
  from: string;
  to: string;
}

export interface Filter {
  raw: RawFilter;
  /** Inclusive bounds in ms, for range queries. */
  fromMs?: number;
  toMs?: number;
  /** Problems with the given values, one sentence each. */
  errors: string[];
  test(e: ActivityEntry): boolean;
  /** True when any field narrows the result. */
  active: boolean;
}

export const FILTER_FIELDS = ['action', 'actor', 'address', 'text', 'from', 'to'] as const;

type Query = Record<string, string | string[] | undefined>;

function one(q: Query, name: string): string {
  const v = q[name];
  const s = Array.isArray(v) ? v[0] : v;
  return (s ?? '').trim().slice(0, 200);
}

const DAY_MS = 86_400_000;

/** Parses a time bound; `end` makes a bare date mean the end of that day. Returns undefined for "" and NaN for junk. */
export function parseTime(text: string, end: boolean): number | undefined {
  if (text === '') return undefined;
  if (/^\d{1,15}$/.test(text)) return Number(text);
  const date = /^(\d{4})-(\d{2})-(\d{2})$/.exec(text);
  if (date) {
    const ms = Date.UTC(Number(date[1]), Number(date[2]) - 1, Number(date[3]));
    return end ? ms + DAY_MS - 1 : ms;
  }
  const m = /^(\d{4}-\d{2}-\d{2})[T ](\d{2}:\d{2})(:\d{2}(\.\d{1,3})?)?(Z|[+-]\d{2}:\d{2})?$/.exec(text);
  if (!m) return NaN;
  // Without a zone the time is UTC, like every time the console shows.
  const iso = `${m[1]}T${m[2]}${m[3] ?? ':00'}${m[5] ?? 'Z'}`;
  const ms = Date.parse(iso);
  if (Number.isNaN(ms)) return NaN;
  // A bound given to the minute covers that whole minute when it ends a range.
  return end && !m[3] ? ms + 59_999 : ms;
}

function addressMatcher(text: string): ((ip: string) => boolean) | null {
  if (text.includes('/')) {
    let range: [ipaddr.IPv4 | ipaddr.IPv6, number];
    try {
      range = ipaddr.parseCIDR(text);
    } catch {
      return null;
    }
    return (ip) => {
      const a = parseAddress(ip);
      return a !== null && a.kind() === range[0].kind() && a.match(range);
    };
  }
  const want = parseAddress(text);
  if (want === null) return null;
  const s = want.toString();
  return (ip) => parseAddress(ip)?.toString() === s;
}

export function readFilter(q: Query): Filter {
  const raw: RawFilter = {
    action: one(q, 'action'),
    actor: one(q, 'actor'),
    address: one(q, 'address'),
    text: one(q, 'text'),
    from: one(q, 'from'),
    to: one(q, 'to'),
  };
  const errors: string[] = [];
  const tests: ((e: ActivityEntry) => boolean)[] = [];

  if (raw.action !== '') {
    const a = raw.action.toLowerCase();
    if (a.endsWith('*') || a.endsWith('.')) {
      const prefix = a.replace(/\*$/, '');
      tests.push((e) => e.action.toLowerCase().startsWith(prefix));
    } else {
      tests.push((e) => e.action.toLowerCase() === a);
    }
  }
  if (raw.actor !== '') {
    const a = raw.actor.toLowerCase();
    tests.push((e) => e.actor.toLowerCase() === a);
  }
  if (raw.address !== '') {
    const m = addressMatcher(raw.address);
    if (m) tests.push((e) => m(e.ip));
    else errors.push(`Address: "${raw.address}" is not an IP address or CIDR range (for example 203.0.113.7 or 10.0.0.0/8).`);
  }
  if (raw.text !== '') {
    const words = raw.text.toLowerCase().split(/\s+/).filter(Boolean);
    tests.push((e) => {
      const hay = `${e.action} ${e.actor} ${e.ip} ${e.target} ${JSON.stringify(e.details)}`.toLowerCase();
      return words.every((w) => hay.includes(w));
    });
  }
  let fromMs = parseTime(raw.from, false);
  let toMs = parseTime(raw.to, true);
  if (Number.isNaN(fromMs)) {
    errors.push(`From: "${raw.from}" is not a time (use 2025-01-31, 2025-01-31T14:05 or full ISO 8601; times are UTC).`);
    fromMs = undefined;
  }
  if (Number.isNaN(toMs)) {
    errors.push(`To: "${raw.to}" is not a time (use 2025-01-31, 2025-01-31T14:05 or full ISO 8601; times are UTC).`);
    toMs = undefined;
  }
  if (fromMs !== undefined && toMs !== undefined && fromMs > toMs) {
    errors.push('From is later than To, so nothing can match; swap them.');
  }
  return {
    raw,
    fromMs,
    toMs,
    errors,
    active: tests.length > 0 || fromMs !== undefined || toMs !== undefined,
    test: (e) => {
      const ms = Number(e.id.split('-')[0]);
      if (fromMs !== undefined && ms < fromMs) return false;
      if (toMs !== undefined && ms > toMs) return false;
      return tests.every((t) => t(e));
    },
  };
}

/** The filter as query-string pairs (only the fields that are set), for links that keep the filter. */
export function filterParams(raw: RawFilter): URLSearchParams {
  const p = new URLSearchParams();
  for (const k of FILTER_FIELDS) if (raw[k] !== '') p.set(k, raw[k]);
  return p;
}
