// Several whole images serving one tailnet, as advanced/ha.md sets them up: one store (a Redis URL, or Sentinel
// settings), the Noise key of the first instance copied into every other's data dir before it starts (one tailnet,
// one control key), each relay with its own key, one relay-mesh key, and every instance listed in HSE_DERP_MESH_WITH.
// The DERP map is left as it is (one node: the public URL): behind a load balancer every instance has the same public
// URL, and the mesh joins whatever relay each client's connection lands on.
//
//   const [a, b] = await startInstances(2, { store: { HSE_REDIS_URL: redis.url } });
//   const [a, b] = await startInstances(2, { store: sentinelEnv, publicUrl: proxyUrl, ports });
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { startImage, type Image, type ImageOptions } from './image.ts';
import { freePort, freeUdpPort } from './process.ts';

/** The file every instance must share (advanced/ha.md, "Keys"): the control protocol's Noise key. */
export const NOISE_KEY_FILE = 'noise_private.key';

export interface InstancesOptions {
  /** How the instances reach the store: { HSE_REDIS_URL } or { HSE_REDIS_SENTINELS, HSE_REDIS_SENTINEL_NAME }. */
  store: Record<string, string>;
  /** The public URL all instances share (a proxy in front); default: each its own router's address. */
  publicUrl?: string;
  /** Router ports, chosen by the caller when a proxy's configuration must name them first. */
  ports?: number[];
  /** Extra environment for every instance (merged after the defaults). */
  env?: Record<string, string>;
  /** Extra environment per instance, by index. */
  envOf?: (i: number) => Record<string, string>;
  services?: ImageOptions['services'];
  /** Relay mesh between the instances (default on when the relay runs). */
  mesh?: boolean;
}

export interface InstancesPlan {
  /** Each instance's router port (known before any starts: a proxy's configuration names them). */
  ports: number[];
  /** Starts instance `i` (after the first: with the first one's Noise key). */
  start(i: number): Promise<Image>;
  /** The instances started so far, by index. */
  started: Image[];
}

/** Chooses ports and shared settings for `count` instances without starting any. */
export async function planInstances(count: number, opts: InstancesOptions): Promise<InstancesPlan> {
  const ports = opts.ports ?? [];
  while (ports.length < count) ports.push(await freePort());
  const stun: number[] = [];
  for (let i = 0; i < count; i++) stun.push(await freeUdpPort());
  const services = opts.services ?? ['coordination', 'relay', 'console'];
  const mesh = (opts.mesh ?? true) && services.includes('relay');
  const meshEnv: Record<string, string> = mesh
    ? { HSE_DERP_MESH_KEY: crypto.randomBytes(32).toString('hex'), HSE_DERP_MESH_WITH: ports.map((p) => `http://127.0.0.1:${p}`).join(',') }
    : {};
  const started: Image[] = [];
  return {
    ports,
    started,
    async start(i) {
      const first = started[0];
      if (i > 0 && !first) throw new Error('start the first instance first: the others copy its Noise key');
      const img = await startImage({
        redis: false,
        services,
        port: ports[i],
        stunPort: stun[i],
        ...(opts.publicUrl ? { publicUrl: opts.publicUrl } : {}),
        dataFiles: i > 0 ? { [NOISE_KEY_FILE]: fs.readFileSync(path.join(first.dataDir, NOISE_KEY_FILE)) } : {},
        env: { ...opts.store, ...meshEnv, ...opts.env, ...opts.envOf?.(i) },
      });
      started[i] = img;
      return img;
    },
  };
}

export async function startInstances(count: number, opts: InstancesOptions): Promise<Image[]> {
  const plan = await planInstances(count, opts);
  try {
    for (let i = 0; i < count; i++) await plan.start(i);
  } catch (e) {
    for (const img of plan.started) await img?.stop();
    throw e;
  }
  return plan.started;
}

/** kill -9 of every process of an image at once (a machine that died), and waits until they are gone. */
export async function killImage(img: Image): Promise<void> {
  const procs = Object.values(img.procs).filter((p) => p !== undefined);
  for (const p of procs) p.proc.kill('SIGKILL');
  await Promise.all(procs.map((p) => p.exited()));
}
