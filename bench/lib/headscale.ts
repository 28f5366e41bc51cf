// Headscale for a benchmark: the pinned binary (bench/install-peers.sh), a fresh config and SQLite database in a temp
// dir, every listener on loopback, and nothing that reaches the internet: no DERP map download (derp.urls empty, a
// local map file instead, embedded DERP off), no update check, no log upload. Users and pre-auth keys through its
// own CLI over its Unix socket, as an operator would. Config keys as in headscale v0.29.1's config-example.yaml.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { freePorts, HEAD_AND_TAIL, startProcess, type Proc } from '../../test/harness/process.ts';
import { HEADSCALE, PEERS, requirePeer } from './peers.ts';

const run = promisify(execFile);

export interface DerpNodeSpec {
  host: string;
  derpPort: number;
  /** -1: no STUN. */
  stunPort: number;
}

export interface Headscale {
  url: string;
  port: number;
  dir: string;
  server: Proc;
  pids(): Record<string, number>;
  /** Runs its CLI against the running server (over the Unix socket); returns stdout. */
  cli(...args: string[]): Promise<string>;
  /** Creates the user if needed and a reusable pre-auth key (valid 24 h); returns the key. */
  preAuthKey(user: string, opts?: { ephemeral?: boolean }): Promise<string>;
  stop(): Promise<void>;
}

function configYaml(o: {
  dir: string;
  port: number;
  metricsPort: number;
  grpcPort: number;
  derpFile: string;
  logLevel: string;
  policyMode: 'file' | 'database';
}): string {
  return `# Written by bench/lib/headscale.ts for one benchmark run.
server_url: http://127.0.0.1:${o.port}
listen_addr: 127.0.0.1:${o.port}
metrics_listen_addr: 127.0.0.1:${o.metricsPort}
grpc_listen_addr: 127.0.0.1:${o.grpcPort}
grpc_allow_insecure: false
noise:
  private_key_path: ${o.dir}/noise_private.key
prefixes:
  v4: 100.64.0.0/10
  v6: fd7a:115c:a1e0::/48
  allocation: sequential
derp:
  server:
    enabled: false
  urls: []
  paths:
    - ${o.derpFile}
  auto_update_enabled: false
disable_check_updates: true
database:
  type: sqlite
  sqlite:
    path: ${o.dir}/db.sqlite
    write_ahead_log: true
log:
  level: ${o.logLevel}
  format: text
policy:
  mode: ${o.policyMode}
  path: ""
dns:
  magic_dns: true
  base_domain: bench.internal
  override_local_dns: false
  nameservers:
    global: []
unix_socket: ${o.dir}/headscale.sock
unix_socket_permission: "0770"
logtail:
  enabled: false
`;
}

function derpYaml(d: DerpNodeSpec): string {
  return `regions:
  900:
    regionid: 900
    regioncode: bench
    regionname: Bench loopback relay
    nodes:
      - name: 900a
        regionid: 900
        hostname: ${d.host}
        ipv4: ${d.host}
        stunport: ${d.stunPort}
        stunonly: false
        derpport: ${d.derpPort}
        insecurefortests: true
`;
}

/** `policyMode: 'database'` lets the policy be set through the API/CLI (`headscale policy set`), as `hse policy set`. */
export async function startHeadscale(opts: { derp?: DerpNodeSpec; logLevel?: string; policyMode?: 'file' | 'database' } = {}): Promise<Headscale> {
  requirePeer(PEERS.headscale);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hs-bench-'));
  const [port, metricsPort, grpcPort] = await freePorts(3);
  const derpFile = path.join(dir, 'derp.yaml');
  fs.writeFileSync(derpFile, derpYaml(opts.derp ?? { host: '127.0.0.1', derpPort: 3340, stunPort: -1 }));
  const cfgFile = path.join(dir, 'config.yaml');
  fs.writeFileSync(
    cfgFile,
    configYaml({ dir, port, metricsPort, grpcPort, derpFile, logLevel: opts.logLevel ?? 'info', policyMode: opts.policyMode ?? 'file' }),
  );
  const env = { PATH: process.env.PATH, HOME: dir, HEADSCALE_CONFIG: cfgFile };
  const server = startProcess('headscale', HEADSCALE, ['serve'], { env, cwd: dir, keep: HEAD_AND_TAIL });
  try {
    await server.waitFor(/listening and serving HTTP/, 60_000);
  } catch (e) {
    await server.stop();
    fs.rmSync(dir, { recursive: true, force: true });
    throw e;
  }
  const cli = async (...args: string[]) => (await run(HEADSCALE, args, { env, cwd: dir, timeout: 60_000, killSignal: 'SIGKILL' })).stdout;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    dir,
    server,
    pids: () => ({ headscale: server.pid }),
    cli,
    async preAuthKey(user, o = {}) {
      const list = JSON.parse(await cli('users', 'list', '-o', 'json')) as { id: number | string; name: string }[] | null;
      let u = (list ?? []).find((x) => x.name === user);
      if (!u) u = JSON.parse(await cli('users', 'create', user, '-o', 'json')) as { id: number | string; name: string };
      const args = ['preauthkeys', 'create', '-u', String(u.id), '--reusable', '-e', '24h', '-o', 'json'];
      if (o.ephemeral) args.push('--ephemeral');
      const k = JSON.parse(await cli(...args)) as { key: string };
      return k.key;
    },
    async stop() {
      await server.stop();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}
