// Reaching the control server the way tailscaled does over plain HTTP: GET /key for the server's Noise key, then
// POST /ts2021 with `Upgrade: tailscale-control-protocol` and the handshake initiation in X-Tailscale-Handshake
// (tailscale control/controlhttp). The server answers 101 and the Noise response follows on the raw socket.
import net from 'node:net';
import { initiate, MSG_ERROR, MSG_RESPONSE, RESPONSE_LEN } from './noise-handshake.ts';
import { NoiseTransport } from './noise-transport.ts';
import type { KeyPair } from './x25519.ts';

/** The capability version of the official client the load client imitates (Tailscale v1.102.3). */
export const CAP_VERSION = 142;

export interface ServerKey {
  publicKey: Buffer;
}

/** GET /key?v=<capver>: {"legacyPublicKey":"mkey:…","publicKey":"mkey:<64 hex>"}. */
export async function fetchServerKey(baseUrl: string, capVersion = CAP_VERSION): Promise<Buffer> {
  const r = await fetch(`${baseUrl}/key?v=${capVersion}`);
  if (r.status !== 200) throw new Error(`GET ${baseUrl}/key answered ${r.status}: ${(await r.text()).slice(0, 200)}`);
  const j = (await r.json()) as { publicKey?: string };
  const m = /^mkey:([0-9a-f]{64})$/.exec(j.publicKey ?? '');
  if (!m || /^0+$/.test(m[1])) throw new Error(`GET ${baseUrl}/key gave no usable publicKey: ${JSON.stringify(j)}`);
  return Buffer.from(m[1], 'hex');
}

export interface DialOptions {
  host: string;
  port: number;
  /** A Unix socket to dial instead of host:port (a service's own socket, behind no proxy); Host still names host:port. */
  socketPath?: string;
  serverKey: Buffer;
  machine: KeyPair;
  capVersion?: number;
  timeoutMs?: number;
}

export interface Dialed {
  transport: NoiseTransport;
  /** The server's early payload (tailcfg.EarlyNoise), when it sent one before the first HTTP/2 byte. */
  early: Promise<unknown>;
}

/** Reads from the socket until `enough(buf)` is a number n: resolves with the first n bytes, unshifting the rest. */
function readUntil(socket: net.Socket, enough: (b: Buffer) => number | null): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    let buf = Buffer.alloc(0);
    const cleanup = () => {
      socket.off('data', onData);
      socket.off('error', onError);
      socket.off('close', onClose);
    };
    const onData = (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      const n = enough(buf);
      if (n === null) return;
      cleanup();
      socket.pause();
      if (buf.length > n) socket.unshift(buf.subarray(n));
      resolve(buf.subarray(0, n));
    };
    const onError = (e: Error) => {
      cleanup();
      reject(e);
    };
    const onClose = () => {
      cleanup();
      reject(new Error(`connection closed during the upgrade; got ${JSON.stringify(buf.toString('latin1').slice(0, 300))}`));
    };
    socket.on('data', onData);
    socket.once('error', onError);
    socket.once('close', onClose);
    socket.resume();
  });
}

export async function dial(o: DialOptions): Promise<Dialed> {
  const capVersion = o.capVersion ?? CAP_VERSION;
  const init = initiate(o.machine, o.serverKey, capVersion);
  const socket = o.socketPath ? net.connect({ path: o.socketPath }) : net.connect({ host: o.host, port: o.port, noDelay: true });
  const timer = setTimeout(
    () => socket.destroy(new Error(`ts2021 dial to ${o.host}:${o.port} took longer than ${o.timeoutMs ?? 60_000} ms`)),
    o.timeoutMs ?? 60_000,
  );
  try {
    await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
    socket.pause();
    socket.write(
      'POST /ts2021 HTTP/1.1\r\n' +
        `Host: ${o.host}:${o.port}\r\n` +
        'Upgrade: tailscale-control-protocol\r\n' +
        'Connection: upgrade\r\n' +
        `X-Tailscale-Handshake: ${init.message.toString('base64')}\r\n` +
        'Content-Length: 0\r\n\r\n',
    );
    const head = (
      await readUntil(socket, (b) => {
        const i = b.indexOf('\r\n\r\n');
        return i < 0 ? null : i + 4;
      })
    ).toString('latin1');
    if (!/^HTTP\/1\.1 101 /.test(head)) throw new Error(`ts2021 upgrade refused: ${head.split('\r\n')[0]}`);
    const first = await readUntil(socket, (b) => {
      if (b.length < 3) return null;
      if (b[0] === MSG_ERROR) return b.length >= 3 + b.readUInt16BE(1) ? 3 + b.readUInt16BE(1) : null;
      if (b[0] === MSG_RESPONSE) return b.length >= RESPONSE_LEN ? RESPONSE_LEN : null;
      return b.length;
    });
    if (first[0] === MSG_ERROR) throw new Error(`server refused the Noise handshake: ${first.subarray(3).toString('latin1')}`);
    const keys = init.finish(first);
    let gotEarly: (j: unknown) => void = () => {};
    const early = new Promise<unknown>((resolve) => (gotEarly = resolve));
    const transport = new NoiseTransport(socket, keys, Buffer.alloc(0), (j) => gotEarly(j));
    transport.once('close', () => gotEarly(undefined));
    return { transport, early };
  } catch (e) {
    socket.destroy();
    throw e;
  } finally {
    clearTimeout(timer);
  }
}
