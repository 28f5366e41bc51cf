// One crash, measured: kill -9 an image process under pm2 while a fleet of simulated nodes (and optionally relay users
// and official clients) is connected, then time each stage of the recovery and check that nothing registered is gone.
// The ava test runs it with a small fleet; run-faults.ts with a few hundred nodes and two official clients.
import type { Redis } from 'ioredis';
import { setTimeout as sleep } from 'node:timers/promises';
import type { TsNode } from '../../harness/tailscale.ts';
import { type Fleet, percentile, waitUntil } from './fleet.ts';
import type { SimDerp } from './sim-derp.ts';
import { SimNode } from './sim-node.ts';
import { lost, registrations } from './snapshot.ts';
import type { AppName, SupervisedImage } from './supervised-image.ts';

export interface CrashOutcome {
  app: AppName;
  /** From kill -9 to the new process logging "listening". */
  servingMs: number;
  /** Simulated nodes whose map stream broke. */
  streamsBroken: number;
  /** From the kill until the last broken stream was open again (0 when none broke). */
  allStreamsBackMs: number;
  p50BackMs: number;
  /** Relay users whose DERP connection broke, and when the last of them was admitted again. */
  derpBroken: number;
  derpBackMs: number;
  /** Official clients: from the kill until each is seen back on its map stream (coordination log), by name. */
  officialBackMs: Record<string, number | null>;
  /** Official clients: from the kill until the relay logged each one connected again (router and relay kills). */
  officialDerpBackMs: Record<string, number | null>;
  /** From the kill until every node — simulated and official — has a node that registered after the crash, online. */
  newPeerSeenMs: number;
  /** Registered entries (nodes, users, keys) missing or changed afterwards. */
  lost: string[];
}

export interface CrashContext {
  image: SupervisedImage;
  fleet: Fleet;
  derp: SimDerp[];
  official: TsNode[];
  redis: Redis;
  serverPublic: Buffer;
  authKey: string;
  /** Official clients' node keys ("nodekey:<hex>") by name, to find their relay reconnections in the relay log. */
  officialNodeKeys?: Record<string, string>;
  /** Patience for each stage. */
  timeoutMs?: number;
}

/** ISO timestamp at the start of one of our log lines (after pm2's own time prefix, if any). */
function lineTime(line: string): number {
  const m = /(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z) +(INFO|WARN|DEBUG|ERROR)/.exec(line);
  return m ? Date.parse(m[1]) : NaN;
}

/** First "relay client connected … key=<prefix>" the relay logged after `since`, as a time; null if none. */
export function relayConnectedAfter(log: string, nodeKey: string, since: number): number | null {
  const prefix = nodeKey.slice(0, 20);
  for (const line of log.split('\n')) {
    if (!line.includes('relay client connected') || !line.includes(`key=${prefix}`)) continue;
    const t = lineTime(line);
    if (t >= since) return t;
  }
  return null;
}

/** First "node online node=<name>" the coordination service logged after `since`, as a time; null if none. */
export function onlineLoggedAfter(log: string, givenName: string, since: number): number | null {
  for (const line of log.split('\n')) {
    if (!line.includes('node online') || !new RegExp(`node=${givenName}( |$)`).test(line)) continue;
    const t = lineTime(line);
    if (t >= since) return t;
  }
  return null;
}

let probeSeq = 0;

export async function crashAndRecover(ctx: CrashContext, app: AppName): Promise<CrashOutcome> {
  const timeoutMs = ctx.timeoutMs ?? 120_000;
  const before = await registrations(ctx.redis);
  const { killedAt, servingAt } = await ctx.image.crash(app, timeoutMs);

  // Broken streams noticed the kill at once (the kernel closed the sockets); give stragglers a moment anyway.
  await sleep(300);
  await ctx.fleet.waitStreaming(0, timeoutMs);
  const broken = ctx.fleet.nodes.filter((n) => n.streamSince >= killedAt);
  const back = broken.map((n) => n.streamSince - killedAt).sort((a, b) => a - b);

  await waitUntil(
    () => ctx.derp.every((d) => d.ready),
    () =>
      `relay users back (${ctx.derp
        .filter((d) => !d.ready)
        .map((d) => d.lastError)
        .join('; ')})`,
    timeoutMs,
  );
  const derpBroken = ctx.derp.filter((d) => d.readySince >= killedAt);

  // A node that registers after the crash must reach everyone: proves the fan-out (and Redis pub/sub) works again.
  const probe = new SimNode({ port: ctx.image.port, serverPublic: ctx.serverPublic, hostname: `probe-${app}-${++probeSeq}` });
  for (let attempt = 0; ; attempt++) {
    try {
      await probe.register(ctx.authKey);
      break;
    } catch (e) {
      if (attempt > 40) throw e;
      probe.breakConnection();
      await sleep(250);
    }
  }
  probe.start();
  await waitUntil(
    () => probe.streaming,
    () => `probe stream (${probe.lastError})`,
    timeoutMs,
  );
  const probeId = probe.self!.id;
  const probeName = probe.self!.name.split('.')[0];
  await ctx.fleet.waitSeePeer(probeId, true, timeoutMs);
  for (const o of ctx.official) {
    await o.waitFor((s) => o.peers(s).some((p) => p.HostName === probeName && p.Online), `${o.name} to see ${probeName} online`, timeoutMs);
  }
  const newPeerSeenMs = Date.now() - killedAt;
  await probe.stop();

  const officialBackMs: Record<string, number | null> = {};
  if (ctx.official.length > 0) {
    const log = await ctx.image.log('coordination');
    for (const o of ctx.official) {
      const t = onlineLoggedAfter(log, o.name, killedAt);
      officialBackMs[o.name] = t === null ? null : t - killedAt;
    }
  }

  const officialDerpBackMs: Record<string, number | null> = {};
  if (ctx.officialNodeKeys && (app === 'router' || app === 'relay')) {
    // The official client redials its home relay on its own schedule; give it the stage's patience.
    const deadline = Date.now() + timeoutMs;
    for (const [name, key] of Object.entries(ctx.officialNodeKeys)) {
      let t: number | null = null;
      while (t === null && Date.now() < deadline) {
        t = relayConnectedAfter(await ctx.image.log('relay'), key, killedAt);
        if (t === null) await sleep(250);
      }
      officialDerpBackMs[name] = t === null ? null : t - killedAt;
    }
  }

  const after = await registrations(ctx.redis);
  return {
    app,
    servingMs: servingAt - killedAt,
    streamsBroken: broken.length,
    allStreamsBackMs: back.length ? back[back.length - 1] : 0,
    p50BackMs: back.length ? percentile(back, 50) : 0,
    derpBroken: derpBroken.length,
    derpBackMs: derpBroken.length ? Math.max(...derpBroken.map((d) => d.readySince - killedAt)) : 0,
    officialBackMs,
    officialDerpBackMs,
    newPeerSeenMs,
    lost: lost(before, after),
  };
}
