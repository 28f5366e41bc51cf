// The real pm2 (the project's pinned one) with its own PM2_HOME in a temp dir, so a test has its own daemon and never
// touches an operator's pm2.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { NODE, ROOT } from '../harness/process.ts';

const run = promisify(execFile);
const PM2 = path.join(ROOT, 'node_modules/pm2/bin/pm2');

export interface Pm2App {
  name: string;
  pid: number;
  pm2_env: { status: string; restart_time: number; exit_code?: number; pm_out_log_path: string; pm_err_log_path: string };
}

export class Pm2 {
  readonly home = fs.mkdtempSync(path.join(os.tmpdir(), 'hse-pm2-'));
  private readonly env: Record<string, string>;

  constructor(env: Record<string, string>) {
    // node_modules/.bin first, as under `npm start`: pm2 then runs its daemon with the pinned Node too.
    this.env = { PATH: `${path.join(ROOT, 'node_modules/.bin')}:${process.env.PATH}`, HOME: this.home, PM2_HOME: this.home, ...env };
  }

  async cli(...args: string[]): Promise<string> {
    const { stdout } = await run(NODE, [PM2, ...args], { env: this.env, cwd: ROOT, timeout: 60_000 });
    return stdout;
  }

  async list(): Promise<Pm2App[]> {
    return JSON.parse(await this.cli('jlist')) as Pm2App[];
  }

  async app(name: string): Promise<Pm2App> {
    const a = (await this.list()).find((x) => x.name === name);
    if (!a) throw new Error(`pm2 has no app ${name}`);
    return a;
  }

  /** Polls until `test` holds for the app (pm2 reports state changes asynchronously). */
  async waitApp(name: string, test: (a: Pm2App) => boolean, what: string, ms = 30_000): Promise<Pm2App> {
    const deadline = Date.now() + ms;
    let last: Pm2App | undefined;
    while (Date.now() < deadline) {
      last = await this.app(name);
      if (test(last)) return last;
      await new Promise((r) => setTimeout(r, 250));
    }
    throw new Error(`pm2 app ${name}: ${what} did not happen; last state ${JSON.stringify(last?.pm2_env.status)}`);
  }

  log(a: Pm2App): string {
    const read = (f: string) => (fs.existsSync(f) ? fs.readFileSync(f, 'utf8') : '');
    return read(a.pm2_env.pm_out_log_path) + read(a.pm2_env.pm_err_log_path);
  }

  async kill(): Promise<void> {
    await this.cli('kill').catch(() => undefined);
    fs.rmSync(this.home, { recursive: true, force: true });
  }
}
