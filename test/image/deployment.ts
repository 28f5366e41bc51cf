// A deployment as an operator has one: a directory laid out like the repository, holding the real deploy/compose.yaml
// and advanced/proxy.yaml (symlinks to the checked-in files, so what runs is what is shipped) and the operator's
// deploy/.env, from which `docker compose -f deploy/compose.yaml [-f advanced/proxy.yaml] ...` runs as documented.
// A directory of its own rather than the checkout, so a developer's own deploy/.env is never touched.
//
// The compose project is called hse-image-test (COMPOSE_PROJECT_NAME, which Compose puts before the file's `name: hse`)
// so that `docker compose down -v` here can never remove a real `hse` deployment's volume on the same machine. Its
// network is therefore hse-image-test_default where the documents say hse_default.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Engine, ExecResult } from '../harness/engine.ts';
import { ROOT } from '../harness/process.ts';

export const PROJECT = 'hse-image-test';
export const NETWORK = `${PROJECT}_default`;
/** The container Compose names for the hse service. */
export const CONTAINER = `${PROJECT}-hse-1`;
export const BASE = 'deploy/compose.yaml';
export const OVERLAY = 'advanced/proxy.yaml';

export class Deployment {
  readonly dir: string;
  private readonly engine: Engine;

  constructor(engine: Engine) {
    this.engine = engine;
    this.dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hse-deploy-'));
    for (const f of [BASE, OVERLAY]) {
      fs.mkdirSync(path.join(this.dir, path.dirname(f)), { recursive: true });
      fs.symlinkSync(path.join(ROOT, f), path.join(this.dir, f));
    }
  }

  /** Writes deploy/.env, as `cp deploy/.env.example deploy/.env` and editing would. */
  setEnv(vars: Record<string, string>): void {
    const text = Object.entries(vars)
      .map(([k, v]) => `${k}=${v}\n`)
      .join('');
    fs.writeFileSync(path.join(this.dir, 'deploy/.env'), text);
  }

  /** Writes a file into the deployment directory (a test's own compose overlay). */
  write(rel: string, text: string): string {
    const file = path.join(this.dir, rel);
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, text);
    return file;
  }

  /** `docker compose -f <files...> <args...>` from the deployment directory. */
  compose(files: string[], args: string[], timeoutMs?: number): Promise<ExecResult> {
    return this.engine.exec('docker', ['compose', ...files.flatMap((f) => ['-f', f]), ...args], {
      cwd: this.dir,
      env: { COMPOSE_PROJECT_NAME: PROJECT },
      timeoutMs,
    });
  }

  /** Like compose(), but a failure throws with what Compose said. */
  async composeOk(files: string[], args: string[], timeoutMs?: number): Promise<string> {
    const r = await this.compose(files, args, timeoutMs);
    if (r.code !== 0) throw new Error(`docker compose ${args.join(' ')} failed (${r.code}):\n${r.stderr}${r.stdout}`);
    return r.stdout;
  }

  /** A shell command line from a document, run in the deployment directory with the engine's environment. */
  sh(line: string): Promise<ExecResult> {
    return this.engine.exec('bash', ['-o', 'pipefail', '-c', line], { cwd: this.dir, env: { COMPOSE_PROJECT_NAME: PROJECT } });
  }

  /** `docker compose logs hse`, without the "hse-1  | " prefixes. */
  async logs(files: string[]): Promise<string> {
    const r = await this.compose(files, ['logs', '--no-color', '--no-log-prefix', 'hse']);
    return r.stdout + r.stderr;
  }

  /**
   * Runs the image's HEALTHCHECK until it passes. podman schedules health checks with systemd timers; where there is
   * no systemd (CI containers, this sandbox) nothing runs them, so the test does what the timer would do:
   * `podman healthcheck run`, which executes the image's own check in the container and records the result the
   * engine reports (`docker inspect`, `docker compose ps`).
   */
  async waitHealthy(timeoutMs = 120_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    let last: ExecResult = { stdout: '', stderr: 'never ran', code: -1 };
    while (Date.now() < deadline) {
      last = await this.engine.podman(['healthcheck', 'run', CONTAINER], 60_000);
      if (last.code === 0) return;
      await sleep(1000);
    }
    throw new Error(`the container did not turn healthy: ${last.stdout}${last.stderr}`);
  }

  /** `docker inspect -f <format> <container>`. */
  async inspect(format: string): Promise<string> {
    const r = await this.engine.exec('docker', ['inspect', '-f', format, CONTAINER]);
    if (r.code !== 0) throw new Error(`docker inspect failed: ${r.stderr}`);
    return r.stdout.trim();
  }

  /** Removes the containers, the network and the volume (a new tailnet next time), and the directory. */
  async destroy(files: string[]): Promise<void> {
    await this.compose(files, ['down', '--volumes', '--remove-orphans', '--timeout', '10']);
    fs.rmSync(this.dir, { recursive: true, force: true });
  }
}
