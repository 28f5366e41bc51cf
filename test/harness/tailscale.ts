// Runs the official Tailscale client (tailscaled + tailscale, `go install`ed at the pinned version by .ci/run) as a
// test peer: userspace networking (no TUN, no root routes), its own state and socket directory, several per machine.
// Environment knobs keep it on loopback: relay-only paths (no direct UDP to the machine's other addresses), no port
// mapping probes to the LAN gateway, no log uploads.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';

const run = promisify(execFile);

export const TS_VERSION = '1.102.3';
const GOBIN = process.env.HSE_TEST_GOBIN ?? path.join(process.env.GOPATH ?? path.join(os.homedir(), 'go'), 'bin');
export const TAILSCALED = process.env.HSE_TAILSCALED ?? path.join(GOBIN, 'tailscaled');
export const TAILSCALE = process.env.HSE_TAILSCALE ?? path.join(GOBIN, 'tailscale');

export function haveTailscale(): boolean {
  return fs.existsSync(TAILSCALED) && fs.existsSync(TAILSCALE);
}

export interface TsNodeOptions {
  name: string;
  /** Extra environment for tailscaled (e.g. SSL_CERT_FILE for a test CA, TS_DEBUG_USE_DERP_HTTP for http:// tests). */
  env?: Record<string, string>;
}

export interface TsStatusPeer {
  HostName: string;
  DNSName: string;
  TailscaleIPs: string[];
  Online: boolean;
  ID: string;
}

export interface TsStatus {
  BackendState: string;
  AuthURL: string;
  Self: TsStatusPeer;
  Peer: Record<string, TsStatusPeer> | null;
}

export class TsNode {
  readonly name: string;
  readonly dir: string;
  readonly socket: string;
  private proc: ChildProcess | null = null;
  private log = '';
  private readonly env: Record<string, string>;

  constructor(opts: TsNodeOptions) {
    this.name = opts.name;
    this.dir = fs.mkdtempSync(path.join(os.tmpdir(), `hse-ts-${opts.name}-`));
    this.socket = path.join(this.dir, 'tailscaled.sock');
    this.env = {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOME: this.dir,
      TS_DEBUG_ALWAYS_USE_DERP: '1',
      TS_DISABLE_PORTMAPPER: '1',
      TS_NO_LOGS_NO_SUPPORT: 'true',
      ...opts.env,
    };
  }

  async start(): Promise<void> {
    this.proc = spawn(
      TAILSCALED,
      ['--tun=userspace-networking', `--statedir=${path.join(this.dir, 'state')}`, `--socket=${this.socket}`, '--port=0', '--no-logs-no-support'],
      { env: this.env, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    const keep = (d: Buffer) => {
      this.log += d.toString();
      if (this.log.length > 2_000_000) this.log = this.log.slice(-1_000_000);
    };
    this.proc.stdout!.on('data', keep);
    this.proc.stderr!.on('data', keep);
    for (let i = 0; i < 200 && !fs.existsSync(this.socket); i++) await sleep(50);
    if (!fs.existsSync(this.socket)) throw new Error(`tailscaled ${this.name} did not start:\n${this.log}`);
  }

  output(): string {
    return this.log;
  }

  async cli(args: string[], timeoutMs = 60_000): Promise<{ stdout: string; stderr: string }> {
    return run(TAILSCALE, [`--socket=${this.socket}`, ...args], { env: this.env, timeout: timeoutMs });
  }

  /** `tailscale up` that returns when the command finishes (pre-auth key) — or, without a key, runs in background. */
  async up(loginServer: string, extra: string[] = []): Promise<void> {
    await this.cli(['up', `--login-server=${loginServer}`, `--hostname=${this.name}`, '--accept-dns=false', '--accept-routes=false', ...extra], 90_000);
  }

  /** Starts an interactive `tailscale up` and resolves with the login URL it prints. */
  async upInteractive(loginServer: string): Promise<{ url: string; done: Promise<number | null> }> {
    const p = spawn(
      TAILSCALE,
      [`--socket=${this.socket}`, 'up', `--login-server=${loginServer}`, `--hostname=${this.name}`, '--accept-dns=false', '--timeout=120s'],
      {
        env: this.env,
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let out = '';
    p.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    p.stderr!.on('data', (d: Buffer) => (out += d.toString()));
    const done = new Promise<number | null>((r) => p.once('exit', (c) => r(c)));
    for (let i = 0; i < 600; i++) {
      const m = /(https?:\/\/\S+\/console\/register\/\S+)/.exec(out);
      if (m) return { url: m[1], done };
      await sleep(100);
    }
    p.kill();
    throw new Error(`tailscale up printed no login URL:\n${out}\n--- tailscaled ---\n${this.log.slice(-5000)}`);
  }

  async status(): Promise<TsStatus> {
    const { stdout } = await this.cli(['status', '--json']);
    return JSON.parse(stdout) as TsStatus;
  }

  /** Polls `tailscale status` until `pred` holds. */
  async waitFor(pred: (s: TsStatus) => boolean, what: string, timeoutMs = 60_000): Promise<TsStatus> {
    const deadline = Date.now() + timeoutMs;
    let last: TsStatus | null = null;
    while (Date.now() < deadline) {
      try {
        last = await this.status();
        if (pred(last)) return last;
      } catch {
        // daemon still starting
      }
      await sleep(250);
    }
    throw new Error(
      `${this.name}: timed out waiting for ${what}; last status: ${JSON.stringify(last)?.slice(0, 2000)}\n--- tailscaled log tail ---\n${this.log.slice(-6000)}`,
    );
  }

  peers(s: TsStatus): TsStatusPeer[] {
    return Object.values(s.Peer ?? {});
  }

  async stop(): Promise<void> {
    if (this.proc && this.proc.exitCode === null) {
      this.proc.kill('SIGTERM');
      await Promise.race([new Promise((r) => this.proc!.once('exit', r)), sleep(5000)]);
      if (this.proc.exitCode === null) this.proc.kill('SIGKILL');
    }
  }

  async destroy(): Promise<void> {
    await this.stop();
    fs.rmSync(this.dir, { recursive: true, force: true });
  }
}
