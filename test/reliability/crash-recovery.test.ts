// kill -9 of each image process in turn under the real pm2 (ecosystem.config.cjs, embedded Redis), with simulated
// nodes on their map streams and relay users connected: pm2 restarts the process, every client comes back by itself,
// a node that joins afterwards reaches everyone, and no registered node, user or key is lost. A small fleet here;
// `node test/reliability/run-faults.ts crash` runs the same with a few hundred nodes and two official clients.
import test from 'ava';
import type { Redis } from 'ioredis';
import { serverKey } from '../coordination/control-client.ts';
import { crashAndRecover } from './lib/crash-scenario.ts';
import { Fleet } from './lib/fleet.ts';
import { SimDerp } from './lib/sim-derp.ts';
import { startSupervisedImage, type AppName, type SupervisedImage } from './lib/supervised-image.ts';

const FLEET = 12;
const who = { actor: 'reliability-test', ip: '' };
let image: SupervisedImage;
let fleet: Fleet;
let derp: SimDerp[] = [];
let redis: Redis;
let serverPublic: Buffer;
let authKey: string;

test.before(async () => {
  image = await startSupervisedImage();
  redis = image.redis();
  serverPublic = await serverKey(image.url);
  await image.admin.createUser(who, 'fleet');
  authKey = (await image.admin.createPreAuthKey(who, { user: 'fleet', reusable: true, expiresInSeconds: 3600 })).key;
  fleet = new Fleet({ port: image.port, serverPublic, count: FLEET });
  await fleet.join(authKey, 6);
  derp = fleet.nodes.slice(0, 2).map((n) => new SimDerp(image.port, n.nodePrivate));
  for (const d of derp) d.start();
});

test.after.always(async () => {
  await fleet?.stop();
  await Promise.all(derp.map((d) => d.stop()));
  await image?.destroy();
});

const ctx = () => ({ image, fleet, derp, official: [], redis, serverPublic, authKey, timeoutMs: 60_000 });

// Which clients lose their connection when each process dies: map streams go through the router to coordination;
// relay users go through the router to the relay; Redis and the console carry no client connection.
const breaks: Record<AppName, { streams: boolean; derp: boolean }> = {
  router: { streams: true, derp: true },
  coordination: { streams: true, derp: false },
  console: { streams: false, derp: false },
  relay: { streams: false, derp: true },
  redis: { streams: false, derp: false },
};

for (const app of ['router', 'coordination', 'console', 'relay', 'redis'] as AppName[]) {
  test.serial(`kill -9 ${app}: pm2 restarts it, clients come back by themselves, nothing registered is lost`, async (t) => {
    const o = await crashAndRecover(ctx(), app);
    t.log(JSON.stringify(o));
    t.deepEqual(o.lost, [], 'registered entries lost');
    t.is(o.streamsBroken, breaks[app].streams ? FLEET : 0, 'map streams that broke');
    t.is(o.derpBroken, breaks[app].derp ? derp.length : 0, 'relay connections that broke');
    t.is((await image.app(app)).pm2_env.status, 'online');
  });
}
