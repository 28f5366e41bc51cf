// CSV export of activity entries (RFC 4180: comma separated, CRLF line ends, fields quoted when they hold a comma,
// quote or line break). Actor names, targets and details can be typed by anyone who reaches the sign-in form, and
// spreadsheets run a cell that starts with = + - @ (or tab / CR) as a formula, so such cells get a leading apostrophe
// (OWASP "CSV injection"): the cell then shows as text.
import type { ActivityEntry } from '../../../../shared/activity.ts';

export const CSV_COLUMNS = ['id', 'time', 'action', 'actor', 'address', 'target', 'details'] as const;

const FORMULA_START = /^[=+\-@\t\r]/;

export function csvCell(value: string): string {
  const v = FORMULA_START.test(value) ? `'${value}` : value;
  return /[",\r\n]/.test(v) ? `"${v.replace(/"/g, '""')}"` : v;
}

export function csvRow(values: string[]): string {
  return `${values.map(csvCell).join(',')}\r\n`;
}

export function csvHeader(): string {
  return csvRow([...CSV_COLUMNS]);
}

export function csvEntry(e: ActivityEntry): string {
  return csvRow([e.id, e.time, e.action, e.actor, e.ip, e.target, JSON.stringify(e.details)]);
}
