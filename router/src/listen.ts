// Binding a server the router is attached to, with the exit status the supervisor needs: a failure the operator must
// fix (no permission for the port, an address this host does not have) exits 2 so pm2 leaves it stopped
// (ecosystem.config.js, stop_exit_codes); a port still held by another process exits 1 and is retried with backoff.
import type http from 'node:http';
import type { Logger } from '../../shared/log.ts';

const CONFIG_LISTEN_ERRORS = new Set(['EACCES', 'EADDRNOTAVAIL', 'EINVAL']);

export interface ListenOn {
  port: number;
  address: string;
  /** For the log line only: http or https. */
  scheme: 'http' | 'https';
}

/** "[::1]" for IPv6, as in a URL. */
export function urlHost(address: string): string {
  return address.includes(':') ? `[${address}]` : address;
}

/** Listens, logs "listening on <scheme>://<address>:<port>" with `fields`, or logs why not and exits. */
export function listenOrExit(server: http.Server, on: ListenOn, log: Logger, fields: Record<string, unknown>): Promise<void> {
  const where = `${urlHost(on.address)}:${on.port}`;
  return new Promise((resolve) => {
    server.once('error', (e: NodeJS.ErrnoException) => {
      log.error(`cannot listen on ${where}: ${e.code ?? e.message}`, {
        hint: e.code === 'EADDRINUSE' ? 'another process holds the port' : 'check the port and HSE_LISTEN_ADDRESS/HSE_PROXY_BIND',
      });
      process.exit(e.code !== undefined && CONFIG_LISTEN_ERRORS.has(e.code) ? 2 : 1);
    });
    server.listen(on.port, on.address, () => {
      log.info(`listening on ${on.scheme}://${where}`, fields);
      resolve();
    });
  });
}
