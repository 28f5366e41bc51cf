// Acknowledged means stored: register a node, and the moment the client has its answer kill -9 Redis, start it
// again from its files and look for the node. With the image's Redis configuration (AOF, appendfsync always) every
// acknowledged registration must be there; the same run without persistence shows the check would catch a loss.
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { AdminClient } from '../../../shared/admin-client.ts';
import { serverKey } from '../../harness/control-client.ts';
import { startImage } from '../../harness/image.ts';
import { ControlledRedis, type Persistence } from '../lib/redis-ctl.ts';
import { progress, save, table } from '../lib/report.ts';
import { SimNode } from '../lib/sim-node.ts';

const who = { actor: 'reliability-run', ip: '' };

async function retry<T>(f: () => Promise<T>): Promise<T> {
  for (let i = 0; ; i++) {
    try {
      return await f();
    } catch (e) {
      if (i > 100) throw e;
      await sleep(100);
    }
  }
}

async function loop(
  persistence: Persistence,
  iterations: number,
): Promise<{ persistence: Persistence; iterations: number; lost: number; appendfsync: string | null; msPerIteration: number }> {
  const redis = new ControlledRedis(persistence);
  await redis.start();
  const image = await startImage({ services: ['coordination'], redis: false, env: { HSE_REDIS_URL: redis.url } });
  try {
    const admin = new AdminClient(path.join(image.runDir, 'coordination-admin.sock'));
    const appendfsync = persistence === 'image' ? await redis.config('appendfsync') : 'none (appendonly no)';
    const serverPublic = await serverKey(image.url);
    let lostCount = 0;
    const t0 = Date.now();
    for (let i = 0; i < iterations; i++) {
      // A fresh store may have lost the user too (the control case): create what is missing each time.
      if (!(await retry(() => admin.listUsers(who))).some((u) => u.name === 'dur')) await retry(() => admin.createUser(who, 'dur'));
      const key = (await retry(() => admin.createPreAuthKey(who, { user: 'dur', expiresInSeconds: 3600 }))).key;
      const n = new SimNode({ port: image.port, serverPublic, hostname: `dur-${i}` });
      await retry(() => n.register(key));
      await redis.kill9();
      await redis.start();
      const nodes = await retry(() => admin.listNodes(who));
      if (!nodes.some((x) => x.nodeKey === n.nodeKey)) lostCount++;
      n.breakConnection();
      if (i % 20 === 19) progress(`${persistence}: ${i + 1}/${iterations}, lost ${lostCount}`);
    }
    return { persistence, iterations, lost: lostCount, appendfsync, msPerIteration: Math.round((Date.now() - t0) / iterations) };
  } finally {
    await image.stop();
    await redis.destroy();
  }
}

export async function runDurability(opts: { iterations: number }): Promise<string> {
  const image = await loop('image', opts.iterations);
  const control = await loop('none', Math.min(20, opts.iterations));
  const file = save('durability', { image, control });
  return [
    `Register, then kill -9 Redis as soon as the client has its answer, start Redis again, look for the node. Raw: ${file}`,
    '',
    table(
      ['Redis persistence', 'registrations acknowledged', 'lost after kill -9', 'time per round'],
      [
        [`image (appendonly yes, appendfsync ${image.appendfsync})`, image.iterations, image.lost, `${image.msPerIteration} ms`],
        [`control: ${control.appendfsync}`, control.iterations, control.lost, `${control.msPerIteration} ms`],
      ],
    ),
  ].join('\n');
}
