// Whole-image restart under pm2 (pm2 stop all, then start, as `docker restart` does to pm2-runtime) with a few
// hundred simulated nodes, two relay users and two official clients: clean exits, time until everyone is back,
// and whether every node kept its addresses and name.
import { setTimeout as sleep } from 'node:timers/promises';
import { onlineLoggedAfter } from '../lib/crash-scenario.ts';
import { percentile, waitUntil } from '../lib/fleet.ts';
import { startOfficial, type Official } from '../lib/official.ts';
import { scenarioPopulation, startPopulatedImage } from '../lib/populated-image.ts';
import { progress, save, secs, table } from '../lib/report.ts';
import { lost, registrations } from '../lib/snapshot.ts';
import { APPS } from '../lib/supervised-image.ts';

export async function runRestart(opts: { nodes: number }): Promise<string> {
  progress(`starting the image and joining ${opts.nodes} simulated nodes`);
  const populated = await startPopulatedImage(scenarioPopulation(opts.nodes));
  const { image, redis, authKey, fleet, derp } = populated;
  let official: Official | null = null;
  try {
    official = await startOfficial(image.url, authKey, image.admin);
    const simBefore = fleet.identities();
    const officialBefore = (await official?.identities()) ?? {};
    const before = await registrations(redis);

    progress('pm2 stop all');
    const stoppedAt = Date.now();
    await image.pm2.cli('stop', 'all');
    const stopMs = Date.now() - stoppedAt;
    const exits = Object.fromEntries(await Promise.all(APPS.map(async (a) => [a, (await image.app(a)).pm2_env.exit_code ?? null] as const)));
    const cleanEnds = fleet.nodes.filter((n) => n.cleanEnds > 0).length;
    await sleep(2_000);
    progress('pm2 start ecosystem.config.js');
    const startedAt = Date.now();
    await image.pm2.cli('start', 'ecosystem.config.js');
    for (const a of APPS) await image.waitListening(a, 2, 120_000);
    const servingMs = Date.now() - startedAt;
    await fleet.waitStreaming(startedAt, 300_000);
    const back = fleet.reconnectTimes(startedAt);
    await waitUntil(
      () => derp.every((d) => d.ready && d.readySince > startedAt),
      () => 'relay users back',
      120_000,
    );
    const derpBackMs = Math.max(...derp.map((d) => d.readySince - startedAt));
    let officialBackMs: number | null = null;
    let officialChanged = 0;
    if (official) {
      const names = official.nodes.map((n) => n.name);
      for (const n of official.nodes) {
        await n.waitFor(
          (s) => s.BackendState === 'Running' && names.filter((x) => x !== n.name).every((o) => n.peers(s).some((p) => p.HostName === o && p.Online)),
          `${n.name} back with its peers online`,
          300_000,
        );
      }
      // When each was back on its map stream, as the coordination service logged it.
      const log = await image.log('coordination');
      const times = official.nodes.map((n) => onlineLoggedAfter(log, n.name, startedAt));
      officialBackMs = times.some((x) => x === null) ? null : Math.max(...times.map((x) => x! - startedAt));
      const after = await official.identities();
      officialChanged = Object.keys(officialBefore).filter((k) => officialBefore[k] !== after[k]).length;
    }
    const simAfter = fleet.identities();
    const simChanged = [...simBefore].filter(([k, v]) => simAfter.get(k) !== v).length;
    const lostEntries = lost(before, await registrations(redis));
    const result = {
      nodes: opts.nodes,
      stopMs,
      exits,
      cleanEnds,
      servingMs,
      p50BackMs: percentile(back, 50),
      allBackMs: back[back.length - 1],
      derpBackMs,
      officialBackMs,
      simChanged,
      officialChanged,
      lost: lostEntries,
    };
    const file = save('restart', result);
    return [
      `Whole-image restart under pm2 (stop all, 2 s down, start): ${opts.nodes} simulated nodes, 2 relay users${official ? ', 2 official clients' : ''}. Times in seconds from the start command. Raw: ${file}`,
      '',
      table(
        [
          'stop took',
          'exit statuses',
          'streams ended cleanly',
          'all processes serving',
          'streams back p50 / all',
          'relay users back',
          'official clients back on map stream',
          'nodes with changed address or name',
          'entries lost',
        ],
        [
          [
            secs(stopMs),
            Object.entries(exits)
              .map(([k, v]) => `${k} ${v}`)
              .join(', '),
            `${cleanEnds}/${opts.nodes}`,
            secs(servingMs),
            `${secs(result.p50BackMs)} / ${secs(result.allBackMs)}`,
            secs(derpBackMs),
            secs(officialBackMs),
            `${simChanged + officialChanged}`,
            lostEntries.length,
          ],
        ],
      ),
    ].join('\n');
  } finally {
    await official?.destroy();
    await populated.destroy();
  }
}
