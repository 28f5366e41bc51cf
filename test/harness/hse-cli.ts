// The real `hse` CLI (bin/hse.ts on the pinned Node) run against one image: it reaches that image's admin socket
// through the image's own settings (HSE_RUN_DIR and the rest of its environment).
import { execFile } from 'node:child_process';
import path from 'node:path';
import { NODE, ROOT } from './process.ts';

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `hse <args>` with `input` on stdin; never rejects: the exit code is in the result. */
export function runHse(image: { env: Record<string, string> }, args: string[], input = ''): Promise<CliResult> {
  return new Promise((resolve) => {
    const p = execFile(NODE, [path.join(ROOT, 'bin/hse.ts'), ...args], { env: { ...image.env, PATH: process.env.PATH ?? '' } }, (e, stdout, stderr) =>
      resolve({ code: e ? ((e as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
    p.stdin!.end(input);
  });
}

/** Runs `hse <args>` and returns its output; a non-zero exit throws with what the CLI said. */
export async function hseOut(image: { env: Record<string, string> }, args: string[], input = ''): Promise<string> {
  const r = await runHse(image, args, input);
  if (r.code !== 0) throw new Error(`hse ${args.join(' ')} exited ${r.code}:\n${r.stdout}${r.stderr}`);
  return r.stdout;
}
