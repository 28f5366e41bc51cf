// The floods of floods.test.ts at full size, against one running image with its production defaults (30 s header
// and handshake deadlines): memory and descriptors of the attacked process, whether it stayed up, and how a
// legitimate client fared meanwhile.
import path from 'node:path';
import { AdminClient } from '../../../shared/admin-client.ts';
import { DerpClient } from '../../../services/relay/src/derp-client.ts';
import { Client } from '../../harness/console-client.ts';
import { serverKey } from '../../harness/control-client.ts';
import { CAP_VERSION } from '../../harness/noise-client.ts';
import { startImage } from '../../harness/image.ts';
import {
  derpBlast,
  derpPing,
  liteMapUpdate,
  measure,
  oversizedHeads,
  signInSpray,
  silentHandshakes,
  slowHeads,
  sprayAddresses,
  stunFlood,
  stunOnce,
  type FloodFigure,
} from '../lib/floods.ts';
import { Sampler } from '../lib/proc-stats.ts';
import { progress, save, table } from '../lib/report.ts';
import { SimNode } from '../lib/sim-node.ts';
import { CONSOLE_PASSWORD } from '../lib/supervised-image.ts';

const who = { actor: 'reliability-run', ip: '' };

export async function runFloods(opts: { rounds: number; heapCapMiB?: number } = { rounds: 2 }): Promise<string> {
  // With a heap cap every process must live within it: growth seen without one is then the runtime taking memory it
  // is allowed to take, not a leak (a leak would end in an out-of-memory crash).
  const nodeOptions: Record<string, string> = opts.heapCapMiB ? { NODE_OPTIONS: `--max-old-space-size=${opts.heapCapMiB}` } : {};
  const image = await startImage({
    env: { HSE_TRUSTED_PROXIES: '127.0.0.1', HSE_CONSOLE_PASSWORD: CONSOLE_PASSWORD, HSE_STUN_LISTEN: '127.0.0.1', ...nodeOptions },
  });
  const nodes: SimNode[] = [];
  const figures: FloodFigure[] = [];
  try {
    const redis = image.redis!.client();
    const admin = new AdminClient(path.join(image.runDir, 'coordination-admin.sock'));
    await admin.createUser(who, 'flood');
    const key = (await admin.createPreAuthKey(who, { user: 'flood', reusable: true, expiresInSeconds: 86_400 })).key;
    const serverPublic = await serverKey(image.url);
    for (let i = 0; i < 4; i++) {
      const n = new SimNode({ port: image.port, serverPublic, hostname: `flood-${i}` });
      await n.register(key);
      nodes.push(n);
    }
    const pid = (name: 'router' | 'coordination' | 'console' | 'relay') => image.procs[name]!.proc.pid!;
    const getKey = async () => {
      const r = await fetch(`${image.url}/key?v=${CAP_VERSION}`);
      if (r.status !== 200) throw new Error(`/key answered ${r.status}`);
      await r.arrayBuffer();
    };
    const run = async (f: Promise<FloodFigure>) => {
      const figure = await f;
      progress(JSON.stringify(figure));
      figures.push(figure);
    };

    // Each attack runs `rounds` times against the same processes: memory that keeps its first-round peak afterwards
    // is the runtime keeping its heap; memory that climbs again every round would be a leak.
    for (let round = 1; round <= opts.rounds; round++) {
      const tag = (s: string) => (opts.rounds > 1 ? `${s} (round ${round})` : s);
      progress('5,000 unfinished heads');
      await run(
        measure(tag('5,000 connections that never finish their head (half silent, half one header line a second)'), 'router', pid('router'), getKey, () =>
          slowHeads(image.port, 5_000, 45_000),
        ),
      );
      progress('2,000 oversized heads');
      await run(measure(tag('2,000 requests with a 40 KiB head'), 'router', pid('router'), getKey, () => oversizedHeads(image.port, 2_000)));
      progress('2,000 silent Noise handshakes');
      const [n0, a, b, c] = nodes;
      const lite = liteMapUpdate(n0);
      await run(
        measure(tag('2,000 /ts2021 upgrades that never send a frame after the handshake'), 'coordination', pid('coordination'), lite, () =>
          silentHandshakes(image.port, serverPublic, 2_000, 45_000),
        ),
      );
      progress('60 s DERP blast');
      const x = await DerpClient.connect({ host: '127.0.0.1', port: image.port, privateKey: c.nodePrivate });
      await x.waitFor('serverInfo');
      const ping = derpPing(x);
      // The packets also cross the router's tunnels: watch its memory too.
      const routerSampler = new Sampler(pid('router'));
      await run(
        measure(
          tag('one DERP client sending 1,200-byte packets as fast as it can for 60 s to a peer that reads 5 ms in every 200 ms'),
          'relay',
          pid('relay'),
          ping,
          () => derpBlast(image.port, a, b, 60_000, 200),
          async () => {
            await new Promise((r) => setTimeout(r, 500));
            const dropped = [...image.procs.relay!.output().matchAll(/relay client disconnected[^\n]*dropped=(\d+)/g)].map((m) => Number(m[1]));
            const r = routerSampler.stop();
            return { droppedForSlowReader: Math.max(0, ...dropped), routerRssMiB: `${r.before.rssMiB} → ${r.peak.rssMiB} → ${r.last.rssMiB}` };
          },
        ),
      );
      x.close();
      progress('500,000 STUN datagrams');
      await run(
        measure(
          tag('500,000 STUN datagrams (half binding requests, half junk) from 4 sockets'),
          'relay',
          pid('relay'),
          () => stunOnce(image.stunPort),
          () => stunFlood(image.stunPort, 500_000),
        ),
      );
      progress('sign-in spray');
      const page = async () => {
        const r = await new Client(image.url).request('/console/login');
        if (r.status !== 200) throw new Error(`sign-in page answered ${r.status}`);
      };
      await run(
        measure(tag('failed sign-ins from 1,000 IPv4 addresses and 100 addresses of one IPv6 /64'), 'console', pid('console'), page, () =>
          signInSpray(image.url, redis, sprayAddresses(1_000, 100, round)),
        ),
      );
    }
    const file = save(opts.heapCapMiB ? 'floods-capped' : 'floods', { heapCapMiB: opts.heapCapMiB ?? null, rounds: opts.rounds, figures });
    const detail = (d: Record<string, number | string>) =>
      Object.entries(d)
        .map(([k, v]) => `${k} ${v}`)
        .join('; ');
    return [
      `Floods against one running image (production defaults: 30 s header and handshake deadlines, DERP queue depth 32${opts.heapCapMiB ? `; every process started with --max-old-space-size=${opts.heapCapMiB}` : ''}), each ${opts.rounds} time(s) in a row. Memory is the attacked process's RSS. Raw: ${file}`,
      '',
      table(
        [
          'attack',
          'process',
          'RSS before → peak → after (MiB)',
          'peak fds',
          'stayed up',
          'legitimate requests meanwhile: ok / failed, p50 / max ms',
          'outcome',
        ],
        figures.map((f) => [
          f.attack,
          f.target,
          `${f.before.rssMiB} → ${f.peak.rssMiB} → ${f.after.rssMiB}`,
          f.peak.fds,
          f.stayedUp ? 'yes' : 'NO',
          `${f.legit.ok} / ${f.legit.failed}, ${f.legit.p50Ms} / ${f.legit.maxMs}`,
          detail(f.detail),
        ]),
      ),
    ].join('\n');
  } finally {
    for (const n of nodes) await n.stop();
    await image.stop();
  }
}
