// Test hosts in network namespaces of their own (iproute2's `ip netns`, veth pairs, bridges), for tests where what
// crosses a network matters: a Tailscale subnet router in front of a LAN, an exit node in front of an "internet", a
// client that must not reach either except through the tailnet.
//
//          host namespace
//   ┌──────────────────────────────────────┐
//   │ bridge hb<tag>, 10.X.0.1/24  ◄── the image listens here (HSE_LISTEN_ADDRESS)
//   └──┬──────────────┬──────────────┬─────┘
//      │ veth         │ veth         │ veth          each attached namespace: eth0 10.X.0.<10+i>/24
//   ┌──┴───┐      ┌───┴───┐      ┌───┴────┐        and a connected route to 10.X.0.0/24, nothing else:
//   │client│      │router │──────│  lan   │        no default route, so an address that is not routed through
//   └──────┘      └───────┘ link └────────┘        the tailnet is unreachable (ENETUNREACH), never sent to the
//                                                  machine's real network.
// Namespaces linked with `link` (veth) or joined on a bridge inside one of them (`bridge`) form the networks behind
// the routers. Everything the lab creates carries its tag in the name; `destroy` removes it, and so does a later
// lab for labs whose process died without cleaning up (the process id is in the namespace's name).
//
// Needs root and iproute2 (`.ci/run` installs it). Only the addresses made here are ever used.
import { execFile, execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import { promisify } from 'node:util';
import { findBinary, type Proc, type StartOptions, startProcess } from './process.ts';

const run = promisify(execFile);

const NS_PREFIX = 'hsetest';

/** What is missing to run namespace tests here, as one sentence; null when they can run. */
export function netnsMissing(): string | null {
  if (process.getuid?.() !== 0) return 'network namespace tests need root (ip netns add)';
  if (!findBinary('ip')) return 'iproute2 (ip) not found; apt-get install iproute2';
  return null;
}

function ipBin(): string {
  const ip = findBinary('ip');
  if (!ip) throw new Error('iproute2 (ip) not found; apt-get install iproute2');
  return ip;
}

async function ip(args: string[]): Promise<string> {
  try {
    return (await run(ipBin(), args, { timeout: 20_000 })).stdout;
  } catch (e) {
    const err = e as { stderr?: string; message: string };
    throw new Error(`ip ${args.join(' ')} failed: ${(err.stderr ?? err.message).trim()}`);
  }
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Namespace names of labs whose process is gone, and their tags. */
function staleLabs(): { ns: string[]; tags: Set<string> } {
  const ns: string[] = [];
  const tags = new Set<string>();
  let names: string[] = [];
  try {
    names = fs.readdirSync('/var/run/netns');
  } catch {
    return { ns, tags };
  }
  for (const n of names) {
    const m = n.match(new RegExp(`^${NS_PREFIX}-(\\d+)-([a-z0-9]+)-`));
    if (!m || pidAlive(Number(m[1]))) continue;
    ns.push(n);
    tags.add(m[2]);
  }
  return { ns, tags };
}

/** Removes a namespace: the processes still in it (only ever ones a lab started) first, then the name. */
function removeNamespaceSync(ns: string): void {
  try {
    const pids = execFileSync(ipBin(), ['netns', 'pids', ns], { encoding: 'utf8' }).split(/\s+/).filter(Boolean);
    for (const p of pids) {
      try {
        process.kill(Number(p), 'SIGKILL');
      } catch {
        // already gone
      }
    }
  } catch {
    // the namespace is already gone
  }
  try {
    execFileSync(ipBin(), ['netns', 'del', ns], { stdio: 'ignore' });
  } catch {
    // already gone
  }
}

function removeLinkSync(name: string): void {
  try {
    execFileSync(ipBin(), ['link', 'del', name], { stdio: 'ignore' });
  } catch {
    // already gone (a veth goes with its peer's namespace)
  }
}

/** Host links whose names carry one of the tags. */
function hostLinksOf(tags: Set<string>): string[] {
  let out = '';
  try {
    out = execFileSync(ipBin(), ['-o', 'link', 'show'], { encoding: 'utf8' });
  } catch {
    return [];
  }
  const names: string[] = [];
  for (const line of out.split('\n')) {
    const m = line.match(/^\d+:\s+([^:@\s]+)/);
    if (!m) continue;
    for (const t of tags) if (m[1] === `hb${t}` || m[1].startsWith(`hv${t}`) || m[1].startsWith(`hl${t}`)) names.push(m[1]);
  }
  return names;
}

/** A second octet for the lab's host bridge that no route of the host uses yet. */
async function freeHostSubnet(): Promise<number> {
  const routes = await ip(['-4', 'route', 'show', 'table', 'all']);
  const used = new Set<number>();
  for (const m of routes.matchAll(/\b10\.(\d+)\.\d+\.\d+/g)) used.add(Number(m[1]));
  const start = 210 + crypto.randomInt(40);
  for (let k = 0; k < 40; k++) {
    const b = 210 + ((start - 210 + k) % 40);
    if (!used.has(b)) return b;
  }
  throw new Error('no free 10.210-249.0.0/24 subnet for the lab bridge on this host');
}

export class Lab {
  readonly tag: string;
  /** The host's address on the lab bridge: every attached namespace reaches it. */
  readonly hostAddr: string;
  private readonly octet: number;
  private readonly namespaces: string[] = [];
  private attached = 0;
  private links = 0;
  private destroyed = false;
  private readonly onExit = () => this.destroySync();

  private constructor(tag: string, octet: number) {
    this.tag = tag;
    this.octet = octet;
    this.hostAddr = `10.${octet}.0.1`;
  }

  /** Creates the host bridge (after removing what dead labs left behind). */
  static async create(): Promise<Lab> {
    const missing = netnsMissing();
    if (missing) throw new Error(missing);
    const stale = staleLabs();
    for (const ns of stale.ns) removeNamespaceSync(ns);
    for (const l of hostLinksOf(stale.tags)) removeLinkSync(l);
    const lab = new Lab(crypto.randomBytes(3).toString('hex'), await freeHostSubnet());
    process.on('exit', lab.onExit);
    try {
      const br = `hb${lab.tag}`;
      await ip(['link', 'add', br, 'type', 'bridge']);
      await ip(['addr', 'add', `${lab.hostAddr}/24`, 'dev', br]);
      await ip(['link', 'set', br, 'up']);
    } catch (e) {
      lab.destroySync();
      throw e;
    }
    return lab;
  }

  /** The full name of the lab's namespace `name`. */
  nsName(name: string): string {
    return `${NS_PREFIX}-${process.pid}-${this.tag}-${name}`;
  }

  /** A new namespace with loopback up and nothing else. */
  async namespace(name: string): Promise<string> {
    const ns = this.nsName(name);
    await ip(['netns', 'add', ns]);
    this.namespaces.push(ns);
    await ip(['-n', ns, 'link', 'set', 'lo', 'up']);
    return ns;
  }

  /** A new namespace attached to the host bridge (eth0); returns its name and its address there. */
  async attach(name: string): Promise<{ ns: string; addr: string }> {
    const ns = await this.namespace(name);
    const i = this.attached++;
    const hostEnd = `hv${this.tag}${i}`;
    const addr = `10.${this.octet}.0.${10 + i}`;
    await ip(['link', 'add', hostEnd, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', ns]);
    await ip(['link', 'set', hostEnd, 'master', `hb${this.tag}`]);
    await ip(['link', 'set', hostEnd, 'up']);
    await ip(['-n', ns, 'addr', 'add', `${addr}/24`, 'dev', 'eth0']);
    await ip(['-n', ns, 'link', 'set', 'eth0', 'up']);
    return { ns, addr };
  }

  /**
   * A veth pair between two namespaces: `a` gets interface `ifA` with `addrA` (CIDR), `b` gets `ifB` with `addrB`
   * (or, with `bridgeB`, the interface joins that bridge in b and carries no address).
   */
  async link(a: string, ifA: string, addrA: string, b: string, ifB: string, addrB: string | { bridge: string }): Promise<void> {
    const i = this.links++;
    const ta = `hl${this.tag}${i}a`;
    const tb = `hl${this.tag}${i}b`;
    await ip(['link', 'add', ta, 'netns', a, 'type', 'veth', 'peer', 'name', tb, 'netns', b]);
    await ip(['-n', a, 'link', 'set', ta, 'name', ifA]);
    await ip(['-n', b, 'link', 'set', tb, 'name', ifB]);
    await ip(['-n', a, 'addr', 'add', addrA, 'dev', ifA]);
    if (typeof addrB === 'string') await ip(['-n', b, 'addr', 'add', addrB, 'dev', ifB]);
    else await ip(['-n', b, 'link', 'set', ifB, 'master', addrB.bridge]);
    await ip(['-n', a, 'link', 'set', ifA, 'up']);
    await ip(['-n', b, 'link', 'set', ifB, 'up']);
  }

  /** A bridge inside a namespace, with an address of its own (the LAN's host). */
  async bridge(ns: string, name: string, addr: string): Promise<void> {
    await ip(['-n', ns, 'link', 'add', name, 'type', 'bridge']);
    await ip(['-n', ns, 'addr', 'add', addr, 'dev', name]);
    await ip(['-n', ns, 'link', 'set', name, 'up']);
  }

  /** `ip -n ns …`: routes, addresses. */
  async ipIn(ns: string, args: string[]): Promise<string> {
    return ip(['-n', ns, ...args]);
  }

  /** Starts a program inside the namespace (`ip netns exec` execs it, so the process is the program itself). */
  start(ns: string, name: string, cmd: string, args: string[], opts: StartOptions = {}): Proc {
    return startProcess(name, ipBin(), ['netns', 'exec', ns, cmd, ...args], opts);
  }

  /** Removes every namespace and host link of the lab (the processes still inside them are killed). */
  async destroy(): Promise<void> {
    this.destroySync();
  }

  private destroySync(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    process.off('exit', this.onExit);
    for (const ns of this.namespaces.reverse()) removeNamespaceSync(ns);
    for (const l of hostLinksOf(new Set([this.tag]))) removeLinkSync(l);
  }
}
