// kill -9 of every image process in turn under pm2, with a few hundred simulated nodes on their map streams, two
// relay users and two official clients connected: how long until each part is back, and what was lost.
import { crashAndRecover, type CrashOutcome } from '../lib/crash-scenario.ts';
import { startOfficial, type Official } from '../lib/official.ts';
import { scenarioPopulation, startPopulatedImage } from '../lib/populated-image.ts';
import { progress, save, secs, table } from '../lib/report.ts';
import { APPS } from '../lib/supervised-image.ts';

export async function runCrash(opts: { nodes: number; rounds: number }): Promise<string> {
  progress(`starting the image and joining ${opts.nodes} simulated nodes`);
  const populated = await startPopulatedImage(scenarioPopulation(opts.nodes));
  const { image, redis, serverPublic, authKey, fleet, derp } = populated;
  let official: Official | null = null;
  try {
    progress('starting two official clients');
    official = await startOfficial(image.url, authKey, image.admin);
    const results: CrashOutcome[] = [];
    for (let round = 1; round <= opts.rounds; round++) {
      for (const app of APPS) {
        progress(`round ${round}: kill -9 ${app}`);
        const o = await crashAndRecover(
          { image, fleet, derp, official: official?.nodes ?? [], officialNodeKeys: official?.nodeKeys, redis, serverPublic, authKey, timeoutMs: 300_000 },
          app,
        );
        progress(`  ${JSON.stringify(o)}`);
        results.push(o);
      }
    }
    const file = save('crash', { nodes: opts.nodes, rounds: opts.rounds, official: official ? official.nodes.map((n) => n.name) : [], results });
    const officialCell = (r: Record<string, number | null>) => {
      const v = Object.values(r);
      return v.length === 0 ? '—' : v.every((x) => x === null) ? 'not cut' : secs(Math.max(...v.map((x) => x ?? 0)));
    };
    const rows = results.map((o) => [
      o.app,
      secs(o.servingMs),
      `${o.streamsBroken}/${opts.nodes}`,
      o.streamsBroken ? `${secs(o.p50BackMs)} / ${secs(o.allStreamsBackMs)}` : '—',
      o.derpBroken ? secs(o.derpBackMs) : '—',
      officialCell(o.officialBackMs),
      o.app === 'router' || o.app === 'relay' ? officialCell(o.officialDerpBackMs) : '—',
      secs(o.newPeerSeenMs),
      o.lost.length,
    ]);
    return [
      `kill -9 under pm2: ${opts.nodes} simulated nodes, 2 relay users${official ? ', 2 official clients (v1.102.3)' : ' (official client not installed)'}; times in seconds from the kill. Raw: ${file}`,
      '',
      table(
        [
          'killed',
          'process serving again',
          'map streams cut',
          'streams back p50 / all',
          'relay users back',
          'official clients back on map stream',
          'official clients back on relay',
          'new node seen by every node',
          'entries lost',
        ],
        rows,
      ),
    ].join('\n');
  } finally {
    await official?.destroy();
    await populated.destroy();
  }
}
