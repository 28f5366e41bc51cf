// Opening a DERP connection as a client: an HTTP/1.1 GET /derp with Upgrade: DERP (or a WebSocket with subprotocol
// derp), over plain TCP, TLS or a Unix socket, answered by 101 — what derphttp.Client.connect does. Used by the mesh
// links (mesh-link.ts) and by our test and benchmark client (derp-client.ts). Resolves with the upgraded byte stream.
//
// TLS is verified against the system's CAs (plus NODE_EXTRA_CA_CERTS); the name checked is the URL's host, also when
// `dialHost` sends the TCP connection elsewhere (derper's --mesh-with "host/dial-host").
import crypto from 'node:crypto';
import type http from 'node:http';
import * as nodeHttp from '../../../shared/node-http.ts';
import https from 'node:https';
import net from 'node:net';
import tls from 'node:tls';
import type { Duplex } from 'node:stream';
import { CLIENT_IP_HEADER } from '../../../shared/paths.ts';
import { acceptValue, WebSocketStream } from './websocket.ts';

export interface DialOptions {
  /** http(s)://host[:port]/derp ... */
  url?: URL;
  /** ... with the TCP connection to this host instead (same port) ... */
  dialHost?: string | null;
  /** ... or the relay's Unix socket (tests), or a TCP host and port (plain HTTP). */
  socketPath?: string;
  host?: string;
  port?: number;
  websocket?: boolean;
  /** The Upgrade token to ask for (default "DERP"). */
  upgrade?: string;
  /** Sent as x-hse-client-ip, as the router would (only meaningful straight to the relay's socket). */
  clientIp?: string;
  /** Extra CA certificates (PEM) to trust for https, besides the system's. */
  ca?: string;
  /** Time for TCP + TLS + HTTP upgrade together; default 10 s as derphttp. */
  timeoutMs?: number;
}

export interface Dialled {
  stream: Duplex;
  headers: http.IncomingHttpHeaders;
}

export function dialDerp(o: DialOptions): Promise<Dialled> {
  const wsKey = crypto.randomBytes(16).toString('base64');
  const headers: Record<string, string> = o.websocket
    ? { Upgrade: 'websocket', Connection: 'Upgrade', 'Sec-WebSocket-Key': wsKey, 'Sec-WebSocket-Version': '13', 'Sec-WebSocket-Protocol': 'derp' }
    : { Upgrade: o.upgrade ?? 'DERP', Connection: 'Upgrade' };
  if (o.clientIp) headers[CLIENT_IP_HEADER] = o.clientIp;
  let req: http.ClientRequest;
  if (o.url) {
    const u = o.url;
    const secure = u.protocol === 'https:';
    const hostname = u.hostname.replace(/^\[|\]$/g, '');
    const port = Number(u.port || (secure ? 443 : 80));
    const common = { host: o.dialHost ?? hostname, port, path: u.pathname, method: 'GET', headers: { ...headers, Host: u.host }, agent: false as const };
    // SNI carries names only (RFC 6066, 3); the certificate is still checked against the URL's host, IP or name.
    req = secure
      ? https.request({ ...common, servername: net.isIP(hostname) ? '' : hostname, ca: o.ca ? [...tls.rootCertificates, o.ca] : undefined })
      : nodeHttp.request(common);
  } else {
    req = nodeHttp.request({ socketPath: o.socketPath, host: o.host, port: o.port, path: '/derp', method: 'GET', headers, agent: false });
  }
  const timeoutMs = o.timeoutMs ?? 10_000;
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => req.destroy(new Error(`no DERP upgrade within ${timeoutMs} ms`)), timeoutMs);
    const fail = (e: Error) => {
      clearTimeout(timer);
      reject(e);
    };
    req.on('error', fail);
    req.on('response', (res) => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d.toString()));
      res.on('end', () => fail(new Error(`relay answered ${res.statusCode} instead of 101: ${body.trim().slice(0, 200)}`)));
      res.on('error', fail);
    });
    req.on('upgrade', (res: http.IncomingMessage, socket: net.Socket, head: Buffer) => {
      clearTimeout(timer);
      if (o.websocket) {
        if (res.headers['sec-websocket-accept'] !== acceptValue(wsKey)) {
          socket.destroy();
          return reject(new Error('relay sent a wrong Sec-WebSocket-Accept'));
        }
        return resolve({ stream: new WebSocketStream(socket, head, 'client'), headers: res.headers });
      }
      if (head.length > 0) socket.unshift(head);
      resolve({ stream: socket, headers: res.headers });
    });
    req.end();
  });
}
