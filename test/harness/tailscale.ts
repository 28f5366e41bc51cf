// Runs the official Tailscale client (tailscaled + tailscale, `go install`ed at the pinned version by .ci/run) as a
// test peer: userspace networking (no TUN, no root routes), its own state and socket directory, several per machine.
// Environment knobs keep it on loopback: relay-only paths (no direct UDP to the machine's other addresses), no port
// mapping probes to the LAN gateway, no log uploads.
import { execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { GOBIN, startProcess, type Proc } from './process.ts';

const run = promisify(execFile);

export const TS_VERSION = '1.102.3';
export const TAILSCALED = process.env.HSE_TAILSCALED ?? path.join(GOBIN, 'tailscaled');
export const TAILSCALE = process.env.HSE_TAILSCALE ?? path.join(GOBIN, 'tailscale');

export function haveTailscale(): boolean {
  return fs.existsSync(TAILSCALED) && fs.existsSync(TAILSCALE);
}

export interface TsNodeOptions {
  name: string;
  /** Extra environment for tailscaled (e.g. SSL_CERT_FILE for a test CA, TS_DEBUG_USE_DERP_HTTP for http:// tests). */
  env?: Record<string, string>;
  /**
   * A real TUN device of this name instead of userspace networking — only inside a network namespace of the test's own
   * (netns.ts), given here as its argv prefix, so the host's routes are never touched.
   */
  tun?: { name: string; wrap: string[] };
  /** Extra tailscaled flags (e.g. --outbound-http-proxy-listen=127.0.0.1:PORT). */
  daemonArgs?: string[];
  /**
   * Userspace networking inside a network namespace of the test's own (netlab.ts), given as its argv prefix:
   * tailscaled runs there, and so does the CLI, because some commands act on their own — `tailscale nc` to an
   * address the daemon does not route dials it from the CLI's process — and must start from the node's network.
   */
  netns?: { wrap: string[] };
}

export interface TsStatusPeer {
  HostName: string;
  DNSName: string;
  TailscaleIPs: string[];
  Online: boolean;
  ID: string;
  /** Subnet routes this peer is primary for, as the client was told (absent when none). */
  PrimaryRoutes?: string[];
  /** Routes the client would send to this peer (own addresses, primary subnets, exit routes). */
  AllowedIPs?: string[];
  /** The peer offers itself as an exit node to this client (both /0 routes in its AllowedIPs). */
  ExitNodeOption?: boolean;
  /** This client uses the peer as its exit node. */
  ExitNode?: boolean;
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
  private proc: Proc | null = null;
  private readonly env: Record<string, string>;
  private readonly opts: TsNodeOptions;

  constructor(opts: TsNodeOptions) {
    this.opts = opts;
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
    // A restart (same state and socket path) must not mistake the last run's socket for the new daemon's.
    fs.rmSync(this.socket, { force: true });
    const tun = this.opts.tun;
    // The namespace's `ip netns exec` execs tailscaled, so the process stopped later is tailscaled itself.
    const wrap = tun?.wrap ?? this.opts.netns?.wrap;
    const args = [
      `--tun=${tun ? tun.name : 'userspace-networking'}`,
      `--statedir=${path.join(this.dir, 'state')}`,
      `--socket=${this.socket}`,
      '--port=0',
      '--no-logs-no-support',
      ...(this.opts.daemonArgs ?? []),
    ];
    this.proc = startProcess(
      `tailscaled ${this.name}`,
      wrap ? wrap[0] : TAILSCALED,
      wrap ? [...wrap.slice(1), TAILSCALED, ...args] : args,
      // A test reads the log whole (e.g. to check that some error never appeared), so keep a lot of it.
      { env: this.env, keep: { head: 1_000_000, tail: 1_000_000 } },
    );
    for (let i = 0; i < 200 && !fs.existsSync(this.socket); i++) await sleep(50);
    if (!fs.existsSync(this.socket)) throw new Error(`tailscaled ${this.name} did not start:\n${this.log}`);
  }

  /** What tailscaled has logged. */
  private get log(): string {
    return this.proc?.output() ?? '';
  }

  output(): string {
    return this.log;
  }

  async cli(args: string[], timeoutMs = 60_000): Promise<{ stdout: string; stderr: string }> {
    const argv = [`--socket=${this.socket}`, ...args];
    const wrap = this.opts.netns?.wrap;
    if (wrap) return run(wrap[0], [...wrap.slice(1), TAILSCALE, ...argv], { env: this.env, timeout: timeoutMs });
    return run(TAILSCALE, argv, { env: this.env, timeout: timeoutMs });
  }

  /** `tailscale up` that returns when the command finishes (pre-auth key) — or, without a key, runs in background. */
  async up(loginServer: string, extra: string[] = []): Promise<void> {
    // The CLI refuses a flag given twice: the defaults here give way to the caller's.
    const defaults = ['--accept-dns=false', '--accept-routes=false'].filter((d) => !extra.some((e) => e.startsWith(d.split('=')[0])));
    await this.cli(['up', `--login-server=${loginServer}`, `--hostname=${this.name}`, ...defaults, ...extra], 90_000);
  }

  /** Starts an interactive `tailscale up` and resolves with the login URL it prints. */
  async upInteractive(loginServer: string): Promise<{ url: string; done: Promise<number | null> }> {
    const p = startProcess(
      'tailscale up',
      TAILSCALE,
      [`--socket=${this.socket}`, 'up', `--login-server=${loginServer}`, `--hostname=${this.name}`, '--accept-dns=false', '--timeout=120s'],
      { env: this.env },
    );
    try {
      const m = await p.waitFor(/(https?:\/\/\S+\/console\/register\/\S+)/, 60_000);
      return { url: m[1], done: p.exited() };
    } catch (e) {
      p.proc.kill();
      throw new Error(`tailscale up printed no login URL: ${(e as Error).message}\n--- tailscaled ---\n${this.log.slice(-5000)}`);
    }
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

  /**
   * Opens a TCP connection through the tailnet with `tailscale nc <ip> <port>`, sends a line and waits for the echo
   * (test/harness/echo-server.ts answers it). True when the answer came within `timeoutMs`; false when the connection
   * was refused or dropped — the destination's packet filter drops a SYN it does not admit, so a refused connection
   * shows as no answer.
   */
  async canConnect(ip: string, port: number, timeoutMs = 8000): Promise<boolean> {
    const nc = spawn(TAILSCALE, [`--socket=${this.socket}`, 'nc', ip, String(port)], { env: this.env, stdio: ['pipe', 'pipe', 'pipe'] });
    const token = `probe-${Math.random().toString(36).slice(2)}`;
    return new Promise<boolean>((resolve) => {
      let got = '';
      const done = (ok: boolean) => {
        clearTimeout(timer);
        nc.kill('SIGKILL');
        resolve(ok);
      };
      const timer = setTimeout(() => done(false), timeoutMs);
      nc.stdout.on('data', (d: Buffer) => {
        got += d.toString();
        if (got.includes(token)) done(true);
      });
      nc.on('exit', () => done(got.includes(token)));
      nc.on('error', () => done(false));
      nc.stdin.on('error', () => {});
      nc.stdin.write(`${token}\n`);
    });
  }

  peers(s: TsStatus): TsStatusPeer[] {
    return Object.values(s.Peer ?? {});
  }

  async stop(): Promise<void> {
    await this.proc?.stop('SIGTERM', 5000);
  }

  /**
   * A device that vanishes (power cut, network gone): the daemon is frozen at once, so it sends nothing more and cannot
   * reconnect anywhere while its open connections stay up; `vanish()` then kills it without a shutdown.
   */
  freeze(): void {
    if (this.proc && this.proc.pid > 0) process.kill(this.proc.pid, 'SIGSTOP');
  }

  async vanish(): Promise<void> {
    await this.proc?.stop('SIGKILL', 1000);
  }

  async destroy(): Promise<void> {
    await this.stop();
    fs.rmSync(this.dir, { recursive: true, force: true });
  }
}
