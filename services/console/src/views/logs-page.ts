// The Logs page: filters, the newest-first table of activity entries with paging, export links, and the live-tail
// status. New rows from the tail are built by /console/static/logs.js with the same markup as entryRow() below.
import type { ActivityEntry } from '../../../../shared/activity.ts';
import type { RawFilter } from '../activity/filter.ts';
import { filterParams } from '../activity/filter.ts';
import type { LogPage } from '../activity/query.ts';
import { html, type Html } from './html.ts';
import { page, type Viewer } from './layout.ts';

/** Actions the console knows by name, offered as suggestions in the action filter (any text is accepted). */
export const KNOWN_ACTIONS = [
  'console.*',
  'console.signin',
  'console.signin_failed',
  'console.signin_ratelimited',
  'console.signout',
  'node.*',
  'user.*',
  'authkey.*',
  'dns.change',
  'apikey.*',
  'webhook.*',
];

/** A class for the action badge: failures stand out, sign-ins are calm. */
export function actionTone(action: string): string {
  if (/failed|ratelimited|denied|refused|reject/.test(action)) return 'bad';
  if (/delete|expire|disable|revoke/.test(action)) return 'warn';
  if (/signin$|create|register|approve/.test(action)) return 'good';
  return 'plain';
}

function detailValue(v: unknown): string {
  return typeof v === 'string' ? v : JSON.stringify(v);
}

export function displayTime(iso: string): string {
  return `${iso.slice(0, 10)} ${iso.slice(11, 19)}`;
}

export function entryRow(e: ActivityEntry): Html {
  const details = Object.entries(e.details);
  return html`<tr data-id="${e.id}">
  <td data-label="Time (UTC)" class="time"><time datetime="${e.time}">${displayTime(e.time)}</time></td>
  <td data-label="Action"><span class="badge ${actionTone(e.action)}">${e.action}</span></td>
  <td data-label="Actor" class="actor">${e.actor || '—'}</td>
  <td data-label="Address" class="mono addr">${e.ip || '—'}</td>
  <td data-label="Target">${e.target || '—'}</td>
  <td data-label="Details" class="details">${details.length ? details.map(([k, v]) => html`<span class="kv"><span class="k">${k}</span> <span class="v">${detailValue(v)}</span></span>`) : '—'}</td>
</tr>`;
}

export interface LogsView {
  viewer: Viewer;
  filter: RawFilter;
  errors: string[];
  result: LogPage;
  filtered: boolean;
  /** Whether this is the newest page (the live tail runs only there). */
  newest: boolean;
}

function link(params: URLSearchParams, extra: Record<string, string>): string {
  const p = new URLSearchParams(params);
  for (const [k, v] of Object.entries(extra)) p.set(k, v);
  const q = p.toString();
  return `/console/logs${q ? `?${q}` : ''}`;
}

function filterForm(f: RawFilter, filtered: boolean): Html {
  return html`<form method="get" action="/console/logs" class="filters" role="search">
  <label>Action<input name="action" value="${f.action}" list="known-actions" placeholder="console.*" autocomplete="off"></label>
  <datalist id="known-actions">${KNOWN_ACTIONS.map((a) => html`<option value="${a}"></option>`)}</datalist>
  <label>Actor<input name="actor" value="${f.actor}" placeholder="admin" autocomplete="off" autocapitalize="none"></label>
  <label>Address<input name="address" value="${f.address}" placeholder="10.0.0.0/8" autocomplete="off"></label>
  <label class="wide">Text<input name="text" type="search" value="${f.text}" placeholder="words anywhere in the entry" autocomplete="off"></label>
  <label>From (UTC)<input name="from" value="${f.from}" placeholder="2025-01-31 14:00" autocomplete="off"></label>
  <label>To (UTC)<input name="to" value="${f.to}" placeholder="2025-01-31" autocomplete="off"></label>
  <div class="actions">
    <button type="submit" class="button primary">Filter</button>
    ${filtered ? html`<a class="button subtle" href="/console/logs">Clear</a>` : ''}
  </div>
</form>`;
}

export function logsPage(v: LogsView): string {
  const params = filterParams(v.filter);
  const q = params.toString();
  const exportQuery = q ? `?${q}` : '';
  const { entries, older, newer, partial, tailFrom } = v.result;
  const streamParams = new URLSearchParams(params);
  if (tailFrom !== null) streamParams.set('after', tailFrom);
  const emptyText = v.filtered
    ? 'No entries match these filters.'
    : 'No activity yet. Sign-ins, sign-outs and every change made in the console or with the hse CLI will appear here.';
  return page({
    title: 'Logs',
    viewer: v.viewer,
    active: 'logs',
    scripts: v.newest ? ['logs.js'] : [],
    body: html`<div class="page-head">
  <div>
    <h1>Logs</h1>
    <p class="muted">Who did what, from which address. Times are UTC; newest first.</p>
  </div>
  <div class="head-actions">
    ${
      v.newest
        ? html`<span class="live" id="live-status" data-state="connecting" role="status" aria-live="polite"><span class="dot" aria-hidden="true"></span><span class="label">Connecting…</span></span>
    <button type="button" class="button subtle" id="live-toggle" hidden>Pause</button>`
        : html`<span class="live" data-state="off"><span class="dot" aria-hidden="true"></span><span class="label">Live tail on the newest page</span></span>`
    }
    <a class="button subtle" href="/console/logs/export.csv${exportQuery}" download>Export CSV</a>
    <a class="button subtle" href="/console/logs/export.json${exportQuery}" download>Export JSON</a>
  </div>
</div>
${filterForm(v.filter, v.filtered)}
${v.errors.length ? html`<div class="alert" role="alert"><p>Some filters were ignored:</p><ul>${v.errors.map((e) => html`<li>${e}</li>`)}</ul></div>` : ''}
<div class="table-wrap">
<table class="log" id="log-table"${v.newest ? html` data-stream="/console/logs/stream?${streamParams.toString()}"` : ''}>
  <thead><tr><th scope="col">Time (UTC)</th><th scope="col">Action</th><th scope="col">Actor</th><th scope="col">Address</th><th scope="col">Target</th><th scope="col">Details</th></tr></thead>
  <tbody>
  ${entries.length ? entries.map(entryRow) : html`<tr class="empty"><td colspan="6">${emptyText}</td></tr>`}
  </tbody>
</table>
</div>
${partial ? html`<p class="muted">Searched a large stretch of the log without filling this page; continue to search further back.</p>` : ''}
<nav class="pager" aria-label="Pages">
  ${newer ? html`<a class="button subtle" href="${link(params, { after: newer })}">← Newer</a>` : ''}
  ${!v.newest ? html`<a class="button subtle" href="${link(params, {})}">Newest</a>` : ''}
  ${older ? html`<a class="button subtle" href="${link(params, { before: older })}">${partial ? 'Search older →' : 'Older →'}</a>` : ''}
</nav>`,
  });
}
