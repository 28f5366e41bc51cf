// The console's own static files (CSS, the live-tail script, the icon), read once at start from
// services/console/public. Pages link them with a content hash in the query, so they can be cached immutably and a
// new version is fetched right after an upgrade.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ConsoleContext, Next } from './request/context.ts';

const PUBLIC_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../public');

const TYPES: Record<string, string> = {
  '.css': 'text/css; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.svg': 'image/svg+xml',
};

interface Asset {
  body: Buffer;
  type: string;
  hash: string;
}

const assets = new Map<string, Asset>();
for (const name of fs.readdirSync(PUBLIC_DIR)) {
  const type = TYPES[path.extname(name)];
  if (!type) continue;
  const body = fs.readFileSync(path.join(PUBLIC_DIR, name));
  assets.set(name, { body, type, hash: crypto.createHash('sha256').update(body).digest('hex').slice(0, 16) });
}

export function assetUrl(name: string): string {
  const a = assets.get(name);
  if (!a) throw new Error(`console asset "${name}" is missing from ${PUBLIC_DIR}`);
  return `/console/static/${name}?v=${a.hash}`;
}

/** Serves GET/HEAD /console/static/<name>; everything else passes on. */
export async function serveStatic(ctx: ConsoleContext, next: Next): Promise<void> {
  const m = /^\/console\/static\/([A-Za-z0-9._-]+)$/.exec(ctx.path);
  if (!m || (ctx.method !== 'GET' && ctx.method !== 'HEAD')) return next();
  const a = assets.get(m[1]);
  if (!a) return next();
  ctx.type = a.type;
  ctx.set('Cache-Control', ctx.query.v === a.hash ? 'public, max-age=31536000, immutable' : 'no-cache');
  ctx.etag = a.hash;
  ctx.status = 200; // Koa only answers `fresh` for a 2xx response
  if (ctx.fresh) {
    ctx.status = 304;
    return;
  }
  ctx.body = a.body;
}
