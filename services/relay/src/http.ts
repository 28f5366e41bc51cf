// The relay's HTTP face on its Unix socket. The router forwards /derp, /derp/* and /generate_204 here and tunnels
// upgrades raw, so this server answers the 101 itself.
//
//   GET /derp  Upgrade: DERP                      -> 101, then DERP on the socket (derpserver/handler.go)
//   GET /derp  Upgrade: websocket + protocol derp -> 101, then DERP inside binary WebSocket messages
//   /derp without an upgrade                      -> 426
//   GET|HEAD /derp/probe, /derp/latency-check     -> 200, empty (clients without UDP measure latency with it)
//   /generate_204                                 -> 204, X-Tailscale-Challenge echoed (captive-portal check)
//   anything else                                 -> 404
//
// The client address comes only from the router's x-hse-client-ip header.
import type http from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { Logger } from '../../../shared/log.ts';
import { CLIENT_IP_HEADER } from '../../../shared/paths.ts';
import { createServiceServer } from '../../../shared/service.ts';
import type { DerpServer } from './derp-server.ts';
import { PROTOCOL_VERSION } from './frames.ts';
import { takeOverRequestSocket } from '../../../shared/http-takeover.ts';
import { checkHandshake, DERP_SUBPROTOCOL, offeredSubprotocols, WebSocketStream } from './websocket.ts';

export interface RelayHttpDeps {
  /** null when HSE_DERP_MODE=public: clients use Tailscale's relays, and /derp says so. */
  derp: DerpServer | null;
  log: Logger;
}

const REASONS: Record<number, string> = {
  400: 'Bad Request',
  404: 'Not Found',
  405: 'Method Not Allowed',
  426: 'Upgrade Required',
  503: 'Service Unavailable',
};
const PUBLIC_MODE_TEXT = "this server uses Tailscale's public DERP relays (HSE_DERP_MODE=public); it runs no relay of its own\n";

function pathOf(url: string | undefined): string {
  const u = url ?? '/';
  const q = u.indexOf('?');
  return q === -1 ? u : u.slice(0, q);
}

/** The router's resolved client address; anything that does not look like an IP is not logged as one. */
export function clientIpOf(req: http.IncomingMessage): string {
  const v = req.headers[CLIENT_IP_HEADER];
  const s = (Array.isArray(v) ? v[0] : (v ?? '')).trim();
  return s.length <= 64 && /^[0-9A-Fa-f:.]+$/.test(s) ? s : '';
}

/** A complete response on a raw socket (the upgrade path has no ServerResponse), then close. */
function rawResponse(socket: Duplex, status: number, text: string, extra: Record<string, string> = {}): void {
  let head = `HTTP/1.1 ${status} ${REASONS[status] ?? ''}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(text)}\r\nConnection: close\r\n`;
  for (const [k, v] of Object.entries(extra)) head += `${k}: ${v}\r\n`;
  socket.end(`${head}\r\n${text}`);
}

function probe(req: http.IncomingMessage, res: http.ServerResponse): void {
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    res.writeHead(405, { allow: 'GET, HEAD', 'content-type': 'text/plain; charset=utf-8' }).end('bogus probe method\n');
    return;
  }
  res.writeHead(200, { 'access-control-allow-origin': '*', 'content-length': '0' }).end();
}

// The challenge is echoed only when it is short and made of the reference's safe characters, so the response
// header can never carry anything a client did not expect (derpserver/handler.go ServeNoContent).
function validChallenge(c: string): boolean {
  return c.length > 0 && c.length <= 64 && /^[A-Za-z0-9._:-]+$/.test(c);
}

function noContent(req: http.IncomingMessage, res: http.ServerResponse): void {
  const headers: Record<string, string> = { 'cache-control': 'no-cache, no-store, must-revalidate, no-transform, max-age=0' };
  const challenge = req.headers['x-tailscale-challenge'];
  if (typeof challenge === 'string' && validChallenge(challenge)) headers['x-tailscale-response'] = `response ${challenge}`;
  res.writeHead(204, headers).end();
}

function derpUpgrade(req: http.IncomingMessage, socket: Socket, head: Buffer, deps: RelayHttpDeps): void {
  socket.on('error', (e: Error) => deps.log.debug('relay client socket error', { error: e.message }));
  const derp = deps.derp;
  if (!derp) return rawResponse(socket, 404, PUBLIC_MODE_TEXT);
  const token = String(req.headers.upgrade ?? '').trim();
  const lower = token.toLowerCase();
  const clientIp = clientIpOf(req);
  socket.setTimeout(0);
  if (lower === 'websocket' && offeredSubprotocols(req.headers).includes(DERP_SUBPROTOCOL)) {
    const check = checkHandshake(req.method, req.headers);
    if (!check.ok) {
      deps.log.info('relay websocket handshake refused', { ip: clientIp || 'unknown', reason: check.message });
      return rawResponse(socket, check.status, `${check.message}\n`);
    }
    // The Upgrade token is echoed as sent: Go's reverse proxy (Traefik, Caddy) refuses a 101 that names another.
    socket.write(
      `HTTP/1.1 101 Switching Protocols\r\nUpgrade: ${token}\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${check.accept}\r\nSec-WebSocket-Protocol: ${DERP_SUBPROTOCOL}\r\n\r\n`,
    );
    derp.accept(new WebSocketStream(socket, head, 'server'), { clientIp, transport: 'websocket' });
    return;
  }
  // "websocket" without the derp subprotocol is how very old clients asked for plain DERP; the reference accepts it.
  if (lower !== 'derp' && lower !== 'websocket') {
    deps.log.info('relay upgrade refused', { ip: clientIp || 'unknown', upgrade: token.slice(0, 40) });
    return rawResponse(socket, 426, 'DERP requires connection upgrade (Upgrade: DERP or a WebSocket with subprotocol derp)\n', { Upgrade: 'DERP' });
  }
  // Derp-Fast-Start: 1 means the client knows our key already and does not want the HTTP response at all.
  if (req.headers['derp-fast-start'] !== '1') {
    socket.write(
      `HTTP/1.1 101 Switching Protocols\r\nUpgrade: ${token}\r\nConnection: Upgrade\r\nDerp-Version: ${PROTOCOL_VERSION}\r\nDerp-Public-Key: ${derp.serverPublic.toString('hex')}\r\n\r\n`,
    );
  }
  if (head.length > 0) socket.unshift(head);
  derp.accept(socket, { clientIp, transport: 'derp' });
}

export function createRelayHttpServer(deps: RelayHttpDeps): http.Server {
  // DERP connections last as long as the client stays: no request or idle timeout; the 32 KiB head limit the router
  // admits (shared/service.ts), so /derp/probe accepts every head /key does.
  const server = createServiceServer(deps.log, (req, res) => {
    const path = pathOf(req.url);
    if (path === '/generate_204') return noContent(req, res);
    if (path === '/derp' || path.startsWith('/derp/')) {
      if (!deps.derp) {
        res.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' }).end(PUBLIC_MODE_TEXT);
        return;
      }
      if (path === '/derp/probe' || path === '/derp/latency-check') return probe(req, res);
      if (path === '/derp' && req.headers.upgrade !== undefined) {
        const socket = takeOverRequestSocket(req);
        if (socket) return derpUpgrade(req, socket, Buffer.alloc(0), deps);
        res.writeHead(400, { 'content-type': 'text/plain; charset=utf-8', connection: 'close' }).end('send "Connection: Upgrade" with "Upgrade: DERP"\n');
        return;
      }
      if (path === '/derp') {
        res.writeHead(426, { upgrade: 'DERP', 'content-type': 'text/plain; charset=utf-8' }).end('DERP requires connection upgrade\n');
        return;
      }
    }
    res.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' }).end('not found\n');
  });
  server.on('upgrade', (req: http.IncomingMessage, socket: Socket, head: Buffer) => {
    if (pathOf(req.url) === '/derp') return derpUpgrade(req, socket, head, deps);
    socket.on('error', () => {});
    rawResponse(socket, 404, 'not found\n');
  });
  return server;
}
