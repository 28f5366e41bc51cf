// The activity log as people and scripts read it.
//   GET /console/logs                  page (filters: filter.ts; paging: before=<id> | after=<id>)
//   GET /console/api/logs              same as JSON: { entries, older, newer, partial }; limit=1..500 (default 50);
//                                      400 { error, status } when a filter cannot be understood
//   GET /console/logs/export.csv       every matching entry, CSV (formula cells neutralised: csv.ts)
//   GET /console/logs/export.json      every matching entry, a JSON array
// All of them need a signed-in session (any role).
import type { Redis } from 'ioredis';
import { PassThrough } from 'node:stream';
import type { Config } from '../../../../shared/config.ts';
import type { Logger } from '../../../../shared/log.ts';
import { PageError } from '../errors.ts';
import { publicUrl } from '../request/public-url.ts';
import { logsPage } from '../views/logs-page.ts';
import { csvEntry, csvHeader } from './csv.ts';
import { filterParams, readFilter, type Filter } from './filter.ts';
import { DEFAULT_PAGE, findAll, findPage, MAX_PAGE, STREAM_ID_RE } from './query.ts';
import { type ConsoleContext, type ConsoleMiddleware, type ConsoleRouter, viewerOf } from '../request/context.ts';

export interface LogsDeps {
  cfg: Config;
  redis: Redis;
  log: Logger;
  gate: ConsoleMiddleware;
}

function cursor(ctx: ConsoleContext, name: 'before' | 'after'): string | undefined {
  const v = ctx.query[name];
  if (v === undefined || v === '') return undefined;
  if (typeof v !== 'string' || !STREAM_ID_RE.test(v)) throw new PageError(400, 'Bad page link', `"${name}" must be an entry id such as 1732262400000-0.`);
  return v;
}

function exportName(ext: string): string {
  return `hse-activity-${new Date().toISOString().replace(/[:.]/g, '-')}.${ext}`;
}

/**
 * Streams an export so a large log never sits in memory as one string. The first batch is read before the answer
 * starts, so a store that is down gives the 503 page rather than a truncated file.
 */
async function streamExport(ctx: ConsoleContext, d: LogsDeps, f: Filter, format: 'csv' | 'json'): Promise<void> {
  const it = findAll(d.redis, f, d.cfg.activityMaxEntries);
  let step = await it.next();
  const out = new PassThrough();
  ctx.set('Content-Disposition', `attachment; filename="${exportName(format)}"`);
  ctx.type = format === 'csv' ? 'text/csv; charset=utf-8' : 'application/json; charset=utf-8';
  ctx.body = out;
  void (async () => {
    try {
      let first = true;
      out.write(format === 'csv' ? csvHeader() : '[\n');
      while (!step.done) {
        if (out.destroyed) return;
        const e = step.value;
        const chunk = format === 'csv' ? csvEntry(e) : `${first ? '' : ',\n'}${JSON.stringify(e)}`;
        first = false;
        if (!out.write(chunk)) {
          await new Promise((r) => {
            out.once('drain', r);
            out.once('close', r);
          });
        }
        step = await it.next();
      }
      out.end(format === 'csv' ? '' : '\n]\n');
    } catch (err) {
      // Headers are gone already; cut the download short so it cannot pass for a complete file.
      d.log.warn('activity export failed part-way', { error: (err as Error).message });
      out.destroy(err as Error);
    }
  })();
}

export function logsRoutes(router: ConsoleRouter, d: LogsDeps): void {
  router.get('/console/logs', d.gate, async (ctx) => {
    const f = readFilter(ctx.query);
    const before = cursor(ctx, 'before');
    const after = before ? undefined : cursor(ctx, 'after');
    const result = await findPage(d.redis, f, { before, after, limit: DEFAULT_PAGE });
    if (after && result.newer === null) {
      // Paged back up to the newest entries: show the live first page instead.
      const q = filterParams(f.raw).toString();
      ctx.redirect(publicUrl(d.cfg, `/console/logs${q ? `?${q}` : ''}`));
      return;
    }
    ctx.type = 'html';
    ctx.body = logsPage({
      viewer: viewerOf(ctx),
      filter: f.raw,
      errors: f.errors,
      result,
      filtered: f.active,
      newest: !before && !after,
    });
  });

  router.get('/console/api/logs', d.gate, async (ctx) => {
    const f = readFilter(ctx.query);
    if (f.errors.length) throw new PageError(400, 'Bad filter', f.errors.join(' '));
    const limitText = typeof ctx.query.limit === 'string' ? ctx.query.limit : '';
    if (limitText !== '' && !(/^\d{1,3}$/.test(limitText) && Number(limitText) >= 1 && Number(limitText) <= MAX_PAGE)) {
      throw new PageError(400, 'Bad limit', `limit must be a whole number from 1 to ${MAX_PAGE}.`);
    }
    const before = cursor(ctx, 'before');
    const after = before ? undefined : cursor(ctx, 'after');
    const r = await findPage(d.redis, f, { before, after, limit: limitText ? Number(limitText) : DEFAULT_PAGE });
    ctx.body = { entries: r.entries, older: r.older, newer: r.newer, partial: r.partial };
  });

  router.get('/console/logs/export.csv', d.gate, async (ctx) => {
    const f = readFilter(ctx.query);
    if (f.errors.length) throw new PageError(400, 'Bad filter', f.errors.join(' '));
    await streamExport(ctx, d, f, 'csv');
  });

  router.get('/console/logs/export.json', d.gate, async (ctx) => {
    const f = readFilter(ctx.query);
    if (f.errors.length) throw new PageError(400, 'Bad filter', f.errors.join(' '));
    await streamExport(ctx, d, f, 'json');
  });
}
