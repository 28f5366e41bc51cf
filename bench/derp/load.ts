// The relay load shared by bench/relay.ts and bench/relay-mesh.ts: closed-loop packet throughput between client pairs
// and echo round trips, with the senders on one relay and the receivers on the same or another (across a mesh).
import crypto from 'node:crypto';
import { pool } from '../../test/harness/pool.ts';
import { cpuSecondsOf } from '../../test/harness/proc.ts';
import { setTimeout as sleep } from 'node:timers/promises';
import { DerpConn, sendBurst, type DerpTarget } from './derp-conn.ts';

export interface LoadOptions {
  pairs: number;
  /** Packet size in bytes. */
  packet: number;
  seconds: number;
  /** Called once every connection is up, before anything is measured (e.g. to wait for a mesh to learn the keys). */
  settle?: (conns: DerpConn[]) => Promise<void>;
  /** The server's processes, whose CPU is read over the loaded window. */
  serverPids?: () => number[];
}

export interface LoadResult {
  pps: number;
  mbps: number;
  sentPps: number;
  rttIdle: number[];
  rttLoad: number[];
  lostProbes: number;
  clientCpu: number;
  /** Cores the server's processes kept busy during the loaded window (NaN without serverPids). */
  serverCpu: number;
}

/** One echo round trip at a time from a to b and back; returns RTTs in ms, stops after `count` or when `stop()` is true. */
export async function rtts(a: DerpConn, b: DerpConn, count: number, stop: () => boolean = () => false): Promise<{ samples: number[]; lost: number }> {
  b.onPacket = (src, data) => void b.send(src, data);
  const samples: number[] = [];
  let lost = 0;
  const payload = Buffer.alloc(64);
  for (let i = 0; i < count && !stop(); i++) {
    payload.writeUInt32BE(i, 0);
    const t0 = performance.now();
    const got = await new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => resolve(false), 2000);
      a.onPacket = (_src, data) => {
        if (data.length === 64 && data.readUInt32BE(0) === i) {
          clearTimeout(timer);
          resolve(true);
        }
      };
      a.send(b.publicKey, payload);
    });
    if (got) samples.push(performance.now() - t0);
    else lost++;
  }
  a.onPacket = null;
  b.onPacket = null;
  return { samples, lost };
}

export async function throughput(from: DerpTarget, to: DerpTarget, o: LoadOptions): Promise<LoadResult> {
  const { pairs, seconds } = o;
  const senderSide = await pool(Array.from({ length: pairs + 1 }), 8, () => DerpConn.connect(from));
  const receiverSide = await pool(Array.from({ length: pairs + 1 }), 8, () => DerpConn.connect(to));
  const [probeA, probeB] = [senderSide.shift()!, receiverSide.shift()!];
  await o.settle?.([probeA, probeB, ...senderSide, ...receiverSide]);
  const idle = await rtts(probeA, probeB, 300);
  const packet = crypto.randomBytes(o.packet);
  let running = true;
  let sentTotal = 0;
  const senders = senderSide;
  const receivers = receiverSide;
  const conns = [...senderSide, ...receiverSide];
  // Closed loop, as a tunnel's own congestion control would make it: each sender keeps at most WINDOW packets in
  // flight to its receiver. Flooding instead would measure the client: its send loop would starve its own receivers.
  // A packet the relay dropped never arrives; when a receiver has made no progress for 50 ms, what is still counted
  // as in flight is written off as lost.
  const WINDOW = 256;
  const BURST = 16;
  senders.forEach((s, i) => {
    const r = receivers[i];
    const burst = sendBurst(r.publicKey, packet, BURST);
    let sent = 0;
    let lost = 0;
    let blocked = false;
    const pump = () => {
      while (running && !blocked && sent - r.packets - lost + BURST <= WINDOW) {
        sent += BURST;
        sentTotal += BURST;
        if (!s.socket.write(burst)) {
          blocked = true;
          s.socket.once('drain', () => {
            blocked = false;
            pump();
          });
        }
      }
    };
    r.onProgress = pump;
    let seen = -1;
    const watchdog = setInterval(() => {
      if (!running) return clearInterval(watchdog);
      if (r.packets === seen) lost = sent - r.packets;
      seen = r.packets;
      pump();
    }, 50);
    pump();
  });
  await sleep(1000);
  const p0 = receivers.reduce((n, r) => n + r.packets, 0);
  const s0 = sentTotal;
  const t0 = performance.now();
  const cpu0 = process.cpuUsage();
  const serverCpu = () => (o.serverPids ? o.serverPids().reduce((n, pid) => n + cpuSecondsOf(pid), 0) : NaN);
  const server0 = serverCpu();
  const loaded = rtts(probeA, probeB, 1e9, () => performance.now() - t0 > seconds * 1000);
  await sleep(seconds * 1000);
  const elapsed = (performance.now() - t0) / 1000;
  const delivered = receivers.reduce((n, r) => n + r.packets, 0) - p0;
  const sent = sentTotal - s0;
  const cpu = process.cpuUsage(cpu0);
  const serverSeconds = serverCpu() - server0;
  running = false;
  const load = await loaded;
  for (const c of [...conns, probeA, probeB]) c.close();
  await sleep(1000);
  return {
    pps: delivered / elapsed,
    mbps: (delivered * o.packet * 8) / elapsed / 1e6,
    sentPps: sent / elapsed,
    rttIdle: idle.samples,
    rttLoad: load.samples,
    lostProbes: load.lost,
    clientCpu: (cpu.user + cpu.system) / 1e6 / elapsed,
    serverCpu: serverSeconds / elapsed,
  };
}
