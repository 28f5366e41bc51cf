// A container engine for the image tests: Debian's podman serving the Docker API (`podman system service`), driven
// by the real Docker CLI and Compose CLI (.ci/install-proxies.sh) through DOCKER_HOST, so that the commands the
// documents give (`docker compose ...`, `docker network inspect ...`) run as written. There is no Docker engine on
// these machines; podman is what Debian ships that serves the same API.
//
// Everything the engine needs from this machine is passed per process, nothing in /etc is changed:
//   - CONTAINERS_CONF, a containers.conf of its own: the runc runtime (Debian's default crun refuses the hybrid cgroup
//     layout of CI machines) and default ulimits no higher than this process's own. Rootful podman otherwise asks for
//     1048576 open files and processes, which runc cannot set without CAP_SYS_RESOURCE (not granted in the sandboxes
//     tests run in): "error setting rlimits for ready process: operation not permitted".
//   - the service runs under prlimit with those same limits, so what the containers ask for is what they inherit.
//   - DOCKER_CONFIG, a Docker CLI configuration whose cli-plugins/ holds the Compose CLI, so `docker compose` works.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { findBinary } from './process.ts';

const run = promisify(execFile);

/** Podman's own cap on RLIMIT_NPROC for what it starts (it lowers a higher limit to this at start). */
const PODMAN_NPROC_CAP = 32768;

/** What the engine needs that this machine lacks, as install instructions; empty when it can run. */
export function engineMissing(): string[] {
  const missing: string[] = [];
  if (!findBinary('podman')) missing.push('podman not found; apt-get install podman runc iptables');
  if (!findBinary('runc')) missing.push('runc not found; apt-get install runc');
  if (!findBinary('iptables')) missing.push('iptables not found (podman publishes ports with it); apt-get install iptables');
  if (!findBinary('prlimit')) missing.push('prlimit not found; apt-get install util-linux');
  if (!findBinary('docker')) missing.push('the Docker CLI (docker) not found; run bash .ci/install-proxies.sh');
  if (!findBinary('docker-compose')) missing.push('the Compose CLI (docker-compose) not found; run bash .ci/install-proxies.sh');
  if (process.getuid?.() !== 0) missing.push('the image tests run rootful podman (published ports, the bridge network): run them as root');
  return missing;
}

export interface ExecResult {
  stdout: string;
  stderr: string;
  code: number;
}

export interface Engine {
  /** unix:// address of the Docker API. */
  dockerHost: string;
  /** Environment for the docker, compose and podman CLIs (DOCKER_HOST, DOCKER_CONFIG, CONTAINERS_CONF, PATH). */
  env: Record<string, string>;
  /** Runs a command with the engine's environment; never throws on a non-zero status. */
  exec(cmd: string, args: string[], opts?: { cwd?: string; env?: Record<string, string>; timeoutMs?: number }): Promise<ExecResult>;
  /** The podman CLI, with the same limits and configuration as the service. */
  podman(args: string[], timeoutMs?: number): Promise<ExecResult>;
  /** What the service printed. */
  output(): string;
  stop(): Promise<void>;
}

function hardLimit(resource: 'nofile' | 'nproc'): number {
  const line = fs
    .readFileSync('/proc/self/limits', 'utf8')
    .split('\n')
    .find((l) => l.startsWith(resource === 'nofile' ? 'Max open files' : 'Max processes'));
  const hard = line?.trim().split(/\s{2,}/)[2];
  return hard === undefined || hard === 'unlimited' ? 1048576 : Number(hard);
}

/** Starts `podman system service` on a socket of its own and waits until the Docker API answers. */
export async function startEngine(): Promise<Engine> {
  const missing = engineMissing();
  if (missing.length > 0) throw new Error(missing.join('; '));
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hse-engine-'));
  const nofile = Math.min(hardLimit('nofile'), 1048576);
  const nproc = Math.min(hardLimit('nproc'), PODMAN_NPROC_CAP);
  const conf = path.join(dir, 'containers.conf');
  fs.writeFileSync(conf, `[containers]\ndefault_ulimits = ["nofile=${nofile}:${nofile}", "nproc=${nproc}:${nproc}"]\n\n[engine]\nruntime = "runc"\n`);
  const dockerConfig = path.join(dir, 'docker');
  fs.mkdirSync(path.join(dockerConfig, 'cli-plugins'), { recursive: true });
  fs.symlinkSync(findBinary('docker-compose')!, path.join(dockerConfig, 'cli-plugins/docker-compose'));
  const socket = path.join(dir, 'podman.sock');
  const docker = findBinary('docker')!;
  const env: Record<string, string> = {
    PATH: `${path.dirname(docker)}:${process.env.PATH ?? '/usr/bin:/bin'}:/usr/sbin:/sbin`,
    HOME: process.env.HOME ?? dir,
    DOCKER_HOST: `unix://${socket}`,
    DOCKER_CONFIG: dockerConfig,
    CONTAINERS_CONF: conf,
  };
  const limits = [`--nofile=${nofile}:${nofile}`, `--nproc=${nproc}:${nproc}`];
  const service: ChildProcess = spawn('prlimit', [...limits, 'podman', '--runtime', 'runc', 'system', 'service', '--time=0', `unix://${socket}`], {
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  service.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  service.stderr!.on('data', (d: Buffer) => (out += d.toString()));

  const exec: Engine['exec'] = async (cmd, args, opts = {}) => {
    try {
      const r = await run(cmd, args, {
        cwd: opts.cwd ?? dir,
        env: { ...env, ...opts.env },
        timeout: opts.timeoutMs ?? 180_000,
        maxBuffer: 64 * 1024 * 1024,
      });
      return { stdout: r.stdout, stderr: r.stderr, code: 0 };
    } catch (e) {
      const err = e as { stdout?: string; stderr?: string; code?: number | string; message: string };
      return { stdout: err.stdout ?? '', stderr: err.stderr ?? err.message, code: typeof err.code === 'number' ? err.code : 1 };
    }
  };
  const stop = async () => {
    if (service.exitCode === null && service.signalCode === null) {
      const exited = new Promise((r) => service.once('exit', r));
      service.kill('SIGTERM');
      await Promise.race([exited, sleep(10_000)]);
      if (service.exitCode === null && service.signalCode === null) service.kill('SIGKILL');
    }
    fs.rmSync(dir, { recursive: true, force: true });
  };

  let last = '';
  for (let i = 0; i < 150; i++) {
    if (service.exitCode !== null) break;
    const r = await exec(docker, ['version', '--format', '{{.Server.Version}}'], { timeoutMs: 10_000 });
    if (r.code === 0) {
      return {
        dockerHost: env.DOCKER_HOST,
        env,
        exec,
        podman: (args, ms) => exec('prlimit', [...limits, 'podman', ...args], { timeoutMs: ms }),
        output: () => out,
        stop,
      };
    }
    last = r.stderr;
    await sleep(200);
  }
  await stop();
  throw new Error(`podman system service did not answer the Docker API: ${last}\n${out}`);
}
