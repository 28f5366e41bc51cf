// A TCP echo service on 127.0.0.1 for reachability tests. Userspace tailscaled hands an incoming tailnet connection
// to the same port on the host's loopback, so one listener here stands in for a service on every test node; a
// connection that reaches it gets its bytes back (TsNode.canConnect checks for that).
import net from 'node:net';
import { freePort } from './process.ts';

export interface EchoServer {
  port: number;
  /** Connections accepted so far. */
  readonly accepted: number;
  close(): Promise<void>;
}

export async function startEchoServer(): Promise<EchoServer> {
  const port = await freePort();
  let accepted = 0;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((s) => {
    accepted++;
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    s.on('error', () => {});
    s.pipe(s);
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return {
    port,
    get accepted() {
      return accepted;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
