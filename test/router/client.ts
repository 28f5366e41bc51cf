// Client side of router tests: plain HTTP requests (no connection reuse, so each test sees its own connection) and raw
// TCP sockets for what HTTP clients will not send (upgrades of any protocol, slow or malformed heads).
import http from 'node:http';
import net from 'node:net';
import { startImage, type Image, type ImageOptions } from '../harness/image.ts';
import { startStandIn, type StandIn } from './stand-in.ts';

export interface Reply {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

export interface RequestOptions {
  method?: string;
  headers?: http.OutgoingHttpHeaders;
  body?: string | Buffer;
  /** Source address on loopback (127.0.0.2 is a different peer than 127.0.0.1). */
  localAddress?: string;
}

export function request(url: string, opts: RequestOptions = {}): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: opts.method ?? 'GET', headers: opts.headers, agent: false, localAddress: opts.localAddress }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (d: Buffer) => chunks.push(d));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks).toString() }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(opts.body);
  });
}

export function connect(port: number, host = '127.0.0.1'): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, host, () => resolve(s));
    s.once('error', reject);
  });
}

/** Everything a raw socket receives, and a way to wait for a given amount or for its close. */
export class Received {
  private buf = Buffer.alloc(0);
  private waiters: (() => void)[] = [];
  readonly closed: Promise<void>;
  readonly socket: net.Socket;
  constructor(socket: net.Socket) {
    this.socket = socket;
    socket.on('data', (d: Buffer) => {
      this.buf = Buffer.concat([this.buf, d]);
      this.wake();
    });
    socket.on('error', () => {});
    this.closed = new Promise((resolve) =>
      socket.once('close', () => {
        this.wake();
        resolve();
      }),
    );
  }
  private wake(): void {
    for (const w of this.waiters.splice(0)) w();
  }
  get bytes(): Buffer {
    return this.buf;
  }
  get text(): string {
    return this.buf.toString('latin1');
  }
  /** Resolves once `test` holds for what was received; rejects if the socket closes first. */
  async until(test: (b: Buffer) => boolean, what = 'data'): Promise<Buffer> {
    while (!test(this.buf)) {
      if (this.socket.destroyed || this.socket.readableEnded) throw new Error(`socket closed before ${what}; got ${JSON.stringify(this.text.slice(0, 300))}`);
      await new Promise<void>((r) => this.waiters.push(r));
    }
    return this.buf;
  }
  /** Waits for a full response head and returns it with the bytes after it. */
  async head(): Promise<{ head: string; rest: Buffer }> {
    const b = await this.until((x) => x.includes('\r\n\r\n'), 'a response head');
    const end = b.indexOf('\r\n\r\n') + 4;
    return { head: b.subarray(0, end).toString('latin1'), rest: b.subarray(end) };
  }
}

export interface RouterRig {
  image: Image;
  standIns: Record<'coordination' | 'console' | 'relay', StandIn>;
  stop(): Promise<void>;
}

/** The real router process alone, with stand-ins on the three service sockets. */
export async function startRouterRig(opts: ImageOptions = {}): Promise<RouterRig> {
  const image = await startImage({ services: [], ...opts });
  const [coordination, console, relay] = await Promise.all((['coordination', 'console', 'relay'] as const).map((n) => startStandIn(n, image.socket(n))));
  const standIns = { coordination, console, relay };
  return {
    image,
    standIns,
    async stop() {
      // A test may have replaced a stand-in (service restarted): close whatever is there now.
      await Promise.all(Object.values(standIns).map((s) => s.close()));
      await image.stop();
    },
  };
}
