// What a client gets when the service behind a path cannot be reached: a short plain-text answer naming the service,
// so an operator reading a browser tab or `curl -i` knows which process to look at.
//   503 Service Unavailable: the service is not running (no socket file, or nobody accepting on it) - the supervisor
//                            is (re)starting it, so trying again shortly is the right reaction;
//   502 Bad Gateway:         it was reached but the exchange broke (reset, malformed answer).
import type { Duplex } from 'node:stream';
import type { ServiceName } from '../../shared/paths.ts';

export interface Failure {
  status: 502 | 503;
  body: string;
}

const NOT_RUNNING = new Set(['ENOENT', 'ECONNREFUSED', 'EACCES', 'ENOTSOCK']);

export function upstreamFailure(err: NodeJS.ErrnoException, service: ServiceName): Failure {
  if (err.code !== undefined && NOT_RUNNING.has(err.code)) {
    return { status: 503, body: `hse: the ${service} service is unavailable (not running); try again shortly\n` };
  }
  return { status: 502, body: `hse: the ${service} service did not answer properly (${err.code ?? err.message})\n` };
}

/**
 * Writes a whole HTTP/1.1 response on a raw socket and closes it: used where no ServerResponse exists (tunnels).
 * Layout: status line, Content-Type, Content-Length, Connection: close, blank line, body.
 */
export function writeRawResponse(socket: Duplex, status: number, reason: string, body: string): void {
  if (socket.destroyed || !socket.writable) {
    socket.destroy();
    return;
  }
  const bytes = Buffer.from(body);
  socket.end(`HTTP/1.1 ${status} ${reason}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: ${bytes.length}\r\nConnection: close\r\n\r\n${body}`);
}

export const REASONS: Record<number, string> = { 400: 'Bad Request', 502: 'Bad Gateway', 503: 'Service Unavailable' };
