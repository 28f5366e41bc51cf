// GET /key?v=<capability version>: the server's Noise (machine) public key, which the client pins for the /ts2021
// handshake. The legacy key belongs to the pre-Noise protocol that no supported client speaks; it is all zeros.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { formatKey } from '../../../shared/keys.ts';

const ZERO = new Uint8Array(32);

export function handleKey(req: IncomingMessage, res: ServerResponse, serverPublicKey: Uint8Array): void {
  const url = new URL(req.url ?? '/', 'http://x');
  const v = url.searchParams.get('v');
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    res.writeHead(405, { allow: 'GET, HEAD', 'content-type': 'text/plain; charset=utf-8' }).end('use GET\n');
    return;
  }
  if (v === null || !/^\d{1,6}$/.test(v)) {
    res.writeHead(400, { 'content-type': 'text/plain; charset=utf-8' }).end('missing or invalid ?v=<capability version>\n');
    return;
  }
  const body = JSON.stringify({ legacyPublicKey: formatKey('mkey', ZERO), publicKey: formatKey('mkey', serverPublicKey) });
  res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-store' }).end(req.method === 'HEAD' ? undefined : body);
}
