// Relays of one region in the test process, for the mesh's state machine: each a real DerpServer behind the relay's
// own HTTP server on a loopback TCP port, with real mesh links dialling each other over TCP, and our DERP client as
// the nodes. Open admission (the node-key check is covered by derp.test.ts); short retry and liveness clocks so
// breaks and reconnects happen within a test. Also a TCP relay between two of them that can be frozen, to play a
// peer whose machine vanished without closing anything.
import type http from 'node:http';
import net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import type { MeshPeerAddress } from '../../shared/derp-addresses.ts';
import { type Fields, Logger } from '../../shared/log.ts';
import { OpenAdmission } from '../../services/relay/src/admission.ts';
import { DerpClient, type DerpMessage } from '../../services/relay/src/derp-client.ts';
import { DerpServer } from '../../services/relay/src/derp-server.ts';
import { createRelayHttpServer } from '../../services/relay/src/http.ts';
import { MeshLink, type MeshLinkOptions } from '../../services/relay/src/mesh-link.ts';
import { newPrivateKey, publicKeyOf } from '../../services/relay/src/nacl-box.ts';

/** A logger that keeps its lines (tests assert on what an operator would read) and prints nothing. */
export class LogCapture extends Logger {
  readonly lines: string[];
  constructor(name = 'relay', lines: string[] = []) {
    super(name, 'debug');
    this.lines = lines;
  }
  override child(suffix: string): Logger {
    return new LogCapture(`${this.name}/${suffix}`, this.lines);
  }
  private keep(level: string, msg: string, fields?: Fields): void {
    this.lines.push(`${level} ${this.name}: ${msg} ${JSON.stringify(fields ?? {})}`);
  }
  override debug(msg: string, fields?: Fields): void {
    this.keep('DEBUG', msg, fields);
  }
  override info(msg: string, fields?: Fields): void {
    this.keep('INFO', msg, fields);
  }
  override warn(msg: string, fields?: Fields): void {
    this.keep('WARN', msg, fields);
  }
  override error(msg: string, fields?: Fields): void {
    this.keep('ERROR', msg, fields);
  }
  has(re: RegExp): boolean {
    return this.lines.some((l) => re.test(l));
  }
}

export const MESH_KEY = Buffer.alloc(32, 0x5a);

export interface TestMeshRelay {
  name: string;
  port: number;
  url: string;
  derp: DerpServer;
  privateKey: Buffer;
  publicKey: Buffer;
  log: LogCapture;
  links: MeshLink[];
  /** Starts a mesh link from this relay to each of `urls`. */
  meshWith(urls: string[], o?: Partial<MeshLinkOptions>): MeshLink[];
  /** A node (our DERP client) logged in here; waits for ServerInfo. */
  client(privateKey?: Buffer, o?: { meshKey?: Buffer }): Promise<DerpClient>;
  /** Stops the links and destroys every connection at once, as a killed process would. */
  kill(): Promise<void>;
}

export interface MeshRelayOptions {
  name: string;
  meshKey?: Buffer | null;
  /** Listen on this port (to come back where a killed relay was). */
  port?: number;
  privateKey?: Buffer;
}

export async function startMeshRelay(o: MeshRelayOptions): Promise<TestMeshRelay> {
  const log = new LogCapture(o.name);
  const privateKey = o.privateKey ?? newPrivateKey();
  const publicKey = publicKeyOf(privateKey);
  const meshKey = o.meshKey === undefined ? MESH_KEY : o.meshKey;
  const derp = new DerpServer({ privateKey, publicKey, admission: new OpenAdmission(), log: log.child('derp'), queueDepth: 32, meshKey });
  const server: http.Server = createRelayHttpServer({ derp, log: log.child('http') });
  const sockets = new Set<net.Socket>();
  server.on('connection', (s: net.Socket) => {
    sockets.add(s);
    s.once('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(o.port ?? 0, '127.0.0.1', () => resolve());
  });
  const port = (server.address() as net.AddressInfo).port;
  const links: MeshLink[] = [];
  const clients: DerpClient[] = [];
  return {
    name: o.name,
    port,
    url: `http://127.0.0.1:${port}`,
    derp,
    privateKey,
    publicKey,
    log,
    links,
    meshWith(urls, lo = {}) {
      const made = urls.map((url) => {
        const peer: MeshPeerAddress = { entry: url, url: `${url}/derp`, dialHost: null };
        return new MeshLink({
          peer,
          privateKey,
          publicKey,
          meshKey: meshKey ?? MESH_KEY,
          registry: derp.registry,
          log: log.child('mesh'),
          retryMs: 150,
          pingMs: 200,
          deadMs: 1_000,
          ...lo,
        });
      });
      for (const l of made) {
        links.push(l);
        l.start();
      }
      return made;
    },
    async client(pk, co = {}) {
      const c = await DerpClient.connect({
        host: '127.0.0.1',
        port,
        privateKey: pk,
        info: co.meshKey ? { meshKey: co.meshKey.toString('hex') } : undefined,
      });
      clients.push(c);
      await c.waitFor('serverInfo');
      return c;
    },
    async kill() {
      for (const l of links) l.stop();
      for (const c of clients) c.close();
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** Polls `pred` until it holds; fails naming `what`. */
export async function until(what: string, pred: () => boolean, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!pred()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

/** Two relays meshed both ways, each with one node; resolves once each relay knows the other's node. */
export async function meshedPair(): Promise<{ A: TestMeshRelay; B: TestMeshRelay; a: DerpClient; b: DerpClient }> {
  const A = await startMeshRelay({ name: 'A' });
  const B = await startMeshRelay({ name: 'B' });
  A.meshWith([B.url]);
  B.meshWith([A.url]);
  const a = await A.client();
  const b = await B.client();
  await until(
    'A to learn of b and B of a',
    () => A.derp.registry.lookup(b.publicKey.toString('hex')) !== null && B.derp.registry.lookup(a.publicKey.toString('hex')) !== null,
  );
  return { A, B, a, b };
}

/** The next message of `c` that is not a keep-alive or ServerInfo. */
export async function nextReal(c: DerpClient, ms = 5_000): Promise<DerpMessage> {
  const deadline = Date.now() + ms;
  for (;;) {
    const m = await c.recv(Math.max(1, deadline - Date.now()));
    if (m.type !== 'keepAlive' && m.type !== 'serverInfo') return m;
  }
}

/** A TCP relay from a local port to `target` that can be frozen: bytes stop flowing both ways, nothing is closed. */
export async function freezableTcp(targetPort: number): Promise<{ port: number; freeze(): void; close(): void }> {
  const pairs: [net.Socket, net.Socket][] = [];
  let frozen = false;
  const server = net.createServer((inbound) => {
    const outbound = net.connect(targetPort, '127.0.0.1');
    pairs.push([inbound, outbound]);
    inbound.on('data', (d) => frozen || outbound.write(d));
    outbound.on('data', (d) => frozen || inbound.write(d));
    inbound.on('close', () => outbound.destroy());
    outbound.on('close', () => inbound.destroy());
    inbound.on('error', () => {});
    outbound.on('error', () => {});
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return {
    port: (server.address() as net.AddressInfo).port,
    freeze() {
      frozen = true;
    },
    close() {
      for (const [i, o] of pairs) {
        i.destroy();
        o.destroy();
      }
      server.close();
    },
  };
}
