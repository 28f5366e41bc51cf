// A simulated Tailscale node for fault tests: the control protocol with our own test client (Noise over the /ts2021
// upgrade through the router, HTTP/2 inside), registered once, then holding a /machine/map stream that it reopens by
// itself whenever the connection breaks — with exponential backoff and jitter, as the official client does — so a
// test can kill a process and measure when every node is back on its stream.
//
// Unlike test/harness/control-client.ts's MapStream it keeps no message history: only the node's own addresses
// and name, the set of peers it was told about, and timestamps. A few hundred of these fit in one test process.
import crypto from 'node:crypto';
import http2 from 'node:http2';
import { decodeMapFrames } from '../../../services/coordination/src/control/map-frame.ts';
import type { MapResponse, RegisterResponse } from '../../../services/coordination/src/tailcfg/tailcfg.ts';
import { generatePair, type X25519Pair } from '../../../services/coordination/src/noise/x25519.ts';
import { newPrivateKey, publicKeyOf } from '../../../services/relay/src/nacl-box.ts';
import { CAP_VERSION, dialControl } from '../../harness/noise-client.ts';

export interface SimNodeOptions {
  port: number;
  serverPublic: Buffer;
  hostname: string;
  /** First reconnect delay; doubles up to maxBackoffMs. Default 250 ms / 8 s. */
  minBackoffMs?: number;
  maxBackoffMs?: number;
}

export interface SelfView {
  id: number;
  name: string;
  addresses: string[];
}

function randomKey(prefix: string): string {
  return `${prefix}:${crypto.randomBytes(32).toString('hex')}`;
}

export class SimNode {
  readonly opts: SimNodeOptions;
  readonly machine: X25519Pair = generatePair();
  /** The node's WireGuard-style key pair; the private half lets the node log in to the relay (DERP) too. */
  readonly nodePrivate: Buffer = newPrivateKey();
  readonly nodeKey = `nodekey:${publicKeyOf(this.nodePrivate).toString('hex')}`;
  readonly discoKey = randomKey('discokey');
  /** From the first message of the latest stream. */
  self: SelfView | null = null;
  /** Peer id -> online as last reported. */
  readonly peers = new Map<number, boolean>();
  /** Whether a map stream is open and has delivered its full map. */
  streaming = false;
  /** Time the current stream delivered its full map (ms since epoch). */
  streamSince = 0;
  /** Number of streams that delivered a full map, over the node's life. */
  streamsOpened = 0;
  /** Keep-alive messages received, and when any message last arrived (ms since epoch). */
  keepAlives = 0;
  lastMessageAt = 0;
  /** Streams the server ended cleanly (closed the stream, or the connection with a FIN) after their full map. */
  cleanEnds = 0;
  /** Connection attempts that failed (dial, HTTP status, stream error), over the node's life. */
  failures = 0;
  /** Last failure, for a test's error message. */
  lastError = '';
  private session: http2.ClientHttp2Session | null = null;
  private running = false;
  private backoff: number;
  private wake: (() => void) | null = null;
  private loop: Promise<void> | null = null;

  constructor(opts: SimNodeOptions) {
    this.opts = opts;
    this.backoff = opts.minBackoffMs ?? 250;
  }

  private async connect(): Promise<http2.ClientHttp2Session> {
    if (this.session && !this.session.closed && !this.session.destroyed) return this.session;
    const r = await dialControl({ port: this.opts.port, serverPublic: this.opts.serverPublic, machine: this.machine });
    if (r.kind !== 'ok') throw new Error(`ts2021 dial: ${r.kind} ${JSON.stringify(r).slice(0, 200)}`);
    const s = http2.connect('http://control', { createConnection: () => r.conn as never });
    s.on('error', () => {});
    s.on('close', () => {
      if (this.session === s) this.session = null;
    });
    this.session = s;
    return s;
  }

  /** One request/response over the node's control connection. */
  async post(path: string, body: unknown, timeoutMs = 30_000): Promise<{ status: number; body: string }> {
    const s = await this.connect();
    const stream = s.request({ ':method': 'POST', ':path': path, 'content-type': 'application/json' });
    stream.setTimeout(timeoutMs, () => stream.close(http2.constants.NGHTTP2_CANCEL));
    stream.end(JSON.stringify(body));
    return new Promise((resolve, reject) => {
      let status = 0;
      const chunks: Buffer[] = [];
      stream.on('response', (h) => (status = Number(h[':status'])));
      stream.on('data', (d: Buffer) => chunks.push(d));
      stream.on('end', () => resolve({ status, body: Buffer.concat(chunks).toString('utf8') }));
      stream.on('error', reject);
      stream.on('close', () => {
        if (status === 0) reject(new Error(`${path}: stream closed without a response (code ${stream.rstCode})`));
      });
    });
  }

  /** Registers with a pre-auth key; throws unless the server authorises the node. */
  async register(authKey: string): Promise<RegisterResponse> {
    const r = await this.post('/machine/register', {
      Version: CAP_VERSION,
      NodeKey: this.nodeKey,
      Hostinfo: { Hostname: this.opts.hostname, OS: 'linux' },
      Auth: { AuthKey: authKey },
    });
    if (r.status !== 200) throw new Error(`register ${this.opts.hostname}: ${r.status} ${r.body.trim()}`);
    const out = JSON.parse(r.body) as RegisterResponse;
    if (!out.MachineAuthorized) throw new Error(`register ${this.opts.hostname}: not authorised: ${r.body}`);
    return out;
  }

  /** Keeps a map stream open until stop(): reopens it after any break. */
  start(): void {
    if (this.running) return;
    this.running = true;
    this.loop = this.run();
  }

  private async run(): Promise<void> {
    while (this.running) {
      try {
        await this.streamOnce();
        this.cleanEnds++;
        // The stream ended (server closed it): reconnect at once, as the client does after a clean end.
        this.backoff = this.opts.minBackoffMs ?? 250;
      } catch (e) {
        this.failures++;
        this.lastError = (e as Error).message;
      }
      this.streaming = false;
      if (!this.running) break;
      // Full jitter: herds of nodes that lost their stream together do not come back in lock step.
      const delay = Math.floor(this.backoff / 2 + Math.random() * (this.backoff / 2));
      this.backoff = Math.min(this.backoff * 2, this.opts.maxBackoffMs ?? 8_000);
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, delay);
        this.wake = () => {
          clearTimeout(t);
          resolve();
        };
      });
      this.wake = null;
    }
  }

  /** Opens one stream and follows it until it ends; rejects on anything but a clean end after a full map. */
  private async streamOnce(): Promise<void> {
    const s = await this.connect();
    const req = s.request({ ':method': 'POST', ':path': '/machine/map', 'content-type': 'application/json' });
    req.end(
      JSON.stringify({
        Version: CAP_VERSION,
        NodeKey: this.nodeKey,
        DiscoKey: this.discoKey,
        Stream: true,
        Compress: 'zstd',
        KeepAlive: true,
        Hostinfo: { Hostname: this.opts.hostname, OS: 'linux' },
      }),
    );
    await new Promise<void>((resolve, reject) => {
      let buf: Buffer = Buffer.alloc(0);
      let status = 0;
      let gotMap = false;
      // Node's HTTP/2 client can deliver the first DATA before the 'response' event: keep bytes until the status is known.
      const consume = () => {
        if (status !== 200) return;
        const { messages, rest } = decodeMapFrames(buf, true);
        buf = rest;
        for (const m of messages) {
          if (!gotMap && m.Node) {
            gotMap = true;
            this.peers.clear();
            this.streaming = true;
            this.streamSince = Date.now();
            this.streamsOpened++;
            this.backoff = this.opts.minBackoffMs ?? 250;
          }
          this.apply(m);
        }
      };
      req.on('response', (h) => {
        status = Number(h[':status']);
        if (status !== 200) req.on('end', () => reject(new Error(`map: ${status} ${buf.toString().trim()}`)));
        consume();
      });
      req.on('data', (d: Buffer) => {
        buf = buf.length ? Buffer.concat([buf, d]) : d;
        consume();
      });
      req.on('error', (e: Error) => reject(e));
      req.on('close', () => {
        this.streaming = false;
        if (gotMap) resolve();
        else reject(new Error(`map stream closed before the full map (status ${status}, code ${req.rstCode})`));
      });
    });
  }

  private apply(m: MapResponse): void {
    this.lastMessageAt = Date.now();
    if (m.KeepAlive) this.keepAlives++;
    if (m.Node) this.self = { id: m.Node.ID, name: m.Node.Name, addresses: [...(m.Node.Addresses ?? [])] };
    if (m.Peers) for (const p of m.Peers) this.peers.set(p.ID, p.Online === true);
    if (m.PeersChanged) for (const p of m.PeersChanged) this.peers.set(p.ID, p.Online === true);
    if (m.PeersRemoved) for (const id of m.PeersRemoved) this.peers.delete(id);
    if (m.PeersChangedPatch)
      for (const p of m.PeersChangedPatch) if (typeof p.Online === 'boolean' && this.peers.has(p.NodeID)) this.peers.set(p.NodeID, p.Online);
  }

  /** Drops the connection as a network failure would; the node reconnects by itself. */
  breakConnection(): void {
    this.session?.destroy();
  }

  async stop(): Promise<void> {
    this.running = false;
    this.wake?.();
    this.session?.destroy();
    this.session = null;
    await this.loop;
  }
}
