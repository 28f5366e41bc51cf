// The relay process: DERP over HTTP upgrades on its Unix socket (the router forwards /derp and /generate_204 here)
// and STUN on UDP HSE_STUN_PORT. Admission asks Redis which node keys are registered; the change channel closes
// connections of deleted or re-keyed nodes. Stopping: no more admissions, clients are told the relay is restarting
// and closed. With a mesh key the relay accepts the region's other relays, and dials those in HSE_DERP_MESH_WITH
// (mesh-link.ts). Start-up, signals and the exit policy are the shared service skeleton's (shared/service.ts).
import { ActivityLog, activityLimits } from '../../../shared/activity.ts';
import { countedBy, countedByLabels, gaugeOf, serveProcessMetrics } from '../../../shared/metrics.ts';
import { listenOnSocket, serviceSocket } from '../../../shared/paths.ts';
import { connectRedis, type Redis } from '../../../shared/redis.ts';
import { runService } from '../../../shared/service.ts';
import { type Admission, OpenAdmission, RegisteredNodesAdmission } from './admission.ts';
import { DerpServer } from './derp-server.ts';
import { createRelayHttpServer } from './http.ts';
import { loadMeshKey } from './mesh-key.ts';
import type { MeshLink } from './mesh-link.ts';
import { RefusalLog } from './refusal-log.ts';
import { watchRevocations } from './revocations.ts';
import { loadOrCreateServerKey, type ServerKey } from './server-key.ts';
import { StunServer } from './stun-server.ts';

runService('relay', async ({ cfg, log }) => {
  const socketPath = serviceSocket(cfg, 'relay');
  // Before the Redis connections, so they are measured (shared/redis.ts).
  const metrics = await serveProcessMetrics(cfg, log, 'relay');
  let serverKey: ServerKey | null = null;
  // An unreadable or damaged mesh key file is a StartupError naming HSE_DERP_MESH_KEY_FILE; read first, so a refused
  // start creates nothing.
  const meshKey = cfg.derpMode === 'own' ? loadMeshKey(cfg) : null;
  if (cfg.derpMode === 'own') {
    // A damaged key file is a StartupError naming the file: one line, exit 2, no restart loop.
    serverKey = loadOrCreateServerKey(cfg.dataDir);
    if (serverKey.created) log.info('generated the relay key', { file: serverKey.file });
    if (serverKey.repairedMode) log.warn('relay key file was readable by others; narrowed it to 600', { file: serverKey.file });
  }

  // Open admission needs no store at all, so an open relay runs without Redis.
  let redis: Redis | null = null;
  let sub: Redis | null = null;
  let admission: Admission = new OpenAdmission();
  let refusals: RefusalLog | null = null;
  if (serverKey && cfg.derpVerifyClients) {
    redis = connectRedis(cfg, log, 'relay');
    sub = connectRedis(cfg, log, 'relay-sub', { timed: false });
    admission = new RegisteredNodesAdmission(redis);
    refusals = new RefusalLog(new ActivityLog(redis, activityLimits(cfg)), redis, log);
  }

  const derp = serverKey
    ? new DerpServer({
        privateKey: serverKey.privateKey,
        publicKey: serverKey.publicKey,
        admission,
        log: log.child('derp'),
        queueDepth: cfg.derpSendQueueDepth,
        meshKey,
        onRefused: (ip, nodeKey, verdict) => refusals?.note(ip, nodeKey, verdict.reason),
      })
    : null;
  const stun = new StunServer(log.child('stun'));
  if (metrics) {
    // Read at scrape time from the relay's own counters: nothing is added to the per-packet path.
    gaugeOf('hse_relay_clients', 'Relay clients connected to this relay now (mesh peers not counted).', () => derp?.stats.clients ?? 0);
    countedBy('hse_relay_packets_forwarded_total', 'Packets relayed to a client (local, or through a mesh peer) or forwarded in by a mesh peer.', () =>
      derp ? derp.stats.packetsRelayed + derp.stats.packetsForwardedIn : 0,
    );
    countedBy(
      'hse_relay_forwarded_bytes_total',
      'Payload bytes of the packets counted in hse_relay_packets_forwarded_total.',
      () => derp?.stats.bytesRelayed ?? 0,
    );
    countedByLabels(
      'hse_relay_packets_dropped_total',
      'Packets the relay dropped: queue_full = the receiving client did not keep up; no_destination = no client holds the key.',
      ['reason'],
      () => [
        [{ reason: 'queue_full' }, derp?.packetsDropped ?? 0],
        [{ reason: 'no_destination' }, derp?.stats.packetsToNowhere ?? 0],
      ],
    );
    countedByLabels('hse_stun_requests_total', 'STUN datagrams received: answered binding requests, and ignored ones.', ['result'], () => [
      [{ result: 'answered' }, stun.stats.answered],
      [{ result: 'ignored' }, stun.stats.ignored],
    ]);
  }
  const server = createRelayHttpServer({ derp, log: log.child('http') });

  if (derp && sub) watchRevocations(sub, derp, log);
  await listenOnSocket(server, socketPath);
  let links: MeshLink[] = [];
  if (derp && serverKey && meshKey && cfg.derpMeshWith.length > 0) {
    // Loaded only by a relay that dials peers: the dialling side (HTTPS, TLS, the DERP client) is heap a relay that
    // is only dialled, or not meshed at all, never uses (bench/README.md, memory at rest).
    const { startMesh } = await import('./mesh-link.ts');
    links = startMesh(cfg.derpMeshWith, {
      privateKey: serverKey.privateKey,
      publicKey: serverKey.publicKey,
      meshKey,
      registry: derp.registry,
      log: log.child('mesh'),
    });
  }
  if (!derp) {
    log.info('listening', { socket: socketPath, derp: 'public', note: 'HSE_DERP_MODE=public: clients use Tailscale relays; no DERP and no STUN here' });
  } else {
    const stunAddresses = await stun.listen(cfg.stunListen, cfg.stunPort);
    log.info('listening', {
      socket: socketPath,
      stun: stunAddresses.join(','),
      admission: admission.description,
      serverKey: `${derp.serverPublic.toString('hex').slice(0, 16)}…`,
      queueDepth: cfg.derpSendQueueDepth,
      mesh: meshKey ? `key set, dialling ${links.length} peer(s)${links.length ? `: ${links.map((l) => l.name).join(', ')}` : ''}` : 'off',
    });
  }

  return {
    inFlight: () => ({ clients: derp?.stats.clients ?? 0 }),
    async stop() {
      for (const l of links) l.stop();
      server.close();
      metrics?.close();
      stun.close();
      await derp?.drain();
      redis?.disconnect();
      sub?.disconnect();
    },
  };
});
