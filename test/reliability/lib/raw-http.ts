// One HTTP/1.1 exchange over a raw TCP socket, so fuzz tests can send bytes no HTTP client library would (repeated
// headers, odd spacing, Latin-1, control characters) and see exactly what came back.
import net from 'node:net';

export interface RawReply {
  status: number;
  head: string;
  body: Buffer;
  /** The connection ended (or was reset) without any response. */
  noResponse: boolean;
}

/** Sends `bytes` and reads until the server closes; gives up (destroying the socket) after `timeoutMs`. */
export function rawExchange(port: number, bytes: Buffer | string, timeoutMs = 10_000, localAddress?: string): Promise<RawReply> {
  return new Promise((resolve) => {
    const s = net.connect({ port, host: '127.0.0.1', localAddress });
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => s.destroy(), timeoutMs);
    // No half-close after the request: Node (and so the router) takes a client FIN before the answer as the client
    // leaving. Requests here say Connection: close, so the server ends the exchange.
    s.on('connect', () => s.write(typeof bytes === 'string' ? Buffer.from(bytes, 'latin1') : bytes));
    s.on('data', (d: Buffer) => chunks.push(d));
    s.on('error', () => {});
    s.on('close', () => {
      clearTimeout(timer);
      const all = Buffer.concat(chunks);
      const i = all.indexOf('\r\n\r\n');
      const head = (i < 0 ? all : all.subarray(0, i)).toString('latin1');
      const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(head)?.[1] ?? 0);
      resolve({ status, head, body: i < 0 ? Buffer.alloc(0) : all.subarray(i + 4), noResponse: all.length === 0 });
    });
  });
}

/** Decodes a chunked body (the echo services answer with Transfer-Encoding: chunked when they stream). */
export function dechunk(head: string, body: Buffer): Buffer {
  if (!/transfer-encoding:\s*chunked/i.test(head)) return body;
  const out: Buffer[] = [];
  let off = 0;
  for (;;) {
    const eol = body.indexOf('\r\n', off);
    if (eol < 0) break;
    const size = parseInt(body.subarray(off, eol).toString('latin1'), 16);
    if (!size) break;
    out.push(body.subarray(eol + 2, eol + 2 + size));
    off = eol + 2 + size + 2;
  }
  return Buffer.concat(out);
}
