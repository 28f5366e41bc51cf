// The coordination service: wires transport (noise/), control (HTTP/2, register, map), state (Redis + in-memory
// tailnet) and the admin API together, and listens on its two Unix sockets in the private run directory: the one the
// router forwards to, and the admin one only the console and the CLI use. Start-up, signals and the exit policy are
// the shared service skeleton's (shared/service.ts).
import crypto from 'node:crypto';
import type http from 'node:http';
import type { Duplex } from 'node:stream';
import { ActivityLog, activityLimits } from '../../../shared/activity.ts';
import { agreeOnKey } from '../../../shared/key-agreement.ts';
import { formatKey } from '../../../shared/keys.ts';
import { gaugeOf, serveProcessMetrics } from '../../../shared/metrics.ts';
import { adminSocket, listenOnSocket, serviceSocket } from '../../../shared/paths.ts';
import { connectRedis } from '../../../shared/redis.ts';
import { K } from '../../../shared/redis-keys.ts';
import { createServiceServer, runService } from '../../../shared/service.ts';
import { adminRoutes, createAdminServer, webhookContext } from './admin/admin-server.ts';
import { WebhookStore } from './state/webhook-store.ts';
import { WebhookWorker } from './webhooks/worker.ts';
import { createApiHandler } from './api/api-server.ts';
import { ApiKeyStore } from './state/api-keys.ts';
import { serveControlConnection } from './control/h2-server.ts';
import { MapHub } from './control/map-hub.ts';
import { RouteApprovals } from './control/route-approvals.ts';
import { LivePolicy } from './map/live-policy.ts';
import { PolicySource } from './map/policy-source.ts';
import { Registrar } from './control/register.ts';
import { handleKey } from './key-endpoint.ts';
import { loadOrCreateServerKey } from './noise/server-key.ts';
import { handleControlUpgrade } from './noise/upgrade.ts';
import { Housekeeping } from './state/housekeeping.ts';
import { PolicyStore } from './state/policy-store.ts';
import { Store } from './state/store.ts';
import { Tailnet } from './state/tailnet.ts';

const TEXT = { 'content-type': 'text/plain; charset=utf-8' };

runService('coordination', async ({ cfg, log }) => {
  const serverKey = loadOrCreateServerKey(cfg.dataDir);
  if (serverKey.created) log.info('generated the Noise key', { file: serverKey.file });
  if (serverKey.repairedMode) log.warn('Noise key file was readable by others; narrowed it to 600', { file: serverKey.file });

  // HSE_METRICS_LISTEN: this process's registry on its socket, before the Redis connections so they are measured.
  const metrics = await serveProcessMetrics(cfg, log, 'coordination');
  const redis = connectRedis(cfg, log, 'coordination');
  const sub = connectRedis(cfg, log, 'coordination-sub', { timed: false });
  const store = new Store(redis, { waitReplicas: cfg.redisWaitReplicas });
  const activity = new ActivityLog(redis, activityLimits(cfg));
  await agreeOnKey(redis, log, { redisKey: K.tailnetNoiseKey, what: 'Noise key', file: serverKey.file, publicHex: serverKey.publicKey.toString('hex') });
  const tailnet = new Tailnet(store, sub, log.child('state'));
  const instance = crypto.randomBytes(4).toString('hex');
  const policyStore = new PolicyStore(store);
  const policySource = new PolicySource({ store: policyStore, file: cfg.policyFile, log: log.child('policy') });
  const policy = new LivePolicy({ tailnet, source: policySource, activity, log: log.child('policy'), options: { taildrop: cfg.taildrop } });
  const hub = new MapHub({ cfg, tailnet, store, policy, log: log.child('map'), instance, activity });
  gaugeOf('hse_nodes', 'Machines registered in the tailnet (as this instance knows them).', () => tailnet.nodes.size);
  gaugeOf('hse_nodes_online', 'Machines online: a map stream open on any instance.', () => tailnet.online.size);
  gaugeOf('hse_map_streams_open', 'Map long-poll streams open on this instance.', () => hub.streamCount);
  tailnet.servedHere = (id) => hub.isConnectedHere(id);
  const registrar = new Registrar({ cfg, activity, store, policy, tailnet, log: log.child('register') });
  const controlDeps = { store, hub, registrar, log: log.child('control') };

  function upgrade(req: http.IncomingMessage, socket: Duplex, head: Buffer): void {
    handleControlUpgrade(req, socket, head, {
      serverPrivateKey: serverKey.privateKey,
      log: log.child('noise'),
      onConnection: (conn, info) =>
        serveControlConnection(conn, { machineKey: formatKey('mkey', info.machineKey), capVersion: info.capVersion, clientIp: info.clientIp }, controlDeps),
    });
  }

  const apiKeys = new ApiKeyStore(redis);
  const webhooks = new WebhookStore(redis);
  const adminDeps = { cfg, apiKeys, webhooks, activity, store, policy, policyStore, tailnet, hub, registrar, log: log.child('admin') };
  const routes = adminRoutes(adminDeps);
  const api = createApiHandler({ cfg, admin: routes, apiKeys, store, tailnet, policy, baseDomain: cfg.baseDomain, log: log.child('api') });

  const server = createServiceServer(log, (req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (path.startsWith('/api/')) return api(req, res);
    if (path === '/key') return handleKey(req, res, serverKey.publicKey);
    if (path === '/ts2021') {
      // An upgrade whose Connection header lacks "upgrade" (some proxies drop it) lands here; take the socket over.
      if (req.headers.upgrade) return upgrade(req, req.socket, Buffer.alloc(0));
      res
        .writeHead(400, TEXT)
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
        .writeHead(200, TEXT)
        .end(`hse coordination server. Log in with: tailscale up --login-server=${cfg.publicOrigin}\nConsole: ${cfg.publicOrigin}/console\n`);
      return;
    }
    res.writeHead(404, TEXT).end('not found\n');
  });
  server.on('upgrade', (req: http.IncomingMessage, socket: Duplex, head: Buffer) => {
    if ((req.url ?? '').split('?')[0] === '/ts2021') return upgrade(req, socket, head);
    socket.end('HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
  });
  const admin = createAdminServer(adminDeps, routes);

  await tailnet.start();
  await policy.start();
  hub.start();
  new RouteApprovals({ tailnet, store, policy, activity, log: log.child('routes'), servesHere: (id) => hub.isConnectedHere(id) }).start();
  const housekeeping = new Housekeeping({
    store,
    tailnet,
    activity,
    log: log.child('housekeeping'),
    holder: `${instance}:coordination:${process.pid}`,
    ephemeralTimeoutSeconds: cfg.ephemeralTimeoutSeconds,
  });
  housekeeping.start();
  const webhookWorker = new WebhookWorker({
    store: webhooks,
    redis,
    tailnet,
    log: log.child('webhooks'),
    holder: `${instance}:coordination:${process.pid}`,
    ctx: webhookContext(cfg),
  });
  await webhookWorker.init();
  webhookWorker.start();
  await listenOnSocket(server, serviceSocket(cfg, 'coordination'));
  await listenOnSocket(admin, adminSocket(cfg));
  log.info('listening', {
    socket: serviceSocket(cfg, 'coordination'),
    admin: adminSocket(cfg),
    publicUrl: cfg.publicOrigin,
    derp: cfg.derpMode,
    // This process's id in the store's presence entries and lease (several instances share one store).
    instance,
    machineKey: `${formatKey('mkey', serverKey.publicKey).slice(0, 16)}…`,
  });

  return {
    inFlight: () => ({ streams: hub.streamCount }),
    async stop(deadline) {
      await housekeeping.stop();
      await webhookWorker.stop();
      policy.stop();
      // Streams end first: clients reconnect to whichever instance answers next, and their offline marks reach Redis.
      hub.closeAll();
      // Noise connections are upgraded sockets the HTTP server no longer answers for; they end with the process.
      server.close();
      admin.close();
      metrics?.close();
      await new Promise((r) => setTimeout(r, Math.min(500, Math.max(0, deadline - Date.now()))));
      redis.disconnect();
      sub.disconnect();
    },
  };
});
