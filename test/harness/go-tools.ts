// The project's own small Go test programs (test/apiclient: the official Go client for Tailscale's API; test/promlint:
// the linter `promtool check metrics` runs), built into GOBIN as hse-<name> by .ci/run. A binary is used when the
// "<binary>.sum" beside it names the hash of the sources it was built from (go.mod, go.sum, *.go); otherwise — a
// developer machine, or sources changed since — it is built here (seconds, once the module cache has the pinned
// modules), exactly as .ci/run builds it.
import { execFile } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { findBinary, GOBIN, ROOT } from './process.ts';

const run = promisify(execFile);

export type GoTool = 'apiclient' | 'promlint';

/** The hash .ci/run writes: sha256 of go.mod, go.sum and the .go files in name order, first 16 hex digits. */
export function sourceSum(dir: string): string {
  const files = [
    'go.mod',
    'go.sum',
    ...fs
      .readdirSync(dir)
      .filter((f) => f.endsWith('.go'))
      .sort(),
  ];
  const h = crypto.createHash('sha256');
  for (const f of files) h.update(fs.readFileSync(path.join(dir, f)));
  return h.digest('hex').slice(0, 16);
}

export async function goTool(name: GoTool): Promise<string> {
  const dir = path.join(ROOT, 'test', name);
  const bin = path.join(GOBIN, `hse-${name}`);
  const sum = sourceSum(dir);
  if (fs.existsSync(bin) && fs.existsSync(`${bin}.sum`) && fs.readFileSync(`${bin}.sum`, 'utf8').trim() === sum) return bin;
  const go = findBinary('go') ?? (fs.existsSync('/usr/local/go/bin/go') ? '/usr/local/go/bin/go' : null);
  if (!go) throw new Error(`hse-${name} is not built and Go is not installed; run bash .ci/run`);
  fs.mkdirSync(GOBIN, { recursive: true });
  await run(go, ['build', '-trimpath', '-o', bin, '.'], { cwd: dir, env: { ...process.env, CGO_ENABLED: '0' }, timeout: 600_000 });
  fs.writeFileSync(`${bin}.sum`, `${sum}\n`);
  return bin;
}
