// A small tailnet for end-to-end tests of client features: the whole image (image.ts), users created with the
// operator CLI, and official clients (tailscale.ts) joined with each user's pre-auth key, all through the router.
//
//   const net = await startTailnet({ users: { alice: ['laptop', 'phone'], bob: ['desk'] } });
//   await net.setPolicy(text);                          // `hse policy set -`, throws with the refusal
//   const r = await net.hse(['policy', 'set', '-'], text); // { code, stdout, stderr }, never throws
//   await net.node('laptop').cli(['file', 'cp', ...]);
//   await net.stop();
import { setTimeout as sleep } from 'node:timers/promises';
import { type Image, type ImageOptions, startImage } from './image.ts';
import { type CliResult, runHse } from './hse-cli.ts';
import { TsNode, type TsNodeOptions, type TsStatus } from './tailscale.ts';

export interface TailnetOptions {
  /** User name → hostnames of that user's devices, joined in this order. */
  users: Record<string, string[]>;
  /** Devices owned by tags: hostname → the user whose key admits it and the tags the key gives. */
  tagged?: Record<string, { owner: string; tags: string[] }>;
  /** Per device: a TUN device in a namespace, extra tailscaled flags, extra `tailscale up` flags. */
  devices?: Record<string, Pick<TsNodeOptions, 'tun' | 'daemonArgs'> & { upArgs?: string[] }>;
  /** Extra image environment (HSE_TAILDROP=off, …). */
  env?: ImageOptions['env'];
  /** The router's port, when something must be set up for it before the image starts (netns.ts bridges). */
  port?: number;
  /** Policy set before any device joins (none: allow-all). */
  policy?: string;
}

export type { CliResult } from './hse-cli.ts';

export interface Tailnet {
  image: Image;
  nodes: Map<string, TsNode>;
  node(name: string): TsNode;
  /** The operator CLI with `input` on standard input; resolves with its exit code and outputs. */
  hse(args: string[], input?: string): Promise<CliResult>;
  /** Saves a policy with `hse policy set -`; throws with the CLI's output when it is refused. */
  setPolicy(text: string): Promise<void>;
  /** Waits until every device runs and sees each of `expected` (by default every other device) online. */
  settle(expected?: Record<string, string[]>): Promise<void>;
  /** Everything the image and the clients logged, for a failing test. */
  logs(): string;
  stop(): Promise<void>;
}

/** Runs a tailscale command and resolves with its exit code and outputs instead of rejecting on a failure. */
export async function tryCli(node: TsNode, args: string[], timeoutMs = 60_000): Promise<CliResult> {
  return node.cli(args, timeoutMs).then(
    (r) => ({ code: 0, stdout: r.stdout, stderr: r.stderr }),
    (e: { code?: number | string; stdout?: string; stderr?: string; message?: string }) => ({
      code: typeof e.code === 'number' ? e.code : 1,
      stdout: e.stdout ?? '',
      stderr: e.stderr ?? e.message ?? '',
    }),
  );
}

/** Polls `get` until `ok` holds; the error names `what` and the last value. */
export async function until<T>(what: string, get: () => Promise<T>, ok: (v: T) => boolean, ms = 60_000): Promise<T> {
  const deadline = Date.now() + ms;
  let last = await get();
  while (!ok(last)) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; last: ${JSON.stringify(last)?.slice(0, 3000)}`);
    await sleep(300);
    last = await get();
  }
  return last;
}

export async function startTailnet(opts: TailnetOptions): Promise<Tailnet> {
  const image = await startImage({ env: opts.env, port: opts.port });
  const nodes = new Map<string, TsNode>();

  const hse = (args: string[], input?: string): Promise<CliResult> => runHse(image, args, input);

  const setPolicy = async (text: string): Promise<void> => {
    const r = await hse(['policy', 'set', '-'], text);
    if (r.code !== 0) throw new Error(`hse policy set refused the policy (exit ${r.code}):\n${r.stdout}${r.stderr}`);
  };

  // The last part of each process's output: the start of a long log is rarely where a failure is.
  const logs = () =>
    [
      ...Object.entries(image.procs).map(([name, p]) => `----- ${name} -----\n${p.output().slice(-12_000)}`),
      ...image.moreRouters.map((p, i) => `----- router-${i + 2} -----\n${p.output().slice(-12_000)}`),
      ...[...nodes.values()].map((n) => `----- tailscaled ${n.name} -----\n${n.output().slice(-8_000)}`),
    ].join('\n');

  const net: Tailnet = {
    image,
    nodes,
    node(name) {
      const n = nodes.get(name);
      if (!n) throw new Error(`no device ${name}`);
      return n;
    },
    hse,
    setPolicy,
    async settle(expected) {
      const all = [...nodes.keys()];
      const want = expected ?? Object.fromEntries(all.map((n) => [n, all.filter((m) => m !== n)]));
      for (const [name, peers] of Object.entries(want)) {
        const n = net.node(name);
        await n.waitFor(
          (s: TsStatus) => s.BackendState === 'Running' && peers.every((p) => n.peers(s).some((x) => x.HostName === p && x.Online)),
          `${name} running with ${peers.join(', ')} online`,
          90_000,
        );
      }
    },
    logs,
    async stop() {
      for (const n of nodes.values()) await n.destroy();
      await image.stop();
    },
  };

  try {
    // User selectors and tag owners must name existing users, so the users come before the policy.
    for (const user of Object.keys(opts.users)) await mustHse(hse, ['users', 'create', user]);
    if (opts.policy !== undefined) await setPolicy(opts.policy);
    const join = async (host: string, key: string) => {
      // An http:// login server means an http DERP node; the client needs this knob for that.
      const { upArgs = [], ...more } = opts.devices?.[host] ?? {};
      const n = new TsNode({ name: host, env: { TS_DEBUG_USE_DERP_HTTP: '1' }, ...more });
      nodes.set(host, n);
      await n.start();
      await n.up(image.url, [`--auth-key=${key}`, ...upArgs]);
    };
    for (const [user, hosts] of Object.entries(opts.users)) {
      const key = JSON.parse(await mustHse(hse, ['keys', 'create', '--user', user, '--reusable', '--json'])).key as string;
      for (const host of hosts) await join(host, key);
    }
    for (const [host, { owner, tags }] of Object.entries(opts.tagged ?? {})) {
      const key = JSON.parse(await mustHse(hse, ['keys', 'create', '--user', owner, '--tags', tags.join(','), '--json'])).key as string;
      await join(host, key);
    }
    await net.settle();
  } catch (e) {
    const out = logs();
    await net.stop();
    throw new Error(`${(e as Error).message}\n${out}`);
  }
  return net;
}

async function mustHse(hse: Tailnet['hse'], args: string[]): Promise<string> {
  const r = await hse(args);
  if (r.code !== 0) throw new Error(`hse ${args.join(' ')} failed (exit ${r.code}):\n${r.stdout}${r.stderr}`);
  return r.stdout;
}
