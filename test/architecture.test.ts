// The import rules of docs/architecture.md ("Who may import whom"), checked over the source tree: shared/ imports no
// service, no service imports another, and inside coordination each layer imports only the layers below it; and the
// benchmarks' load client loads no code of the coordination service.
import fs from 'node:fs';
import path from 'node:path';
import test from 'ava';
import { ROOT } from './harness/process.ts';

function sources(dir: string): string[] {
  const out: string[] = [];
  for (const e of fs.readdirSync(path.join(ROOT, dir), { withFileTypes: true })) {
    const rel = path.join(dir, e.name);
    if (e.isDirectory()) out.push(...sources(rel));
    else if (e.name.endsWith('.ts')) out.push(rel);
  }
  return out;
}

/** Relative import targets of a file, resolved to paths from the project root. */
function imports(file: string): string[] {
  const text = fs.readFileSync(path.join(ROOT, file), 'utf8');
  const out: string[] = [];
  for (const m of text.matchAll(/^\s*(?:import|export)\b[^'"]*?from\s+'(\.[^']+)'|^\s*import\s+'(\.[^']+)'|import\('(\.[^']+)'\)/gm)) {
    const spec = m[1] ?? m[2] ?? m[3];
    out.push(path.normalize(path.join(path.dirname(file), spec)));
  }
  return out;
}

/** The area a path belongs to, for the rules below. */
function area(p: string): string {
  const coord = 'services/coordination/src/';
  if (p.startsWith(coord)) {
    const rest = p.slice(coord.length);
    return rest.includes('/') ? `coordination/${rest.split('/')[0]}` : 'coordination/main';
  }
  const parts = p.split('/');
  if (parts[0] === 'services') return `services/${parts[1]}`;
  return parts[0];
}

const COORD_ALLOWED: Record<string, string[]> = {
  tailcfg: ['tailcfg'],
  state: ['state', 'tailcfg'],
  policy: ['policy', 'tailcfg'],
  map: ['map', 'policy', 'state', 'tailcfg'],
  noise: ['noise', 'tailcfg'],
  control: ['control', 'map', 'policy', 'state', 'tailcfg'],
  admin: ['admin', 'control', 'map', 'policy', 'state', 'tailcfg', 'webhooks'],
  api: ['api', 'admin', 'control', 'map', 'policy', 'state', 'tailcfg', 'webhooks'],
  webhooks: ['webhooks', 'state', 'tailcfg'],
};

function allowed(from: string, to: string): boolean {
  const a = area(from);
  const b = area(to);
  if (b === 'shared') return true;
  if (a === 'shared') return false;
  if (a === 'router') return b === 'router';
  if (a.startsWith('coordination/')) {
    const layer = a.slice('coordination/'.length);
    if (layer === 'main') return b.startsWith('coordination/');
    if (!b.startsWith('coordination/')) return false;
    if (layer === 'data') return false;
    return (COORD_ALLOWED[layer] ?? []).includes(b.slice('coordination/'.length));
  }
  if (a.startsWith('services/')) return a === b;
  return true;
}

test('every import in shared/, router/ and services/ follows the rules of docs/architecture.md', (t) => {
  const files = [...sources('shared'), ...sources('router'), ...sources('services')];
  t.true(files.length > 100, 'the tree was read');
  const broken: string[] = [];
  for (const f of files) {
    for (const target of imports(f)) {
      if (target.includes('node_modules')) continue;
      if (!allowed(f, target)) broken.push(`${f} imports ${target}`);
    }
  }
  t.deepEqual(broken, []);
});

/** Every project file `files` load, directly or through other project files. */
function loadedBy(files: string[]): Set<string> {
  const seen = new Set<string>();
  const queue = [...files];
  while (queue.length > 0) {
    const f = queue.pop()!;
    if (seen.has(f) || f.includes('node_modules')) continue;
    seen.add(f);
    queue.push(...imports(f));
  }
  return seen;
}

test("the bench's load client is its own implementation of the protocol: nothing it loads comes from the coordination service", (t) => {
  const files = sources('bench/load-client');
  t.true(files.length > 5, 'the load client was read');
  const loaded = loadedBy(files);
  t.true(loaded.has('bench/load-client/noise-handshake.ts'));
  t.deepEqual(
    [...loaded].filter((f) => f.startsWith('services/coordination/')),
    [],
  );
});

test('the rule checker itself refuses what the rules forbid', (t) => {
  t.false(allowed('services/coordination/src/map/map-builder.ts', 'services/coordination/src/control/map-hub.ts'));
  t.false(allowed('services/coordination/src/noise/conn.ts', 'services/coordination/src/control/h2-server.ts'));
  t.false(allowed('shared/config.ts', 'services/console/src/app.ts'));
  t.false(allowed('services/console/src/app.ts', 'services/coordination/src/state/store.ts'));
  t.false(allowed('router/src/router.ts', 'services/relay/src/http.ts'));
  t.true(allowed('services/coordination/src/control/register.ts', 'services/coordination/src/state/store.ts'));
  // The transitive walk sees through a harness file to what it loads.
  t.true(loadedBy(['test/harness/control-client.ts']).has('services/coordination/src/noise/x25519.ts'));
});
