// advanced/proxy.md's commands, read from the document and run as an operator pastes them: only the public URL, the
// password, port numbers and names that are the operator's own are filled in. Checks 1 to 5 run from "a machine that
// is not the proxy": a curl configuration that trusts the test CA and leaves from 127.0.0.2. Used against the image's
// processes (doc-checks.test.ts) and against the built image in a container engine (test/image/).
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { ROOT } from '../harness/process.ts';
import { substitute } from '../harness/proxies.ts';

const run = promisify(execFile);
export const PROXY_DOC = path.join(ROOT, 'advanced/proxy.md');

/** The ```sh blocks of the `## <heading>` section of advanced/proxy.md, in order. */
export function sectionBlocks(heading: string): string[] {
  const doc = fs.readFileSync(PROXY_DOC, 'utf8');
  const start = doc.indexOf(`\n## ${heading}\n`);
  if (start < 0) throw new Error(`advanced/proxy.md has no "## ${heading}" section`);
  const end = doc.indexOf('\n## ', start + 1);
  return [...doc.slice(start, end < 0 ? undefined : end).matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]);
}

/** The one sh block of a section that contains `marker`. */
export function blockWith(heading: string, marker: string): string {
  const found = sectionBlocks(heading).filter((b) => b.includes(marker));
  if (found.length !== 1) throw new Error(`advanced/proxy.md, "${heading}": expected one sh block with ${marker}, found ${found.length}`);
  return found[0];
}

/** The command lines of a block (comments and blank lines dropped). */
export function commandLines(block: string): string[] {
  return block.split('\n').filter((l) => l.trim() !== '' && !l.trimStart().startsWith('#'));
}

/** The operator's laptop: curl trusts the proxy's CA and connects from 127.0.0.2, which is not the proxy. */
export interface Laptop {
  home: string;
  env: Record<string, string>;
  remove(): void;
}

export function operatorLaptop(caFile: string): Laptop {
  const home = fs.mkdtempSync(path.join(os.tmpdir(), 'hse-laptop-'));
  fs.writeFileSync(path.join(home, '.curlrc'), `cacert = "${caFile}"\ninterface = 127.0.0.2\n`);
  return {
    home,
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: home, CURL_HOME: home },
    remove: () => fs.rmSync(home, { recursive: true, force: true }),
  };
}

/** The four lines checks 1 to 5 print, one per check (4 and 5 share the last). */
export interface ChecksOutput {
  /** 1: the /key JSON. */
  key: string;
  /** 2: "302 <url>/console/login". */
  redirect: string;
  /** 3: the session cookie's Set-Cookie line. */
  cookie: string;
  /** 4 and 5: `"ip":"..."` of the newest sign-in in the activity log. */
  ip: string;
}

/** Runs the first block of "The six checks" (checks 1 to 5) against `url` from the laptop. */
export async function runChecks1to5(laptop: Laptop, url: string, password: string, context: () => string = () => ''): Promise<ChecksOutput> {
  let block = sectionBlocks('The six checks')[0];
  block = substitute(block, /^HSE=https:\/\/vpn\.example\.com/gm, `HSE=${url}`, 'proxy.md');
  block = substitute(block, /^PW='[^']*'/gm, `PW='${password}'`, 'proxy.md');
  const { stdout } = await run('bash', ['-e', '-o', 'pipefail', '-c', block], { env: laptop.env, cwd: laptop.home }).catch((e) => {
    throw new Error(`the documented checks failed: ${e.stderr}\n${e.stdout}\n${context()}`);
  });
  const lines = stdout.trim().split('\n');
  if (lines.length !== 4) throw new Error(`the documented checks printed ${lines.length} lines, not 4:\n${stdout}`);
  return { key: lines[0], redirect: lines[1], cookie: lines[2], ip: lines[3] };
}
