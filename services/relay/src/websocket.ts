// DERP over WebSocket (what browser clients use; Tailscale's derpserver/websocket.go): the client asks for
// subprotocol "derp", and the DERP byte stream then travels in binary messages, message boundaries meaning nothing.
// This file does the opening handshake (RFC 6455 section 4.2) and turns the socket into a plain byte stream, so the
// DERP connection code runs unchanged on top of it.
import crypto from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import { Duplex } from 'node:stream';
import { encodeClosePayload, encodeWsFrame, WsCloseCode, WsFrameParser, WsOpcode, WsProtocolError } from './ws-frames.ts';

const ACCEPT_GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11';
export const DERP_SUBPROTOCOL = 'derp';

/** Sec-WebSocket-Accept for a Sec-WebSocket-Key: base64(sha1(key + GUID)). */
export function acceptValue(key: string): string {
  return crypto.createHash('sha1').update(key + ACCEPT_GUID).digest('base64');
}

/** The protocols listed in Sec-WebSocket-Protocol (all header lines, comma-separated). */
export function offeredSubprotocols(headers: IncomingHttpHeaders): string[] {
  const v = headers['sec-websocket-protocol'];
  const lines = Array.isArray(v) ? v : v === undefined ? [] : [v];
  return lines.flatMap((l) => l.split(',')).map((s) => s.trim().toLowerCase()).filter((s) => s !== '');
}

export type HandshakeCheck = { ok: true; accept: string } | { ok: false; status: number; message: string };

/** Checks a WebSocket upgrade request for DERP; on success gives the Sec-WebSocket-Accept value. */
export function checkHandshake(method: string | undefined, headers: IncomingHttpHeaders): HandshakeCheck {
  if (method !== 'GET') return { ok: false, status: 405, message: 'a WebSocket upgrade must be a GET' };
  if (headers['sec-websocket-version'] !== '13') return { ok: false, status: 426, message: 'only WebSocket version 13 is supported' };
  const key = headers['sec-websocket-key'];
  if (typeof key !== 'string' || !/^[A-Za-z0-9+/]{22}==$/.test(key.trim())) {
    return { ok: false, status: 400, message: 'Sec-WebSocket-Key must be 16 random bytes in base64' };
  }
  if (!offeredSubprotocols(headers).includes(DERP_SUBPROTOCOL)) {
    return { ok: false, status: 400, message: 'the client must offer the "derp" subprotocol' };
  }
  return { ok: true, accept: acceptValue(key.trim()) };
}

/**
 * A byte stream over an upgraded WebSocket. Writes go out as one binary message each; received binary (and
 * continuation) payloads come out in order. Pings are answered, a close is echoed, and any framing violation or a
 * text message closes the socket with the matching close code and destroys this stream with the reason.
 */
export class WebSocketStream extends Duplex {
  private readonly socket: Duplex;
  private readonly parser: WsFrameParser;
  private readonly mask: boolean;
  /** Opcode of the fragmented message in progress, if any. */
  private messageOpcode: number | null = null;
  private closeSent = false;

  /** `role` 'server' for the relay, 'client' for our test client. `head`: bytes that came with the upgrade. */
  constructor(socket: Duplex, role: 'server' | 'client', head: Buffer = Buffer.alloc(0)) {
    super({ allowHalfOpen: false });
    this.socket = socket;
    this.mask = role === 'client';
    this.parser = new WsFrameParser(role === 'server');
    socket.on('data', (chunk: Buffer) => this.onData(chunk));
    socket.on('end', () => this.push(null));
    socket.on('close', () => this.destroy());
    socket.on('error', (e: Error) => this.destroy(e));
    if (head.length > 0) this.onData(head);
  }

  private onData(chunk: Buffer): void {
    if (this.destroyed) return;
    this.parser.push(chunk);
    for (;;) {
      let f;
      try {
        f = this.parser.next();
        if (f === null) return;
        this.handle(f.fin, f.opcode, f.payload);
      } catch (e) {
        if (e instanceof WsProtocolError) return this.fail(e.code, e.message);
        throw e;
      }
      if (this.destroyed) return;
    }
  }

  private handle(fin: boolean, opcode: number, payload: Buffer): void {
    switch (opcode) {
      case WsOpcode.Binary:
      case WsOpcode.Text:
      case WsOpcode.Continuation: {
        const message = opcode === WsOpcode.Continuation ? this.messageOpcode : opcode;
        if (opcode === WsOpcode.Continuation && message === null) throw new WsProtocolError(WsCloseCode.ProtocolError, 'continuation frame without a message to continue');
        if (opcode !== WsOpcode.Continuation && this.messageOpcode !== null) throw new WsProtocolError(WsCloseCode.ProtocolError, 'new message before the previous one finished');
        if (message === WsOpcode.Text) throw new WsProtocolError(WsCloseCode.UnsupportedData, 'DERP over WebSocket uses binary messages, not text');
        this.messageOpcode = fin ? null : message;
        if (payload.length > 0 && !this.push(payload)) this.socket.pause();
        return;
      }
      case WsOpcode.Ping:
        this.socket.write(encodeWsFrame(WsOpcode.Pong, payload, this.mask));
        return;
      case WsOpcode.Pong:
        return;
      case WsOpcode.Close: {
        // Echo the peer's code (section 5.5.1), then finish; a close without a code is answered with a bare one.
        this.sendClose(payload.length >= 2 ? payload.subarray(0, 2) : Buffer.alloc(0));
        this.socket.end();
        this.push(null);
        return;
      }
      default:
        throw new WsProtocolError(WsCloseCode.ProtocolError, `unknown opcode 0x${opcode.toString(16)}`);
    }
  }

  private sendClose(payload: Buffer): void {
    if (this.closeSent || !this.socket.writable) return;
    this.closeSent = true;
    this.socket.write(encodeWsFrame(WsOpcode.Close, payload, this.mask));
  }

  private fail(code: number, message: string): void {
    this.sendClose(encodeClosePayload(code, message));
    this.socket.end();
    this.destroy(new Error(`websocket: ${message}`));
  }

  override _read(): void {
    this.socket.resume();
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    if (this.closeSent) return callback(new Error('websocket is closing'));
    this.socket.write(encodeWsFrame(WsOpcode.Binary, chunk, this.mask), callback);
  }

  override _final(callback: (error?: Error | null) => void): void {
    this.sendClose(encodeClosePayload(WsCloseCode.Normal));
    this.socket.end();
    callback();
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    // An ended socket is left to finish sending its close frame; anything else goes at once.
    if (this.socket.writableEnded) setTimeout(() => this.socket.destroy(), 2_000).unref();
    else this.socket.destroy();
    callback(error);
  }
}
