// One simulated Tailscale node: its own machine key and Noise connection, HTTP/2 over it (prior knowledge, as
// tailscale's ts2021 client), register with a pre-auth key, a zstd map stream, logout. Request bodies carry the
// fields tailscaled v1.102.3 sends (control/controlclient direct.go), so a server that needs any of them gets them.
import crypto from 'node:crypto';
import http2 from 'node:http2';
import { CAP_VERSION, dial } from './dial.ts';
import { MapFrameReader, type MapMessage, type MessageSize } from './map-frames.ts';
import { newKeyPair, type KeyPair } from './x25519.ts';

export interface ServerTarget {
  host: string;
  port: number;
  serverKey: Buffer;
  /** Dial this Unix socket instead of host:port (see dial.ts). */
  socketPath?: string;
}

export interface RegisterResult {
  MachineAuthorized?: boolean;
  NodeKeyExpired?: boolean;
  AuthURL?: string;
  Error?: string;
  User?: { ID: number };
}

// Go's HTTP/2 transport (what tailscaled uses) opens 4 MiB per stream and a large connection window; Node's default
// of 64 KiB would make every full map wait on window updates, which measures the client, not the server.
const STREAM_WINDOW = 4 << 20;
const SESSION_WINDOW = 64 << 20;

function hexKey(prefix: string): string {
  return `${prefix}:${crypto.randomBytes(32).toString('hex')}`;
}

const ZERO_NODE_KEY = `nodekey:${'0'.repeat(64)}`;

/** Logout is a register request whose Expiry is in the past; tailscaled sends time.Unix(123, 0). */
const LOGOUT_EXPIRY = '1970-01-01T00:02:03Z';

export class ControlNode {
  readonly machine: KeyPair = newKeyPair();
  readonly nodeKey = hexKey('nodekey');
  readonly discoKey = hexKey('discokey');
  readonly hostname: string;
  /** Stable per node, as tailscaled's is per install; a new one per request would look like a Hostinfo change. */
  private readonly logId = crypto.randomBytes(32).toString('hex');
  private session: http2.ClientHttp2Session | null = null;
  private mapStream: http2.ClientHttp2Stream | null = null;
  /** Subnet routes it advertises (Hostinfo.RoutableIPs, as `tailscale up --advertise-routes` sends them). */
  routes: string[] = [];
  /** Set from this node's first map message. */
  id = 0;
  early: unknown = undefined;

  constructor(hostname: string) {
    this.hostname = hostname;
  }

  private hostinfo(): Record<string, unknown> {
    return {
      IPNVersion: '1.102.3-bench',
      BackendLogID: this.logId,
      OS: 'linux',
      OSVersion: 'Debian 12 (bookworm); kernel=6.1.0',
      Distro: 'debian',
      DistroVersion: '12',
      Hostname: this.hostname,
      GoArch: 'amd64',
      GoVersion: 'go1.26.8',
      NetInfo: { MappingVariesByDestIP: false, WorkingUDP: true, PreferredDERP: 0, DERPLatency: {} },
      // omitempty in tailcfg.Hostinfo: no key at all when the node advertises nothing.
      ...(this.routes.length > 0 ? { RoutableIPs: this.routes } : {}),
    };
  }

  /** Dials /ts2021 and starts HTTP/2 over the Noise stream. */
  async connect(t: ServerTarget): Promise<void> {
    const d = await dial({ host: t.host, port: t.port, socketPath: t.socketPath, serverKey: t.serverKey, machine: this.machine });
    void d.early.then((j) => (this.early = j));
    const session = http2.connect(`http://${t.host}:${t.port}`, {
      createConnection: () => d.transport as never,
      settings: { initialWindowSize: STREAM_WINDOW, enablePush: false },
      maxSessionMemory: 256,
    });
    session.on('error', () => {});
    await new Promise<void>((resolve, reject) => {
      session.once('connect', () => resolve());
      session.once('error', reject);
      session.once('close', () => reject(new Error('the HTTP/2 session closed before it was ready')));
    });
    session.setLocalWindowSize(SESSION_WINDOW);
    this.session = session;
  }

  get connected(): boolean {
    return this.session !== null && !this.session.closed && !this.session.destroyed;
  }

  private async post(path: string, body: unknown): Promise<{ status: number; text: string }> {
    if (!this.session) throw new Error('not connected');
    const s = this.session.request({ ':method': 'POST', ':path': path, 'ts-lb': this.nodeKey });
    s.end(JSON.stringify(body));
    const chunks: Buffer[] = [];
    const [status] = await Promise.all([
      new Promise<number>((resolve, reject) => {
        s.once('response', (h) => resolve(Number(h[':status'])));
        s.once('error', reject);
      }),
      new Promise<void>((resolve, reject) => {
        s.on('data', (c: Buffer) => chunks.push(c));
        s.once('end', resolve);
        s.once('error', reject);
      }),
    ]);
    return { status, text: Buffer.concat(chunks).toString('utf8') };
  }

  private async registerRequest(extra: Record<string, unknown>): Promise<RegisterResult> {
    const r = await this.post('/machine/register', {
      Version: CAP_VERSION,
      NodeKey: this.nodeKey,
      // Go marshals a zero key as the prefix and 64 zeros; headscale refuses an empty string here.
      OldNodeKey: ZERO_NODE_KEY,
      Hostinfo: this.hostinfo(),
      Followup: '',
      Timestamp: new Date().toISOString(),
      Ephemeral: false,
      ...extra,
    });
    if (r.status !== 200) throw new Error(`/machine/register answered ${r.status}: ${r.text.slice(0, 300)}`);
    return JSON.parse(r.text) as RegisterResult;
  }

  /** Registers with a pre-auth key; throws unless the server authorises the node. */
  async register(authKey: string): Promise<void> {
    const res = await this.registerRequest({ Auth: { AuthKey: authKey } });
    if (res.Error || !res.MachineAuthorized) throw new Error(`register of ${this.hostname} not authorised: ${JSON.stringify(res)}`);
  }

  /** `tailscale logout`: an ephemeral node is deleted, others are expired. */
  async logout(): Promise<RegisterResult> {
    return this.registerRequest({ Expiry: LOGOUT_EXPIRY });
  }

  /**
   * Opens the long-poll map stream (Stream:true, Compress:"zstd") and calls `onMessage` for every message as it is
   * decoded, with the time it arrived and its size (framed as on the wire, and as JSON). Resolves when the response
   * headers are in.
   */
  async openMap(onMessage: (m: MapMessage, at: number, size: MessageSize) => void, onEnd: (why: string) => void = () => {}): Promise<void> {
    if (!this.session) throw new Error('not connected');
    const s = this.session.request({ ':method': 'POST', ':path': '/machine/map', 'ts-lb': this.nodeKey });
    this.mapStream = s;
    s.end(
      JSON.stringify({
        Version: CAP_VERSION,
        KeepAlive: true,
        NodeKey: this.nodeKey,
        DiscoKey: this.discoKey,
        Endpoints: ['127.0.0.1:41641'],
        EndpointTypes: [1],
        Stream: true,
        Hostinfo: this.hostinfo(),
        Compress: 'zstd',
      }),
    );
    const reader = new MapFrameReader(true);
    s.on('data', (c: Buffer) => {
      const at = performance.now();
      let msgs: MapMessage[];
      try {
        msgs = reader.push(c);
      } catch (e) {
        s.destroy(e as Error);
        return;
      }
      for (const [k, m] of msgs.entries()) {
        if (m.Node && this.id === 0) this.id = m.Node.ID;
        onMessage(m, at, reader.sizes[k]);
      }
    });
    s.once('close', () => onEnd(`map stream closed (HTTP/2 code ${s.rstCode ?? 0})`));
    s.on('error', () => {});
    const status = await new Promise<number>((resolve, reject) => {
      s.once('response', (h) => resolve(Number(h[':status'])));
      s.once('close', () => reject(new Error(`map stream of ${this.hostname} closed before its response`)));
    });
    if (status !== 200) throw new Error(`/machine/map answered ${status} for ${this.hostname}`);
  }

  closeMap(): void {
    this.mapStream?.close();
    this.mapStream = null;
  }

  close(): void {
    this.session?.destroy();
    this.session = null;
  }
}
