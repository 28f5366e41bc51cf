// Floods and abuse against the running image, each measured the same way: the target process's memory and file
// descriptors sampled before, at peak and after; whether it stayed up; and how a well-behaved client fared while the
// attack ran (a legitimate request every 200 ms: answered or not, and how fast). The ava test (floods.test.ts) runs
// each with small numbers; run-faults.ts with the large ones whose figures go into docs/reliability.md.
import crypto from 'node:crypto';
import dgram from 'node:dgram';
import net from 'node:net';
import type { Duplex } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { K } from '../../../shared/redis-keys.ts';
import { DerpClient } from '../../../services/relay/src/derp-client.ts';
import { encodeSendPacket } from '../../../services/relay/src/frames.ts';
import { bindingRequest, parseBindingResponse } from '../../../services/relay/src/stun.ts';
import { Client } from '../../harness/console-client.ts';
import { CAP_VERSION, initiate } from '../../harness/noise-client.ts';
import { pool } from '../../harness/pool.ts';
import { percentile } from './fleet.ts';
import { Sampler, type ProcSample } from './proc-stats.ts';
import { rawExchange } from './raw-http.ts';
import type { SimNode } from './sim-node.ts';

export interface LegitStats {
  ok: number;
  failed: number;
  p50Ms: number;
  maxMs: number;
}

export interface FloodFigure {
  attack: string;
  target: string;
  before: ProcSample;
  peak: ProcSample;
  after: ProcSample;
  stayedUp: boolean;
  legit: LegitStats;
  /** Attack-specific numbers (connections opened, closed, dropped packets, keys...). */
  detail: Record<string, number | string>;
}

/** Runs `legit` every 200 ms until stop(); records success and latency. */
export class LegitProbe {
  private readonly times: number[] = [];
  private failed = 0;
  private running = true;
  private readonly loop: Promise<void>;
  lastError = '';

  constructor(legit: () => Promise<void>) {
    this.loop = (async () => {
      while (this.running) {
        const t0 = performance.now();
        try {
          await legit();
          this.times.push(performance.now() - t0);
        } catch (e) {
          this.failed++;
          this.lastError = (e as Error).message;
        }
        await sleep(200);
      }
    })();
  }

  async stop(): Promise<LegitStats> {
    this.running = false;
    await this.loop;
    const sorted = [...this.times].sort((a, b) => a - b);
    return { ok: sorted.length, failed: this.failed, p50Ms: Math.round(percentile(sorted, 50)), maxMs: Math.round(sorted[sorted.length - 1] ?? NaN) };
  }
}

/** Samples `pid` and runs `legit` while `attack` runs; then lets `settle` finish before the last sample. */
/** Legitimate traffic for a coordination flood: one lite map update (no stream, no peers) by a registered node. */
export function liteMapUpdate(n: SimNode): () => Promise<void> {
  return async () => {
    const r = await n.post('/machine/map', { Version: CAP_VERSION, NodeKey: n.nodeKey, Stream: false, OmitPeers: true });
    if (r.status !== 200) throw new Error(`lite map update answered ${r.status}`);
  };
}

/** Legitimate traffic for a relay flood: a DERP ping by a connected client, answered with its pong. */
export function derpPing(x: DerpClient): () => Promise<void> {
  return async () => {
    const data = Buffer.from(String(Date.now()).padStart(8, '0').slice(-8));
    x.ping(data);
    await x.waitFor('pong', (m) => m.data.equals(data), 5_000);
  };
}

export async function measure(
  attack: string,
  target: string,
  pid: number,
  legit: () => Promise<void>,
  run: () => Promise<Record<string, number | string>>,
  settle: () => Promise<Record<string, number | string>> = async () => ({}),
): Promise<FloodFigure> {
  const sampler = new Sampler(pid);
  const probe = new LegitProbe(legit);
  let detail: Record<string, number | string>;
  let legitStats: LegitStats;
  try {
    detail = await run();
  } finally {
    legitStats = await probe.stop();
  }
  detail = { ...detail, ...(await settle()) };
  const s = sampler.stop();
  return { attack, target, before: s.before, peak: s.peak, after: s.last, stayedUp: s.stayedUp, legit: legitStats, detail };
}

// ---- the attacks ------------------------------------------------------------------------------------------------

function connect(port: number): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1');
    s.once('connect', () => resolve(s));
    s.once('error', reject);
  });
}

function whenClosed(s: net.Socket): Promise<void> {
  return s.destroyed ? Promise.resolve() : new Promise((r) => s.once('close', () => r()));
}

/**
 * `count` connections to the router that never complete a request head: half send nothing, half trickle a header
 * byte every second (slowloris). The router's header timeout must close them all; returns when it has, or after
 * `closeWithinMs`.
 */
export async function slowHeads(port: number, count: number, closeWithinMs: number): Promise<Record<string, number | string>> {
  const sockets: net.Socket[] = [];
  const t0 = Date.now();
  let refused = 0;
  await pool(
    Array.from({ length: count }, (_, i) => i),
    64,
    async (i) => {
      try {
        const s = await connect(port);
        s.on('error', () => {});
        // Read whatever the router says (a 408) so its close is seen.
        s.resume();
        sockets.push(s);
        if (i % 2 === 1) {
          s.write('GET /key HTTP/1.1\r\nHost: x\r\n');
          const timer = setInterval(() => (s.destroyed ? clearInterval(timer) : s.write('X-Slow: y\r\n')), 1_000);
          s.once('close', () => clearInterval(timer));
        }
      } catch {
        refused++;
      }
    },
  );
  const opened = Date.now() - t0;
  const deadline = Date.now() + closeWithinMs;
  await Promise.race([Promise.all(sockets.map(whenClosed)), sleep(closeWithinMs)]);
  const stillOpen = sockets.filter((s) => !s.destroyed).length;
  for (const s of sockets) s.destroy();
  return {
    connections: sockets.length,
    refused,
    openedInMs: opened,
    closedByRouter: sockets.length - stillOpen,
    stillOpenAfterMs: stillOpen,
    waitedMs: closeWithinMs - Math.max(0, deadline - Date.now()),
  };
}

/** `count` requests with a 40 KiB head (over the router's 32 KiB limit); counts the 431 answers. */
export async function oversizedHeads(port: number, count: number): Promise<Record<string, number | string>> {
  const big = `GET /key HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(40 * 1024)}\r\nConnection: close\r\n\r\n`;
  const statuses: Record<string, number> = {};
  await pool(Array.from({ length: count }), 32, async () => {
    const r = await rawExchange(port, big, 10_000);
    statuses[String(r.status)] = (statuses[String(r.status)] ?? 0) + 1;
  });
  return Object.fromEntries(Object.entries(statuses).map(([k, v]) => [`status ${k}`, v]));
}

/**
 * `count` /ts2021 upgrades with a valid Noise initiation that then go silent: the server answers the handshake and
 * waits for the first transport frame, which never comes. All must be closed at the handshake deadline.
 */
export async function silentHandshakes(port: number, serverPublic: Buffer, count: number, closeWithinMs: number): Promise<Record<string, number | string>> {
  // One initiation for all: the server does its half of the handshake for each one regardless.
  const init = initiate({ serverPublic }).initiation.toString('base64');
  const head = `POST /ts2021 HTTP/1.1\r\nHost: control\r\nUpgrade: tailscale-control-protocol\r\nConnection: upgrade\r\nX-Tailscale-Handshake: ${init}\r\nContent-Length: 0\r\n\r\n`;
  const sockets: net.Socket[] = [];
  let switched = 0;
  await pool(Array.from({ length: count }), 64, async () => {
    const s = await connect(port);
    s.on('error', () => {});
    sockets.push(s);
    await new Promise<void>((resolve) => {
      let buf = '';
      const onData = (d: Buffer) => {
        buf += d.toString('latin1');
        if (buf.includes('\r\n\r\n')) {
          if (buf.startsWith('HTTP/1.1 101')) switched++;
          s.off('data', onData);
          s.resume();
          resolve();
        }
      };
      s.on('data', onData);
      s.once('close', () => resolve());
      s.write(head);
    });
  });
  const t0 = Date.now();
  await Promise.race([Promise.all(sockets.map(whenClosed)), sleep(closeWithinMs)]);
  const stillOpen = sockets.filter((s) => !s.destroyed).length;
  const closedAfterMs = Date.now() - t0;
  for (const s of sockets) s.destroy();
  return { upgrades: count, answered101: switched, closedByServer: sockets.length - stillOpen, stillOpen, lastClosedAfterMs: closedAfterMs };
}

/**
 * One DERP client sends packets to a peer as fast as the relay takes them, for `durationMs`. The peer reads only
 * `readEveryMs` (a slow client): its queue must drop the oldest packets instead of growing. Returns packets sent and
 * received and what the relay logged as dropped.
 */
export async function derpBlast(
  port: number,
  sender: SimNode,
  receiver: SimNode,
  durationMs: number,
  readEveryMs: number,
): Promise<Record<string, number | string>> {
  const a = await DerpClient.connect({ host: '127.0.0.1', port, privateKey: sender.nodePrivate });
  const b = await DerpClient.connect({ host: '127.0.0.1', port, privateKey: receiver.nodePrivate });
  await a.waitFor('serverInfo');
  await b.waitFor('serverInfo');
  const bStream = (b as unknown as { stream: Duplex }).stream;
  let received = 0;
  bStream.on('data', () => received++);
  // Slow reader: the socket is paused, and let go for a moment every readEveryMs.
  bStream.pause();
  const reader = setInterval(() => {
    bStream.resume();
    setTimeout(() => bStream.pause(), 5);
  }, readEveryMs);
  const aStream = (a as unknown as { stream: Duplex }).stream;
  const frame = encodeSendPacket(b.publicKey, crypto.randomBytes(1200));
  let sent = 0;
  const until = Date.now() + durationMs;
  while (Date.now() < until && !a.isClosed) {
    // As fast as the relay reads: write until the socket pushes back, then wait for it to drain.
    while (Date.now() < until && !a.isClosed) {
      sent++;
      if (!aStream.write(frame)) break;
    }
    await new Promise<void>((r) => {
      const t = setTimeout(r, 100);
      aStream.once('drain', () => {
        clearTimeout(t);
        r();
      });
    });
  }
  clearInterval(reader);
  const receiverClosed = b.isClosed;
  a.close();
  b.close();
  return { packetsSent: sent, receiverReads: received, receiverClosedByRelay: receiverClosed ? 'yes' : 'no' };
}

/** Blasts `count` STUN datagrams (valid binding requests and junk, alternately) from `sockets` UDP sockets. */
export async function stunFlood(stunPort: number, count: number, sockets = 4): Promise<Record<string, number | string>> {
  const socks = await Promise.all(
    Array.from(
      { length: sockets },
      () =>
        new Promise<dgram.Socket>((resolve) => {
          const s = dgram.createSocket('udp4');
          s.bind(0, '127.0.0.1', () => resolve(s));
        }),
    ),
  );
  let answers = 0;
  for (const s of socks) s.on('message', () => answers++);
  const junk = crypto.randomBytes(120);
  const t0 = Date.now();
  let sent = 0;
  for (let i = 0; i < count; i++) {
    const s = socks[i % socks.length];
    const d = i % 2 === 0 ? bindingRequest(crypto.randomBytes(12)) : junk;
    await new Promise<void>((r) => s.send(d, stunPort, '127.0.0.1', () => r()));
    sent++;
    // Let the answers be read now and then, or our own receive buffers overflow and the count means nothing.
    if (sent % 64 === 0) await new Promise((r) => setImmediate(r));
  }
  const ms = Date.now() - t0;
  await sleep(500);
  for (const s of socks) s.close();
  return { datagrams: sent, perSecond: Math.round((sent / ms) * 1000), validSent: Math.ceil(sent / 2), answersReceived: answers };
}

/** One STUN round trip from a fresh socket: the legitimate client during a STUN flood. */
export async function stunOnce(stunPort: number, timeoutMs = 2_000): Promise<void> {
  const s = dgram.createSocket('udp4');
  await new Promise<void>((r) => s.bind(0, '127.0.0.1', () => r()));
  const tx = crypto.randomBytes(12);
  try {
    await new Promise<void>((resolve, reject) => {
      const t = setTimeout(() => reject(new Error('no STUN answer')), timeoutMs);
      s.on('message', (m) => {
        if (parseBindingResponse(m)?.txId.equals(tx)) {
          clearTimeout(t);
          resolve();
        }
      });
      s.send(bindingRequest(tx), stunPort, '127.0.0.1');
    });
  } finally {
    s.close();
  }
}

/**
 * Failed sign-ins from `addresses` distinct client addresses (the router trusts 127.0.0.1 as a proxy and believes
 * X-Forwarded-For), then a look at the rate limiter's state in Redis: one key per address (per /64 for IPv6), each
 * with an expiry no longer than the window.
 */
export async function signInSpray(base: string, redis: Redis, addresses: string[], concurrency = 4): Promise<Record<string, number | string>> {
  const c = new Client(base);
  const token = await c.loginForm();
  const statuses: Record<string, number> = {};
  await pool(addresses, concurrency, async (ip) => {
    // A name per address: this measures the per-address limit (and argon2id's cost) alone. Against one name, the
    // per-account lock (auth/account-throttle.ts) would refuse most of these after the twentieth failure.
    const r = await c.request('/console/login', {
      form: { username: `sprayed-${ip.replace(/:/g, '.')}`, password: `wrong-${ip}`, csrf: token },
      headers: { 'x-forwarded-for': ip },
    });
    statuses[String(r.status)] = (statuses[String(r.status)] ?? 0) + 1;
  });
  const keys = await redis.keys(`${K.consoleRateLimitPrefix}*`);
  let noExpiry = 0;
  let maxTtlMs = 0;
  for (const k of keys) {
    const ttl = await redis.pttl(k);
    if (ttl < 0) noExpiry++;
    maxTtlMs = Math.max(maxTtlMs, ttl);
  }
  return {
    attempts: addresses.length,
    ...Object.fromEntries(Object.entries(statuses).map(([k, v]) => [`status ${k}`, v])),
    rateLimitKeys: keys.length,
    keysWithoutExpiry: noExpiry,
    longestExpiryS: Math.round(maxTtlMs / 1000),
  };
}

/** `n` distinct public-looking IPv4 addresses, and `m` IPv6 ones inside one /64; `set` picks another batch. */
export function sprayAddresses(n: number, m: number, set = 1): string[] {
  const v4 = Array.from({ length: n }, (_, i) => `198.${50 + set}.${(i >> 8) & 0xff}.${i & 0xff}`);
  const v6 = Array.from({ length: m }, (_, i) => `2001:db8:77:${set.toString(16)}::${(i + 1).toString(16)}`);
  return [...v4, ...v6];
}
