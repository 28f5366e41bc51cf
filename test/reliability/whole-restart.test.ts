// Restarting the whole image under pm2 (what `docker restart` does to pm2-runtime): every process gets pm2's stop
// signal, drains and exits 0 (the embedded Redis too); the router's drain ends the map streams and relay tunnels
// cleanly; after the start, every client returns by itself with the same addresses and names, and nothing registered
// is lost. (pm2 stops the router before the services, so relay users are not told "restarting": the tunnel closes
// first. docs/reliability.md, whole-image restart.)
import { setTimeout as sleep } from 'node:timers/promises';
import test from 'ava';
import type { Redis } from 'ioredis';
import { type Fleet, waitUntil } from './lib/fleet.ts';
import type { SimDerp } from './lib/sim-derp.ts';
import { startPopulatedImage, type PopulatedImage } from './lib/populated-image.ts';
import { lost, registrations, type Snapshot } from './lib/snapshot.ts';
import { APPS, type SupervisedImage } from './lib/supervised-image.ts';

const FLEET = 12;
let populated: PopulatedImage;
let image: SupervisedImage;
let fleet: Fleet;
let derp: SimDerp[] = [];
let redis: Redis;
let stoppedAt = 0;
let beforeStop: Snapshot;

test.before(async () => {
  populated = await startPopulatedImage({ actor: 'reliability-test', nodes: FLEET, joinConcurrency: 6, keyLifetimeSeconds: 3600, relayReadyMs: 20_000 });
  ({ image, fleet, derp, redis } = populated);
  beforeStop = await registrations(redis);
});

test.after.always(async () => {
  await populated?.destroy();
});

test.serial('stop: every Node process drains and exits 0; the router ends streams and tunnels cleanly', async (t) => {
  const cleanBefore = fleet.nodes.reduce((a, n) => a + n.cleanEnds, 0);
  stoppedAt = Date.now();
  await image.pm2.cli('stop', 'all');
  for (const name of APPS) t.is((await image.app(name)).pm2_env.status, 'stopped', name);
  for (const name of ['router', 'coordination', 'console', 'relay'] as const) t.is((await image.app(name)).pm2_env.exit_code, 0, `${name} exit status`);

  // pm2 stops the apps in list order, two at a time: Redis and the router first. The router's drain closes every
  // tunnel with a FIN, so the map streams and relay connections end cleanly before the services get their signal.
  await logMatches('router', /router: shutting down signal=SIG(INT|TERM)[^\n]*\n(?:[^\n]*\n)*?[^\n]*router: drained clean=true/);
  await logMatches('coordination', /coordination: shutting down signal=SIG(INT|TERM) streams=\d+/);
  await logMatches('relay', /relay: shutting down signal=SIG(INT|TERM)/);
  await logMatches('console', /console: shutting down signal=SIG(INT|TERM)/);
  await waitUntil(
    () => fleet.nodes.every((n) => !n.streaming) && derp.every((d) => !d.ready),
    () => 'every stream and relay connection to end',
    10_000,
  );
  t.is(fleet.nodes.reduce((a, n) => a + n.cleanEnds, 0) - cleanBefore, FLEET, 'streams that ended cleanly');
  t.log(`relay users told "restarting" before the stop: ${derp.filter((d) => d.restartingFrames > 0).length}/${derp.length}`);
});

/** pm2 writes app output to its log files a little after the fact: poll. */
async function logMatches(name: (typeof APPS)[number], re: RegExp): Promise<void> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const log = await image.log(name);
    if (re.test(log)) return;
    if (Date.now() > deadline) throw new Error(`${name} log does not match ${re}; tail:\n${log.slice(-2000)}`);
    await sleep(100);
  }
}

// pm2 must signal only the launcher (treekill: false in ecosystem.config.js): a second signal straight to
// redis-server makes it answer "You insist... exiting now" and exit 1 instead of shutting down cleanly.
test.serial('stop: the embedded Redis shuts down cleanly (exit 0)', async (t) => {
  t.is((await image.app('redis')).pm2_env.exit_code, 0);
  t.notRegex(await image.log('redis'), /You insist/);
});

test.serial('start: every client returns by itself with the same addresses and names; nothing registered is lost', async (t) => {
  const identities = fleet.identities();
  await image.pm2.cli('start', 'ecosystem.config.js');
  for (const name of APPS) await image.waitListening(name, 2);
  const back = await fleet.waitStreaming(stoppedAt, 60_000);
  await waitUntil(
    () => derp.every((d) => d.ready && d.readySince > stoppedAt),
    () => 'relay users back',
    60_000,
  );
  t.log(`all ${FLEET} streams back ${back - stoppedAt} ms after the stop began`);
  t.deepEqual(fleet.identities(), identities);
  // Read back from the AOF by the restarted Redis.
  t.deepEqual(lost(beforeStop, await registrations(redis)), []);
});
