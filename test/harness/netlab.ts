// Several test hosts in network namespaces of the test's own, wired into small networks: a Tailscale subnet router in
// front of a LAN, an exit node in front of an "internet", clients that must not reach either except through the
// tailnet. Each namespace comes from netns.ts (loopback, an uplink to nowhere, and here no default route), reaches the
// image's router on the host's 127.0.0.1:<port> through netns.ts's Unix-socket bridge, and is linked to the others
// with veth pairs made here. Nothing is added to the host's interfaces or routes.
//
//   client ns ──(bridge to host 127.0.0.1)──► image      router ns: eth1 ── veth ── lan ns: br0 (the LAN's host)
//
// Without a default route, an address that no route inside covers fails at once with ENETUNREACH: so a client that
// does not route an address through the tailnet cannot reach it some other way, and the test can tell "not routed"
// from "routed and dropped". A namespace's processes are killed when the lab is destroyed; a later lab also removes
// what a lab whose process died left behind (netns.ts names carry the process id).
import { execFile, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { promisify } from 'node:util';
import { createNetns, type Netns } from './netns.ts';
import { findBinary, type Proc, type StartOptions, startProcess } from './process.ts';

const run = promisify(execFile);

/** What is missing to run namespace tests here, as one sentence; null when they can run. */
export function netlabMissing(): string | null {
  if (process.getuid?.() !== 0) return 'network namespace tests need root (ip netns add)';
  if (!findBinary('ip')) return 'iproute2 (ip) not found; apt-get install iproute2';
  return null;
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Kills what still runs in the namespace (only ever processes a test started there) and removes it. */
function removeNamespaceSync(name: string): void {
  try {
    const pids = execFileSync('ip', ['netns', 'pids', name], { encoding: 'utf8' }).split(/\s+/).filter(Boolean);
    for (const p of pids) {
      try {
        process.kill(Number(p), 'SIGKILL');
      } catch {
        // already gone
      }
    }
    execFileSync('ip', ['netns', 'del', name], { stdio: 'ignore' });
  } catch {
    // already gone
  }
}

/** Namespaces netns.ts made (hse-<label>-<pid>-<random>) for processes that no longer exist. */
function sweepDeadLabs(): void {
  let names: string[] = [];
  try {
    names = fs.readdirSync('/var/run/netns');
  } catch {
    return;
  }
  for (const n of names) {
    const m = n.match(/^hse-.+-(\d+)-[a-z0-9]{1,4}$/);
    if (m && !pidAlive(Number(m[1]))) removeNamespaceSync(n);
  }
}

export class Lab {
  private readonly spaces = new Map<string, Netns>();
  private links = 0;
  private destroyed = false;
  private readonly onExit = () => this.killAll();

  private constructor() {}

  static create(): Lab {
    const missing = netlabMissing();
    if (missing) throw new Error(missing);
    sweepDeadLabs();
    const lab = new Lab();
    process.on('exit', lab.onExit);
    return lab;
  }

  /** The namespace called `name` in this lab (its full name for `ip netns`). */
  ns(name: string): Netns {
    const ns = this.spaces.get(name);
    if (!ns) throw new Error(`no namespace ${name} in this lab`);
    return ns;
  }

  /**
   * A new namespace, with no default route. With `hostPort`, the host's 127.0.0.1:<hostPort> (the image's router) is
   * reachable inside as 127.0.0.1:<hostPort>, so a client there uses the same login server URL as on the host.
   */
  async namespace(name: string, hostPort?: number): Promise<Netns> {
    if (this.spaces.has(name)) throw new Error(`namespace ${name} exists already`);
    const ns = await createNetns(name, { defaultRoute: false });
    this.spaces.set(name, ns);
    if (hostPort !== undefined) await ns.bridgeTcp(hostPort);
    return ns;
  }

  /**
   * A veth pair between two namespaces: `a` gets interface `ifA` with `addrA` (CIDR), `b` gets `ifB` with `addrB`
   * — or, given `{ bridge }`, `ifB` joins that bridge in `b` and has no address of its own.
   */
  async link(a: string, ifA: string, addrA: string, b: string, ifB: string, addrB: string | { bridge: string }): Promise<void> {
    const na = this.ns(a);
    const nb = this.ns(b);
    // Made under temporary names inside the namespaces, so they never appear on the host nor clash there.
    const i = this.links++;
    await run('ip', ['link', 'add', `lab${i}a`, 'netns', na.name, 'type', 'veth', 'peer', 'name', `lab${i}b`, 'netns', nb.name]);
    await na.exec('ip', ['link', 'set', `lab${i}a`, 'name', ifA]);
    await nb.exec('ip', ['link', 'set', `lab${i}b`, 'name', ifB]);
    await na.exec('ip', ['addr', 'add', addrA, 'dev', ifA]);
    if (typeof addrB === 'string') await nb.exec('ip', ['addr', 'add', addrB, 'dev', ifB]);
    else await nb.exec('ip', ['link', 'set', ifB, 'master', addrB.bridge]);
    await na.exec('ip', ['link', 'set', ifA, 'up']);
    await nb.exec('ip', ['link', 'set', ifB, 'up']);
  }

  /** A bridge inside a namespace, with an address of its own (the LAN's host). */
  async bridge(name: string, bridge: string, addr: string): Promise<void> {
    const ns = this.ns(name);
    await ns.exec('ip', ['link', 'add', bridge, 'type', 'bridge']);
    await ns.exec('ip', ['addr', 'add', addr, 'dev', bridge]);
    await ns.exec('ip', ['link', 'set', bridge, 'up']);
  }

  /** `ip …` inside the namespace (routes, addresses). */
  async ip(name: string, args: string[]): Promise<string> {
    return (await this.ns(name).exec('ip', args)).stdout;
  }

  /** Starts a program inside the namespace (`ip netns exec` execs it, so the process is the program itself). */
  start(name: string, label: string, cmd: string, args: string[], opts: StartOptions = {}): Proc {
    const wrap = this.ns(name).wrap;
    return startProcess(label, wrap[0], [...wrap.slice(1), cmd, ...args], opts);
  }

  private killAll(): void {
    for (const ns of this.spaces.values()) removeNamespaceSync(ns.name);
  }

  /** Removes every namespace of the lab, killing what still runs inside. */
  async destroy(): Promise<void> {
    if (this.destroyed) return;
    this.destroyed = true;
    process.off('exit', this.onExit);
    for (const ns of this.spaces.values()) {
      removeNamespaceSync(ns.name);
      await ns.destroy();
    }
  }
}
