// Shared pieces of the TLS-mode tests: the image started in TLS mode on free loopback ports, and small clients that
// report what a user's client would see (the certificate served, the protocol negotiated, the response).
import http from 'node:http';
import http2 from 'node:http2';
import https from 'node:https';
import net from 'node:net';
import tls from 'node:tls';
import { setTimeout as sleep } from 'node:timers/promises';
import { startImage, type Image } from '../harness/image.ts';
import { freePort } from '../harness/process.ts';
import type { ServiceName } from '../../shared/paths.ts';

export interface TlsImage {
  image: Image;
  httpsPort: number;
  httpPort: number;
  publicUrl: string;
}

/** The image in TLS mode: HSE_PUBLIC_URL https://<host>:<https port>, both TLS-mode ports free on 127.0.0.1. */
export async function startTlsImage(opts: { host: string; services?: ServiceName[]; env?: Record<string, string>; httpPort?: number }): Promise<TlsImage> {
  const httpsPort = await freePort();
  const httpPort = opts.httpPort ?? (await freePort());
  const publicUrl = `https://${opts.host}:${httpsPort}`;
  const image = await startImage({
    services: opts.services ?? [],
    publicUrl,
    env: { HSE_HTTPS_PORT: String(httpsPort), HSE_TLS_HTTP_PORT: String(httpPort), ...opts.env },
  });
  // The first "listening" line is port 80's; HTTPS follows it.
  await image.procs.router!.waitFor(/listening on https:/);
  return { image, httpsPort, httpPort, publicUrl };
}

export interface Handshake {
  ok: boolean;
  /** Why the handshake failed (client side), when it did. */
  error?: string;
  authorized?: boolean;
  fingerprint?: string;
  serial?: string;
  names?: string;
  alpn?: string | false | null;
}

/** SNI carries names only (RFC 6066, 3): an IP-literal public URL sends none, as real clients do. */
function sni(name: string): string | undefined {
  return net.isIP(name) === 0 ? name : undefined;
}

/** One TLS handshake to 127.0.0.1:port, then closed. */
export function handshake(port: number, servername: string, ca: string, alpn?: string[]): Promise<Handshake> {
  return new Promise((resolve) => {
    const s = tls.connect({ host: '127.0.0.1', port, servername: sni(servername), ca, rejectUnauthorized: false, ALPNProtocols: alpn });
    s.once('secureConnect', () => {
      const cert = s.getPeerCertificate();
      resolve({
        ok: true,
        authorized: s.authorized,
        fingerprint: cert.fingerprint256,
        serial: cert.serialNumber,
        names: cert.subjectaltname,
        alpn: s.alpnProtocol,
      });
      s.destroy();
    });
    s.once('error', (e: NodeJS.ErrnoException) => resolve({ ok: false, error: `${e.code ?? ''} ${e.message}` }));
  });
}

/** Polls until `pred` returns a value (not undefined/false); fails with `what` after `ms`. */
export async function eventually<T>(what: string, pred: () => Promise<T | undefined | false>, ms = 30_000, logs?: () => string): Promise<T> {
  const deadline = Date.now() + ms;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const v = await pred();
      if (v !== undefined && v !== false) return v;
    } catch (e) {
      last = e;
    }
    await sleep(100);
  }
  throw new Error(`timed out waiting for ${what}${last ? ` (last error: ${(last as Error).message})` : ''}${logs ? `\n${logs()}` : ''}`);
}

export interface Reply {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/** A plain-HTTP request to 127.0.0.1:port. */
export function plainRequest(port: number, path: string, opts: { method?: string; headers?: http.OutgoingHttpHeaders; body?: string } = {}): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path, method: opts.method ?? 'GET', headers: opts.headers, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.on('error', reject);
    req.end(opts.body);
  });
}

/** An HTTPS request to 127.0.0.1:port for `servername`, trusting `ca` only; no ALPN offered, so HTTP/1.1. */
export function httpsRequest(
  port: number,
  servername: string,
  ca: string,
  path: string,
  opts: { method?: string; headers?: http.OutgoingHttpHeaders; body?: string; agent?: https.Agent } = {},
): Promise<Reply & { socketReused: boolean; fingerprint: string }> {
  return new Promise((resolve, reject) => {
    const req = https.request(
      {
        host: '127.0.0.1',
        port,
        path,
        servername: sni(servername),
        ca,
        method: opts.method ?? 'GET',
        headers: { host: servername, ...opts.headers },
        agent: opts.agent ?? false,
      },
      (res) => {
        // Read now: a keep-alive socket goes back to the agent's pool (and off the response) at the end.
        const fingerprint = (res.socket as tls.TLSSocket).getPeerCertificate().fingerprint256;
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => (body += d));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body, socketReused: req.reusedSocket, fingerprint }));
      },
    );
    req.on('error', reject);
    req.end(opts.body);
  });
}

/** An HTTP/2 request (ALPN h2) to 127.0.0.1:port for `servername`. */
export async function h2Request(
  port: number,
  servername: string,
  ca: string,
  path: string,
  opts: { method?: string; headers?: http2.OutgoingHttpHeaders; body?: string } = {},
): Promise<Reply & { alpn: string | false | null }> {
  const session = http2.connect(`https://${servername}:${port}`, {
    createConnection: () => tls.connect({ host: '127.0.0.1', port, servername: sni(servername), ca, ALPNProtocols: ['h2'] }),
  });
  try {
    return await new Promise((resolve, reject) => {
      session.once('error', reject);
      const stream = session.request({ ':method': opts.method ?? 'GET', ':path': path, ...opts.headers });
      let status = 0;
      let headers: http.IncomingHttpHeaders = {};
      stream.on('response', (h) => {
        status = Number(h[':status']);
        headers = h as http.IncomingHttpHeaders;
      });
      let body = '';
      stream.setEncoding('utf8');
      stream.on('data', (d: string) => (body += d));
      stream.on('end', () => resolve({ status, headers, body, alpn: (session.socket as tls.TLSSocket).alpnProtocol }));
      stream.on('error', reject);
      stream.end(opts.body);
    });
  } finally {
    session.close();
  }
}

/** Number of times `re` occurs in `text`. */
export function count(text: string, re: RegExp): number {
  return (text.match(new RegExp(re.source, re.flags.includes('g') ? re.flags : `${re.flags}g`)) ?? []).length;
}
