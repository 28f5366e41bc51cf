// A lean DERP client for load: as few copies per packet as possible, so that the relay under test, not the client,
// is what runs out of CPU. Speaks the protocol as tailscale's derp client does (derp/derp_client.go):
//
//   GET /derp HTTP/1.1, Upgrade: DERP, Connection: Upgrade      → 101 Switching Protocols
//   frames: type u8 | length u32 BE | payload
//   <- ServerKey  0x01  magic "DERP🔑" (8) | server public key 32
//   -> ClientInfo 0x02  client public key 32 | nonce 24 | NaCl box(JSON {"version":2,"CanAckPings":true})
//   <- ServerInfo 0x03  nonce 24 | box(JSON)
//   -> SendPacket 0x04  destination key 32 | packet        <- RecvPacket 0x05  source key 32 | packet
//   <- KeepAlive 0x06; <- Ping 0x12 (8 bytes) answered -> Pong 0x13 with the same 8 bytes
import crypto from 'node:crypto';
import net from 'node:net';
import nacl from 'tweetnacl';

export const FRAME_SERVER_KEY = 0x01;
export const FRAME_CLIENT_INFO = 0x02;
export const FRAME_SERVER_INFO = 0x03;
export const FRAME_SEND_PACKET = 0x04;
export const FRAME_RECV_PACKET = 0x05;
export const FRAME_PING = 0x12;
export const FRAME_PONG = 0x13;
const MAGIC = Buffer.from('DERP🔑', 'utf8');

export type DerpTarget = { host: string; port: number } | { socketPath: string };

export function frame(type: number, payload: Uint8Array): Buffer {
  const b = Buffer.allocUnsafe(5 + payload.length);
  b[0] = type;
  b.writeUInt32BE(payload.length, 1);
  b.set(payload, 5);
  return b;
}

/** `count` SendPacket frames of `packet` to `dst`, back to back, to be written again and again without rebuilding. */
export function sendBurst(dst: Uint8Array, packet: Uint8Array, count: number): Buffer {
  const one = frame(FRAME_SEND_PACKET, Buffer.concat([dst, packet]));
  return Buffer.concat(Array.from({ length: count }, () => one));
}

export class DerpConn {
  readonly socket: net.Socket;
  readonly publicKey: Buffer;
  private readonly secretKey: Uint8Array;
  serverKey: Buffer = Buffer.alloc(0);
  /** RecvPacket frames and their packet bytes since the last reset. */
  packets = 0;
  packetBytes = 0;
  /** Called for each received packet when set (latency probes); plain counting otherwise. */
  onPacket: ((src: Buffer, data: Buffer) => void) | null = null;
  /** Called once per chunk of input that completed at least one packet (senders pace themselves on it). */
  onProgress: (() => void) | null = null;
  private buf: Buffer = Buffer.alloc(0);
  private waiting: { type: number; resolve: (b: Buffer) => void } | null = null;
  readonly closed: Promise<void>;

  private constructor(socket: net.Socket) {
    this.socket = socket;
    const kp = nacl.box.keyPair();
    this.publicKey = Buffer.from(kp.publicKey);
    this.secretKey = kp.secretKey;
    this.closed = new Promise((r) => socket.once('close', () => r()));
    socket.on('error', () => {});
  }

  static async connect(t: DerpTarget, timeoutMs = 30_000): Promise<DerpConn> {
    const socket = 'socketPath' in t ? net.connect(t.socketPath) : net.connect({ host: t.host, port: t.port, noDelay: true });
    const c = new DerpConn(socket);
    const timer = setTimeout(() => socket.destroy(new Error(`DERP connect took over ${timeoutMs} ms`)), timeoutMs);
    try {
      await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
      const host = 'socketPath' in t ? 'localhost' : `${t.host}:${t.port}`;
      socket.write(`GET /derp HTTP/1.1\r\nHost: ${host}\r\nUpgrade: DERP\r\nConnection: Upgrade\r\n\r\n`);
      const rest = await new Promise<Buffer>((resolve, reject) => {
        let acc = Buffer.alloc(0);
        const onData = (d: Buffer) => {
          acc = Buffer.concat([acc, d]);
          const i = acc.indexOf('\r\n\r\n');
          if (i < 0) return;
          socket.off('data', onData);
          const head = acc.subarray(0, i).toString('latin1');
          if (!/^HTTP\/1\.1 101 /.test(head)) reject(new Error(`DERP upgrade refused: ${head.split('\r\n')[0]}`));
          else resolve(acc.subarray(i + 4));
        };
        socket.on('data', onData);
        socket.once('close', () => reject(new Error('closed during the DERP upgrade')));
      });
      socket.on('data', (d: Buffer) => c.onData(d));
      const keyFrame = c.next(FRAME_SERVER_KEY);
      if (rest.length > 0) c.onData(rest);
      const k = await keyFrame;
      if (!k.subarray(0, 8).equals(MAGIC)) throw new Error('the first DERP frame is not a server key');
      c.serverKey = Buffer.from(k.subarray(8, 40));
      const nonce = crypto.randomBytes(24);
      const info = Buffer.from(JSON.stringify({ version: 2, CanAckPings: true }));
      const sealed = nacl.box(info, nonce, c.serverKey, c.secretKey);
      const serverInfo = c.next(FRAME_SERVER_INFO);
      socket.write(frame(FRAME_CLIENT_INFO, Buffer.concat([c.publicKey, nonce, sealed])));
      await serverInfo;
      return c;
    } catch (e) {
      socket.destroy();
      throw e;
    } finally {
      clearTimeout(timer);
    }
  }

  private next(type: number): Promise<Buffer> {
    return new Promise((resolve) => (this.waiting = { type, resolve }));
  }

  private onData(d: Buffer): void {
    const b = this.buf.length === 0 ? d : Buffer.concat([this.buf, d]);
    let off = 0;
    const before = this.packets;
    while (b.length - off >= 5) {
      const type = b[off];
      const len = b.readUInt32BE(off + 1);
      if (b.length - off - 5 < len) break;
      const start = off + 5;
      off = start + len;
      if (type === FRAME_RECV_PACKET) {
        this.packets++;
        this.packetBytes += len - 32;
        if (this.onPacket) this.onPacket(b.subarray(start, start + 32), b.subarray(start + 32, off));
      } else if (type === FRAME_PING) {
        this.socket.write(frame(FRAME_PONG, b.subarray(start, off)));
      } else if (this.waiting && this.waiting.type === type) {
        const w = this.waiting;
        this.waiting = null;
        w.resolve(Buffer.from(b.subarray(start, off)));
      }
    }
    this.buf = off === b.length ? Buffer.alloc(0) : b.subarray(off);
    if (this.packets !== before) this.onProgress?.();
  }

  send(dst: Uint8Array, packet: Uint8Array): boolean {
    return this.socket.write(frame(FRAME_SEND_PACKET, Buffer.concat([dst, packet])));
  }

  close(): void {
    this.socket.destroy();
  }
}
