// Test-only control client: /key, the ts2021 upgrade through the router (test/harness/noise-client.ts), then
// HTTP/2 over the Noise stream, register and map requests, and a reader of the zstd-framed map stream. It lets the
// tests drive cases the official client only reaches by accident (races, refusals, hostile bodies).
import crypto from 'node:crypto';
import http2 from 'node:http2';
import { decodeMapFrames } from '../../services/coordination/src/control/map-frame.ts';
import type { MapResponse, RegisterResponse } from '../../services/coordination/src/tailcfg/tailcfg.ts';
import { generatePair, type X25519Pair } from '../../services/coordination/src/noise/x25519.ts';
import { CAP_VERSION, dialControl } from '../harness/noise-client.ts';

export function randomKey(prefix: 'nodekey' | 'discokey'): string {
  return `${prefix}:${crypto.randomBytes(32).toString('hex')}`;
}

export async function serverKey(base: string): Promise<Buffer> {
  const r = await fetch(`${base}/key?v=${CAP_VERSION}`);
  const j = (await r.json()) as { publicKey: string };
  return Buffer.from(j.publicKey.slice('mkey:'.length), 'hex');
}

export class ControlClient {
  readonly machine: X25519Pair;
  nodeKey: string;
  readonly discoKey = randomKey('discokey');
  private session!: http2.ClientHttp2Session;

  private constructor(machine: X25519Pair) {
    this.machine = machine;
    this.nodeKey = randomKey('nodekey');
  }

  static async connect(port: number, serverPublic: Buffer, machine: X25519Pair = generatePair()): Promise<ControlClient> {
    const c = new ControlClient(machine);
    const r = await dialControl({ port, serverPublic, machine });
    if (r.kind !== 'ok') throw new Error(`ts2021 dial failed: ${JSON.stringify(r)}`);
    c.session = http2.connect('http://control', { createConnection: () => r.conn as never });
    c.session.on('error', () => {});
    return c;
  }

  async post(path: string, body: unknown): Promise<{ status: number; body: Buffer }> {
    const stream = this.session.request({ ':method': 'POST', ':path': path, 'content-type': 'application/json' });
    stream.end(JSON.stringify(body));
    const [headers, chunks] = await Promise.all([
      new Promise<http2.IncomingHttpHeaders>((resolve) => stream.once('response', resolve)),
      (async () => {
        const out: Buffer[] = [];
        for await (const c of stream) out.push(c as Buffer);
        return out;
      })(),
    ]);
    return { status: Number(headers[':status']), body: Buffer.concat(chunks) };
  }

  async register(extra: Record<string, unknown> = {}): Promise<RegisterResponse> {
    const r = await this.post('/machine/register', { Version: CAP_VERSION, NodeKey: this.nodeKey, Hostinfo: { Hostname: 'tc', OS: 'linux' }, ...extra });
    if (r.status !== 200) throw new Error(`register: ${r.status} ${r.body.toString()}`);
    return JSON.parse(r.body.toString()) as RegisterResponse;
  }

  /** Opens a map stream and collects its messages. */
  stream(extra: Record<string, unknown> = {}): MapStream {
    const s = this.session.request({ ':method': 'POST', ':path': '/machine/map', 'content-type': 'application/json' });
    s.end(JSON.stringify({ Version: CAP_VERSION, NodeKey: this.nodeKey, DiscoKey: this.discoKey, Stream: true, Compress: 'zstd', KeepAlive: true, ...extra }));
    return new MapStream(s);
  }

  close(): void {
    this.session.destroy();
  }
}

export class MapStream {
  readonly messages: MapResponse[] = [];
  /** When each message arrived (ms since epoch), by index in `messages`: how long a change took to reach the stream. */
  readonly arrivedAt: number[] = [];
  status = 0;
  ended = false;
  private buf: Buffer = Buffer.alloc(0);
  private waiters: (() => void)[] = [];
  readonly stream: http2.ClientHttp2Stream;

  constructor(s: http2.ClientHttp2Stream) {
    this.stream = s;
    s.on('response', (h) => {
      this.status = Number(h[':status']);
      this.wake();
    });
    s.on('data', (d: Buffer) => {
      const { messages, rest } = decodeMapFrames(Buffer.concat([this.buf, d]), true);
      this.buf = rest;
      this.messages.push(...messages);
      const now = Date.now();
      for (const _ of messages) this.arrivedAt.push(now);
      this.wake();
    });
    s.on('close', () => {
      this.ended = true;
      this.wake();
    });
    s.on('error', () => {});
  }

  private wake(): void {
    for (const w of this.waiters.splice(0)) w();
  }

  /** Waits until some message satisfies `pred`, and returns it. */
  async waitFor(pred: (m: MapResponse) => boolean, what: string, timeoutMs = 10_000): Promise<MapResponse> {
    return (await this.waitForArrival(pred, what, timeoutMs)).message;
  }

  /** Like waitFor, looking only at messages from index `from` on (`messages.length` before a change), with its arrival time. */
  async waitForArrival(pred: (m: MapResponse) => boolean, what: string, timeoutMs = 10_000, from = 0): Promise<{ message: MapResponse; at: number }> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const i = this.messages.findIndex((m, j) => j >= from && pred(m));
      if (i >= 0) return { message: this.messages[i], at: this.arrivedAt[i] };
      if (this.ended || Date.now() > deadline) throw new Error(`map stream: no message with ${what}; got ${JSON.stringify(this.messages).slice(0, 1500)}`);
      await new Promise<void>((r) => {
        this.waiters.push(r);
        setTimeout(r, 200);
      });
    }
  }

  close(): void {
    this.stream.close();
  }
}
