// The coordination service: wires transport (noise/), control (HTTP/2, register, map), state (Redis + in-memory
// tailnet) and the admin API together, and listens on its two Unix sockets in the private run directory: the one the
// router forwards to, and the admin one only the console and the CLI use.
import crypto from 'node:crypto';
import http from 'node:http';
import type { Duplex } from 'node:stream';
import { prune } from '../../../shared/activity.ts';
import { loadConfig } from '../../../shared/config.ts';
import { formatKey } from '../../../shared/keys.ts';
import { Logger } from '../../../shared/log.ts';
import { adminSocket, CLIENT_IP_HEADER, ensureDirs, listenOnSocket, serviceSocket } from '../../../shared/paths.ts';
import { stoppedCleanly, waitAfterQuickExit } from '../../../shared/restart-backoff.ts';
import { connectRedis } from '../../../shared/redis.ts';
import { createAdminServer } from './admin/admin-server.ts';
import { serveControlConnection } from './control/h2-server.ts';
import { MapHub } from './control/map-hub.ts';
import { Registrar } from './control/register.ts';
import { handleKey } from './key-endpoint.ts';
import { handleControlUpgrade } from './noise/upgrade.ts';
import { loadOrCreateServerKey } from './noise/server-key.ts';
import { Store } from './state/store.ts';
import { Tailnet } from './state/tailnet.ts';

const cfg = loadConfig('coordination');
const log = new Logger('coordination', cfg.logLevel);
ensureDirs(cfg);
await waitAfterQuickExit(cfg.runDir, 'coordination');

const redis = connectRedis(cfg, log, 'coordination');
const sub = connectRedis(cfg, log, 'coordination-sub');
const store = new Store(redis);
const tailnet = new Tailnet(store, sub, log.child('state'));
const instance = crypto.randomBytes(4).toString('hex');
const hub = new MapHub(cfg, tailnet, store, log.child('map'), instance);
const registrar = new Registrar({ cfg, store, tailnet, log: log.child('register') });
const serverKey = loadOrCreateServerKey(cfg.dataDir);
const controlDeps = { store, hub, registrar, log: log.child('control') };

function clientIp(req: http.IncomingMessage): string {
  return String(req.headers[CLIENT_IP_HEADER] ?? '');
}

function isControlUpgrade(req: http.IncomingMessage): boolean {
  return (req.url ?? '').split('?')[0] === '/ts2021';
}

function upgrade(req: http.IncomingMessage, socket: Duplex, head: Buffer): void {
  handleControlUpgrade(req, socket, head, {
    serverPrivateKey: serverKey.privateKey,
    log: log.child('noise'),
    onConnection: (conn, info) =>
      serveControlConnection(conn, { machineKey: formatKey('mkey', info.machineKey), capVersion: info.capVersion, clientIp: info.clientIp }, controlDeps),
  });
}

// The router admits heads up to 32 KiB; accept the same so a head it passed is not refused here.
const server = http.createServer({ maxHeaderSize: 32 * 1024 }, (req, res) => {
  const path = (req.url ?? '/').split('?')[0];
  if (path === '/key') return handleKey(req, res, serverKey.publicKey);
  if (path === '/ts2021') {
    if (req.headers.upgrade) {
      // An upgrade whose Connection header lacks "upgrade" (some proxies drop it) lands here; take the socket over.
      const socket = req.socket;
      return upgrade(req, socket, Buffer.alloc(0));
    }
    res
      .writeHead(400, { 'content-type': 'text/plain; charset=utf-8' })
      .end('/ts2021 needs an HTTP upgrade (Upgrade: tailscale-control-protocol); check that your proxy passes Upgrade and Connection headers\n');
    return;
  }
  if (path === '/health') {
    // Public (every path but /console and /derp reaches us through the router): up or down and nothing more. How
    // many streams are open is for the operator, on the admin socket (GET /v1/health).
    redis
      .ping()
      .then(() => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ ok: true })))
      .catch(() => res.writeHead(503, { 'content-type': 'application/json' }).end(JSON.stringify({ ok: false, error: 'store unavailable' })));
    return;
  }
  if (path === '/' && (req.method === 'GET' || req.method === 'HEAD')) {
    res
      .writeHead(200, { 'content-type': 'text/plain; charset=utf-8' })
      .end(`hse coordination server. Log in with: tailscale up --login-server=${cfg.publicOrigin}\nConsole: ${cfg.publicOrigin}/console\n`);
    return;
  }
  res.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' }).end('not found\n');
});
server.on('upgrade', (req: http.IncomingMessage, socket: Duplex, head: Buffer) => {
  if (isControlUpgrade(req)) return upgrade(req, socket, head);
  socket.end('HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
});
// Long-polls and tunnels last hours: no request or idle timeout here; the router guards against slow heads.
server.requestTimeout = 0;
server.timeout = 0;
server.keepAliveTimeout = 65_000;
server.on('clientError', (e: Error, socket: Duplex) => {
  log.debug('bad request from router', { error: e.message });
  if (!socket.destroyed) socket.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n');
});

const admin = createAdminServer({ cfg, store, tailnet, hub, registrar, log: log.child('admin') });

async function main(): Promise<void> {
  await tailnet.start();
  hub.start();
  const limits = { maxEntries: cfg.activityMaxEntries, retentionDays: cfg.activityRetentionDays };
  const pruneNow = () => prune(redis, limits).catch((e: Error) => log.warn('activity log prune failed', { error: e.message }));
  void pruneNow();
  setInterval(pruneNow, 3_600_000).unref();
  await listenOnSocket(server, serviceSocket(cfg, 'coordination'));
  await listenOnSocket(admin, adminSocket(cfg));
  log.info('listening', {
    socket: serviceSocket(cfg, 'coordination'),
    admin: adminSocket(cfg),
    publicUrl: cfg.publicOrigin,
    derp: cfg.derpMode,
    machineKey: formatKey('mkey', serverKey.publicKey).slice(0, 16) + '…',
  });
}

let stopping = false;
function shutdown(signal: string): void {
  if (stopping) return;
  stopping = true;
  log.info('shutting down', { signal, streams: hub.streamCount });
  server.close();
  admin.close();
  hub.closeAll();
  // Give the stream closes and offline marks a moment to reach Redis, then go.
  setTimeout(() => {
    redis.disconnect();
    sub.disconnect();
    stoppedCleanly(cfg.runDir, 'coordination');
    process.exit(0);
  }, 500).unref();
}
process.on('SIGTERM', () => shutdown('SIGTERM'));
process.on('SIGINT', () => shutdown('SIGINT'));

main().catch((e: Error) => {
  log.error('could not start', { error: e.message });
  process.exit(1);
});
