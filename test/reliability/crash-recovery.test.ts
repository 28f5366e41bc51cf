// kill -9 of each image process in turn under the real pm2 (ecosystem.config.js, embedded Redis), with simulated
// nodes on their map streams and relay users connected: pm2 restarts the process, every client comes back by itself,
// a node that joins afterwards reaches everyone, and no registered node, user or key is lost. A small fleet here;
// `node test/reliability/run-faults.ts crash` runs the same with a few hundred nodes and two official clients.
import test from 'ava';
import { crashAndRecover } from './lib/crash-scenario.ts';
import { startPopulatedImage, type PopulatedImage } from './lib/populated-image.ts';
import type { AppName } from './lib/supervised-image.ts';

const FLEET = 12;
let p: PopulatedImage;

test.before(async () => {
  p = await startPopulatedImage({ actor: 'reliability-test', nodes: FLEET, joinConcurrency: 6, keyLifetimeSeconds: 3600 });
});

test.after.always(async () => {
  await p?.destroy();
});

const ctx = () => ({
  image: p.image,
  fleet: p.fleet,
  derp: p.derp,
  official: [],
  redis: p.redis,
  serverPublic: p.serverPublic,
  authKey: p.authKey,
  timeoutMs: 60_000,
});

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
    t.is(o.derpBroken, breaks[app].derp ? p.derp.length : 0, 'relay connections that broke');
    t.is((await p.image.app(app)).pm2_env.status, 'online');
  });
}
