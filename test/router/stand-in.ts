// Tiny stand-in services for router tests: real HTTP servers on the services' Unix sockets (in the test process, so a
// test can look at what arrived and steer what is answered). They are not the real services on purpose: the router
// is tested for what it does with bytes, whoever is behind it.
//
// Paths a stand-in understands (anything else: a JSON echo of what arrived):
//   /…/hold        holds the response until the test calls release(), then answers 200 "released"
//   /…/longpoll    keeps the response open; the test pushes chunks with push() and ends it with end()
//   /…/upload      consumes the body, answers { bytes, sha256 } (nothing buffered)
//   /…/download?bytes=N  answers N bytes of a fixed pattern
//   /…/reset       destroys the connection without answering
// Upgrades of any protocol: 101 echoing the Upgrade value, a greeting line, then every byte received echoed back
// (…/refuse: answered 404 instead; …/bye: closed by the service right after the greeting).
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { Socket } from 'node:net';

export interface Seen {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  rawHeaders: string[];
  upgrade: boolean;
}

export interface StandIn {
  name: string;
  socket: string;
  seen: Seen[];
  /** Releases every held /hold request. */
  release(): void;
  /** Resolves once `n` requests are being held or long-polled. */
  waitHeld(n: number): Promise<void>;
  push(chunk: string): void;
  end(): void;
  close(): Promise<void>;
}

export function greeting(name: string): string {
  return `hello from ${name}\n`;
}

export async function startStandIn(name: string, socket: string): Promise<StandIn> {
  const seen: Seen[] = [];
  const held: http.ServerResponse[] = [];
  const polls: http.ServerResponse[] = [];
  let heldWaiters: (() => void)[] = [];
  const heldChanged = () => {
    const ws = heldWaiters;
    heldWaiters = [];
    for (const w of ws) w();
  };
  const sockets = new Set<Socket>();

  const server = http.createServer((req, res) => {
    seen.push({ method: req.method!, url: req.url!, headers: req.headers, rawHeaders: req.rawHeaders, upgrade: false });
    const path = (req.url ?? '/').split('?')[0];
    if (path.endsWith('/hold')) {
      held.push(res);
      heldChanged();
      req.resume();
      return;
    }
    if (path.endsWith('/longpoll')) {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.flushHeaders();
      polls.push(res);
      heldChanged();
      return;
    }
    if (path.endsWith('/upload')) {
      const hash = crypto.createHash('sha256');
      let bytes = 0;
      req.on('data', (d: Buffer) => {
        bytes += d.length;
        hash.update(d);
      });
      req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ bytes, sha256: hash.digest('hex') })));
      return;
    }
    if (path.endsWith('/download')) {
      const total = Number(new URL(req.url!, 'http://x').searchParams.get('bytes') ?? 0);
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(total) });
      const block = pattern(64 * 1024);
      let sent = 0;
      const more = () => {
        while (sent < total) {
          const n = Math.min(block.length, total - sent);
          sent += n;
          if (!res.write(n === block.length ? block : block.subarray(0, n))) return void res.once('drain', more);
        }
        res.end();
      };
      more();
      return;
    }
    if (path.endsWith('/reset')) {
      req.socket.destroy();
      return;
    }
    req.resume();
    req.on('end', () =>
      res
        .writeHead(200, { 'content-type': 'application/json', 'strict-transport-security': 'max-age=60' })
        .end(JSON.stringify({ service: name, method: req.method, url: req.url, headers: req.headers })),
    );
  });
  server.on('upgrade', (req: http.IncomingMessage, sock: Socket, head: Buffer) => {
    seen.push({ method: req.method!, url: req.url!, headers: req.headers, rawHeaders: req.rawHeaders, upgrade: true });
    sock.on('error', () => {});
    if ((req.url ?? '').endsWith('/refuse')) {
      sock.end('HTTP/1.1 404 Not Found\r\nContent-Length: 8\r\nConnection: close\r\n\r\nrefused\n');
      return;
    }
    sock.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: ${req.headers.upgrade}\r\nConnection: Upgrade\r\nX-Stand-In: ${name}\r\n\r\n`);
    sock.write(greeting(name));
    if ((req.url ?? '').endsWith('/bye')) {
      sock.end();
      return;
    }
    if (head.length > 0) sock.write(head);
    sock.pipe(sock);
  });
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  fs.rmSync(socket, { force: true });
  await new Promise<void>((resolve) => server.listen(socket, resolve));

  return {
    name,
    socket,
    seen,
    release() {
      for (const r of held.splice(0)) r.writeHead(200, { 'content-type': 'text/plain' }).end('released\n');
    },
    async waitHeld(n) {
      while (held.length + polls.length < n) await new Promise<void>((r) => heldWaiters.push(r));
    },
    push(chunk) {
      for (const r of polls) r.write(chunk);
    },
    end() {
      for (const r of polls.splice(0)) r.end();
    },
    close() {
      for (const s of sockets) s.destroy();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

/** Deterministic bytes: the pattern both ends of a streaming test can produce without storing it. */
export function pattern(n: number, seed = 0): Buffer {
  const b = Buffer.alloc(n);
  for (let i = 0; i < n; i++) b[i] = (i * 31 + seed * 7 + (i >> 8)) & 0xff;
  return b;
}
