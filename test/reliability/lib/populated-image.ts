// The image under pm2 with clients on it, as the crash and restart checks need it: a user and a reusable pre-auth
// key, a fleet of simulated nodes on their map streams, and two of them also connected to the relay. The ava tests use
// a small fleet; run-faults.ts scenarios a few hundred nodes (plus official clients, which they add themselves).
import type { Redis } from 'ioredis';
import { serverKey } from '../../harness/control-client.ts';
import { Fleet, waitUntil } from './fleet.ts';
import { SimDerp } from './sim-derp.ts';
import { startSupervisedImage, type SupervisedImage } from './supervised-image.ts';

export interface PopulatedImage {
  image: SupervisedImage;
  redis: Redis;
  serverPublic: Buffer;
  authKey: string;
  fleet: Fleet;
  derp: SimDerp[];
  /** Stops the clients, then the image. */
  destroy(): Promise<void>;
}

export interface PopulateOptions {
  actor: string;
  nodes: number;
  joinConcurrency: number;
  joinTimeoutMs?: number;
  keyLifetimeSeconds: number;
  /** Wait until both relay users are admitted (not waited for when absent). */
  relayReadyMs?: number;
}

export async function startPopulatedImage(o: PopulateOptions): Promise<PopulatedImage> {
  const image = await startSupervisedImage();
  let fleet: Fleet | null = null;
  let derp: SimDerp[] = [];
  const destroy = async () => {
    await fleet?.stop();
    await Promise.all(derp.map((d) => d.stop()));
    await image.destroy();
  };
  try {
    const who = { actor: o.actor, ip: '' };
    const redis = image.redis();
    const serverPublic = await serverKey(image.url);
    await image.admin.createUser(who, 'fleet');
    const authKey = (await image.admin.createPreAuthKey(who, { user: 'fleet', reusable: true, expiresInSeconds: o.keyLifetimeSeconds })).key;
    fleet = new Fleet({ port: image.port, serverPublic, count: o.nodes });
    await fleet.join(authKey, o.joinConcurrency, o.joinTimeoutMs);
    derp = fleet.nodes.slice(0, 2).map((n) => new SimDerp(image.port, n.nodePrivate));
    for (const d of derp) d.start();
    if (o.relayReadyMs !== undefined)
      await waitUntil(
        () => derp.every((d) => d.ready),
        () => 'relay users admitted',
        o.relayReadyMs,
      );
    return { image, redis, serverPublic, authKey, fleet, derp, destroy };
  } catch (e) {
    await destroy();
    throw e;
  }
}

/** The run-faults.ts scenarios' setting: hundreds of nodes, generous timeouts. */
export function scenarioPopulation(nodes: number): PopulateOptions {
  return { actor: 'reliability-run', nodes, joinConcurrency: 16, joinTimeoutMs: 300_000, keyLifetimeSeconds: 86_400, relayReadyMs: 30_000 };
}
