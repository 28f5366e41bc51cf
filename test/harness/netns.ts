// A private network namespace for one test, for the few client features that need a real TUN device (an official
// client in userspace networking cannot reach its own 100.100.100.100 services from the host: the Taildrive WebDAV
// server on 100.100.100.100:8080 is one). The namespace has its loopback and an uplink to nowhere; nothing is added to the
// host's interfaces or routes. The image's router (on the host's 127.0.0.1) is reached from inside through a bridge made of
// a Unix socket — file system paths are shared across namespaces — so a client in the namespace uses the same login
// server URL, http://127.0.0.1:<port>, as the clients outside:
//
//   namespace 127.0.0.1:<port> ──(forwarder inside)──► /tmp/…/bridge.sock ──(forwarder here)──► host 127.0.0.1:<port>
//
// Only TCP crosses (control, DERP over HTTP); STUN does not, which relay-only clients do not need. Needs root
// (ip netns) and /dev/net/tun, as .ci/run gives.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { NODE, type Proc, startProcess } from './process.ts';

const run = promisify(execFile);

export interface Netns {
  name: string;
  /** argv prefix running a program inside the namespace: [...netns.wrap, program, ...args]. */
  wrap: string[];
  /** Runs a program inside the namespace to completion. */
  exec(cmd: string, args: string[], timeoutMs?: number): Promise<{ stdout: string; stderr: string }>;
  /** Makes the host's 127.0.0.1:<port> reachable as 127.0.0.1:<port> inside the namespace. */
  bridgeTcp(port: number): Promise<void>;
  destroy(): Promise<void>;
}

/** Whether this machine can give a test a namespace with a TUN device (root, `ip`, /dev/net/tun). */
export function canUseNetns(): boolean {
  return process.getuid?.() === 0 && fs.existsSync('/dev/net/tun') && ['/usr/sbin/ip', '/sbin/ip', '/usr/bin/ip', '/bin/ip'].some((p) => fs.existsSync(p));
}

// The forwarder inside the namespace: every connection to 127.0.0.1:<port> is piped to the Unix socket.
const INSIDE = `
const net = require('node:net');
const [port, sock] = process.argv.slice(1);
net.createServer((c) => {
  const u = net.connect(sock);
  c.pipe(u).pipe(c);
  const end = () => { c.destroy(); u.destroy(); };
  c.on('error', end); u.on('error', end); c.on('close', end); u.on('close', end);
}).listen(Number(port), '127.0.0.1', () => console.log('bridge listening'));
`;

export interface NetnsOptions {
  /**
   * A default route over the uplink (default true). Without it, an address no route inside covers is unreachable
   * (ENETUNREACH at once) instead of vanishing down the link to nowhere: what tests of routing need, to tell "not
   * routed" from "routed and dropped".
   */
  defaultRoute?: boolean;
}

export async function createNetns(label: string, opts: NetnsOptions = {}): Promise<Netns> {
  const name = `hse-${label}-${process.pid}-${Math.random().toString(36).slice(2, 6)}`;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `hse-netns-${label}-`));
  await run('ip', ['netns', 'add', name]);
  const wrap = ['ip', 'netns', 'exec', name];
  const procs: Proc[] = [];
  const servers: net.Server[] = [];
  const ns: Netns = {
    name,
    wrap,
    exec: (cmd, args, timeoutMs = 30_000) => run(wrap[0], [...wrap.slice(1), cmd, ...args], { timeout: timeoutMs }),
    async bridgeTcp(port) {
      const sock = path.join(dir, `bridge-${port}.sock`);
      const server = net.createServer((u) => {
        const c = net.connect(port, '127.0.0.1');
        u.pipe(c).pipe(u);
        const end = () => {
          u.destroy();
          c.destroy();
        };
        u.on('error', end);
        c.on('error', end);
        u.on('close', end);
        c.on('close', end);
      });
      await new Promise<void>((resolve, reject) => server.once('error', reject).listen(sock, resolve));
      servers.push(server);
      const p = startProcess(`bridge ${port} in ${name}`, wrap[0], [...wrap.slice(1), NODE, '-e', INSIDE, String(port), sock]);
      procs.push(p);
      await p.waitFor(/bridge listening/, 15_000);
    },
    async destroy() {
      for (const p of procs) await p.stop();
      for (const s of servers) await new Promise((r) => s.close(r));
      await run('ip', ['netns', 'del', name]).catch(() => undefined);
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
  try {
    await ns.exec('ip', ['link', 'set', 'lo', 'up']);
    // A client that sees no interface but loopback and no default route thinks the network is down and never logs
    // in: a veth pair with both ends inside (a link to nowhere) and a default route over it make it look connected.
    await ns.exec('ip', ['link', 'add', 'uplink0', 'type', 'veth', 'peer', 'name', 'uplink1']);
    await ns.exec('ip', ['addr', 'add', '192.0.2.10/24', 'dev', 'uplink0']);
    await ns.exec('ip', ['link', 'set', 'uplink0', 'up']);
    await ns.exec('ip', ['link', 'set', 'uplink1', 'up']);
    if (opts.defaultRoute !== false) await ns.exec('ip', ['route', 'add', 'default', 'via', '192.0.2.1', 'dev', 'uplink0']);
  } catch (e) {
    await ns.destroy();
    throw e;
  }
  return ns;
}
