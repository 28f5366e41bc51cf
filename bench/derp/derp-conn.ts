// A lean DERP client for load: as few copies per packet as possible, so that the relay under test, not the client,
// is what runs out of CPU. Speaks the protocol as tailscale's derp client does (derp/derp_client.go); the frame
// types, magic and lengths are the relay's own (services/relay/src/frames.ts), the connection logic is this file's:
//
//   GET /derp HTTP/1.1, Upgrade: DERP, Connection: Upgrade      → 101 Switching Protocols
//   frames: type u8 | length u32 BE | payload
//   <- ServerKey   magic "DERP🔑" (8) | server public key 32
//   -> ClientInfo  client public key 32 | nonce 24 | NaCl box(JSON {"version":2,"CanAckPings":true})
//   <- ServerInfo  nonce 24 | box(JSON)
//   -> SendPacket  destination key 32 | packet        <- RecvPacket  source key 32 | packet
//   <- Ping (8 bytes) answered -> Pong with the same 8 bytes; every other frame (KeepAlive, ...) is read and dropped
import crypto from 'node:crypto';
import net from 'node:net';
import nacl from 'tweetnacl';
import { encodeFrame, FRAME_HEADER_LEN, FrameType, KEY_LEN, MAGIC, NONCE_LEN, PROTOCOL_VERSION } from '../../services/relay/src/frames.ts';

export type DerpTarget = { host: string; port: number } | { socketPath: string };

/** `count` SendPacket frames of `packet` to `dst`, back to back, to be written again and again without rebuilding. */
export function sendBurst(dst: Uint8Array, packet: Uint8Array, count: number): Buffer {
  const one = encodeFrame(FrameType.SendPacket, dst, packet);
  return Buffer.concat(Array.from({ length: count }, () => one));
}

export class DerpConn {
  readonly socket: net.Socket;
  readonly publicKey: Buffer;
  private readonly secretKey: Uint8Array;
  serverKey: Buffer = Buffer.alloc(0);
  /** RecvPacket frames and their packet bytes since the connection opened (callers take differences). */
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
      const keyFrame = c.next(FrameType.ServerKey);
      if (rest.length > 0) c.onData(rest);
      const k = await keyFrame;
      if (!k.subarray(0, MAGIC.length).equals(MAGIC)) throw new Error('the first DERP frame is not a server key');
      c.serverKey = Buffer.from(k.subarray(MAGIC.length, MAGIC.length + KEY_LEN));
      const nonce = crypto.randomBytes(NONCE_LEN);
      const info = Buffer.from(JSON.stringify({ version: PROTOCOL_VERSION, CanAckPings: true }));
      const sealed = nacl.box(info, nonce, c.serverKey, c.secretKey);
      const serverInfo = c.next(FrameType.ServerInfo);
      socket.write(encodeFrame(FrameType.ClientInfo, c.publicKey, nonce, sealed));
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
    while (b.length - off >= FRAME_HEADER_LEN) {
      const type = b[off];
      const len = b.readUInt32BE(off + 1);
      if (b.length - off - FRAME_HEADER_LEN < len) break;
      const start = off + FRAME_HEADER_LEN;
      off = start + len;
      if (type === FrameType.RecvPacket) {
        this.packets++;
        this.packetBytes += len - KEY_LEN;
        if (this.onPacket) this.onPacket(b.subarray(start, start + KEY_LEN), b.subarray(start + KEY_LEN, off));
      } else if (type === FrameType.Ping) {
        this.socket.write(encodeFrame(FrameType.Pong, b.subarray(start, start + 8)));
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
    return this.socket.write(encodeFrame(FrameType.SendPacket, dst, packet));
  }

  close(): void {
    this.socket.destroy();
  }
}
