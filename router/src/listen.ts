// Binding a server the router is attached to, with the exit status the supervisor needs: a failure the operator must
// fix (no permission for the port, an address this host does not have) is a StartupError — one line, exit 2, which pm2
// leaves stopped (shared/service.ts); a port still held by another process is an ordinary error — exit 1, retried.
import fs from 'node:fs';
import type http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { StartupError } from '../../shared/errors.ts';
import type { Logger } from '../../shared/log.ts';

const CONFIG_LISTEN_ERRORS = new Set(['EACCES', 'EADDRNOTAVAIL', 'EINVAL']);

export interface ListenOn {
  port: number;
  address: string;
  /** For the log line only: http or https. */
  scheme: 'http' | 'https';
  /** Share the port with the other router processes (SO_REUSEPORT; HSE_ROUTER_PROCESSES > 1). */
  reusePort?: boolean;
}

/** "[::1]" for IPv6, as in a URL. */
export function urlHost(address: string): string {
  return address.includes(':') ? `[${address}]` : address;
}

/** Listens and logs "listening on <scheme>://<address>:<port>" with `fields`; rejects saying why not (see above). */
export function listen(server: http.Server, on: ListenOn, log: Logger, fields: Record<string, unknown>): Promise<void> {
  const where = `${urlHost(on.address)}:${on.port}`;
  return new Promise((resolve, reject) => {
    server.once('error', (e: NodeJS.ErrnoException) => {
      if (e.code !== undefined && CONFIG_LISTEN_ERRORS.has(e.code)) {
        reject(new StartupError('HSE_LISTEN_ADDRESS', `cannot listen on ${where}: ${e.code}; check the port and HSE_LISTEN_ADDRESS/HSE_PROXY_BIND`));
        return;
      }
      log.error(`cannot listen on ${where}: ${e.code ?? e.message}`, { hint: e.code === 'EADDRINUSE' ? 'another process holds the port' : undefined });
      reject(new Error(`cannot listen on ${where}: ${e.code ?? e.message}`));
    });
    server.listen({ port: on.port, host: on.address, reusePort: on.reusePort === true }, () => {
      log.info(`listening on ${on.scheme}://${where}`, fields);
      resolve();
    });
  });
}

export interface SocketListen {
  path: string;
  mode: number;
  /** Group name or number; null keeps the process's own group. */
  group: string | null;
}

/** A group's number: numeric as given, else looked up in /etc/group. Null when there is no such group. */
export function groupId(group: string, groupFile = '/etc/group'): number | null {
  if (/^\d+$/.test(group)) return Number(group);
  let text = '';
  try {
    text = fs.readFileSync(groupFile, 'utf8');
  } catch {
    return null;
  }
  for (const line of text.split('\n')) {
    const [name, , gid] = line.split(':');
    if (name === group && /^\d+$/.test(gid ?? '')) return Number(gid);
  }
  return null;
}

/** True when something accepts connections on the Unix socket `file`. */
function socketAlive(file: string): Promise<boolean> {
  return new Promise((resolve) => {
    const c = net.connect(file);
    c.once('connect', () => {
      c.destroy();
      resolve(true);
    });
    c.once('error', () => resolve(false));
  });
}

/**
 * Listens on HSE_LISTEN_SOCKET with its group and mode, or rejects saying why: a StartupError (exit 2) for what the
 * operator must fix (no directory, a file that is not a socket, an unknown group, no permission), an ordinary error
 * (exit 1, retried) when another router is still listening there. The socket is created owner-only and only then given
 * its group and mode, so there is no moment in which others could connect.
 */
export async function listenOnSocket(server: http.Server, on: SocketListen, log: Logger, fields: Record<string, unknown>): Promise<void> {
  const refuse = (variable: string, reason: string): never => {
    throw new StartupError(variable, reason);
  };
  const dir = path.dirname(on.path);
  if (!fs.existsSync(dir)) refuse('HSE_LISTEN_SOCKET', `the directory ${dir} does not exist; create it (for example /run/hse, owned by the user hse runs as)`);
  const gid = on.group === null ? null : groupId(on.group);
  if (on.group !== null && gid === null)
    refuse('HSE_LISTEN_SOCKET_GROUP', `there is no group "${on.group}" on this host (see /etc/group); give the proxy's group by name or number`);
  const existing = fs.lstatSync(on.path, { throwIfNoEntry: false });
  if (existing && !existing.isSocket()) refuse('HSE_LISTEN_SOCKET', `${on.path} exists and is not a socket; refusing to replace it`);
  if (existing) {
    if (await socketAlive(on.path)) throw new Error(`cannot listen on ${on.path}: another process is listening there`);
    fs.rmSync(on.path, { force: true }); // left behind by a router that was killed
  }
  await new Promise<void>((resolve, reject) => {
    server.once('error', (e: NodeJS.ErrnoException) => {
      if (e.code === 'EADDRINUSE') reject(new Error(`cannot listen on ${on.path}: EADDRINUSE`));
      else
        reject(
          new StartupError('HSE_LISTEN_SOCKET', `cannot listen on ${on.path}: ${e.code ?? e.message}; check that this user may create files in its directory`),
        );
    });
    const previous = process.umask(0o177);
    try {
      server.listen(on.path, resolve);
    } finally {
      process.umask(previous);
    }
  });
  try {
    if (gid !== null) fs.chownSync(on.path, -1, gid);
    fs.chmodSync(on.path, on.mode);
  } catch (e) {
    refuse(
      'HSE_LISTEN_SOCKET_GROUP',
      `cannot give ${on.path} group ${on.group} and mode ${on.mode.toString(8)} (${(e as NodeJS.ErrnoException).code}); this user must be a member of that group`,
    );
  }
  log.info(`listening on unix:${on.path}`, { ...fields, mode: on.mode.toString(8), group: on.group ?? 'own' });
}
