// One Redis command over the Unix socket, without a client library: enough to ask "is a Redis answering here?" and
// to stop a stray one. Wire: the command as a RESP array ("*<n>\r\n" then "$<len>\r\n<arg>\r\n" per argument); the
// first reply line ("+PONG", "-ERR ...") is all we read.
import net from 'node:net';

/** The first reply line, or null when nothing is listening on `socket` (no file, or nobody accepting). */
export function redisCommand(socket: string, args: string[], timeoutMs = 2_000): Promise<string | null> {
  return new Promise((resolve) => {
    const c = net.connect(socket);
    let reply = '';
    const done = (v: string | null) => {
      c.destroy();
      resolve(v);
    };
    c.setTimeout(timeoutMs, () => done(null));
    c.on('connect', () => c.write(`*${args.length}\r\n${args.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join('')}`));
    c.on('data', (d: Buffer) => {
      reply += d.toString('latin1');
      const end = reply.indexOf('\r\n');
      if (end !== -1) done(reply.slice(0, end));
    });
    // SHUTDOWN answers by closing the connection.
    c.on('close', () => done(reply === '' ? null : reply));
    c.on('error', () => done(null));
  });
}
