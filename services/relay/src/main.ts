// The relay process: DERP over HTTP upgrades on its Unix socket (the router forwards /derp and /generate_204 here)
// and STUN on UDP HSE_STUN_PORT. Admission asks Redis which node keys are registered; the change channel closes
// connections of deleted or re-keyed nodes. SIGTERM stops admitting, tells clients the relay is restarting, closes
// them and exits.
import { loadConfig } from '../../../shared/config.ts';
import { Logger } from '../../../shared/log.ts';
import { ensureDirs, listenOnSocket, serviceSocket } from '../../../shared/paths.ts';
import { stoppedCleanly, waitAfterQuickExit } from '../../../shared/restart-backoff.ts';
import { connectRedis, type Redis } from '../../../shared/redis.ts';
import { OpenAdmission, RegisteredNodesAdmission, type Admission } from './admission.ts';
import { DerpServer } from './derp-server.ts';
import { createRelayHttpServer } from './http.ts';
import { RefusalLog } from './refusal-log.ts';
import { watchRevocations } from './revocations.ts';
import { loadOrCreateServerKey, type ServerKey } from './server-key.ts';
import { StunServer } from './stun-server.ts';

const cfg = loadConfig('relay');
const log = new Logger('relay', cfg.logLevel);
ensureDirs(cfg);
await waitAfterQuickExit(cfg.runDir, 'relay');
const socketPath = serviceSocket(cfg, 'relay');

let serverKey: ServerKey | null = null;
if (cfg.derpMode === 'own') {
  try {
    serverKey = loadOrCreateServerKey(cfg.dataDir);
  } catch (e) {
    // A damaged key file needs the operator; exit 2 so the supervisor does not restart into the same error.
    log.error('cannot load the relay key', { error: (e as Error).message });
    process.exit(2);
  }
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
  sub = connectRedis(cfg, log, 'relay-sub');
  admission = new RegisteredNodesAdmission(redis);
  refusals = new RefusalLog(redis, { maxEntries: cfg.activityMaxEntries, retentionDays: cfg.activityRetentionDays }, log);
}

const derp = serverKey
  ? new DerpServer({
      privateKey: serverKey.privateKey,
      publicKey: serverKey.publicKey,
      admission,
      log: log.child('derp'),
      queueDepth: cfg.derpSendQueueDepth,
      onRefused: (ip, nodeKey, verdict) => refusals?.note(ip, nodeKey, verdict.reason),
    })
  : null;
const stun = new StunServer(log.child('stun'));
const server = createRelayHttpServer({ derp, log: log.child('http') });

async function main(): Promise<void> {
  if (derp && sub) watchRevocations(sub, derp, log);
  await listenOnSocket(server, socketPath);
  if (!derp) {
    log.info('listening', { socket: socketPath, derp: 'public', note: 'HSE_DERP_MODE=public: clients use Tailscale relays; no DERP and no STUN here' });
    return;
  }
  const stunAddresses = await stun.listen(cfg.stunListen, cfg.stunPort);
  log.info('listening', {
    socket: socketPath,
    stun: stunAddresses.join(','),
    admission: admission.description,
    serverKey: `${derp.serverPublic.toString('hex').slice(0, 16)}…`,
    queueDepth: cfg.derpSendQueueDepth,
  });
}

let stopping = false;
async function shutdown(signal: string): Promise<void> {
  if (stopping) return;
  stopping = true;
  log.info('shutting down', { signal, clients: derp?.stats.clients ?? 0 });
  server.close();
  stun.close();
  await derp?.drain();
  redis?.disconnect();
  sub?.disconnect();
  stoppedCleanly(cfg.runDir, 'relay');
  process.exit(0);
}
process.on('SIGTERM', () => void shutdown('SIGTERM'));
process.on('SIGINT', () => void shutdown('SIGINT'));

main().catch((e: Error) => {
  log.error('could not start', { error: e.message });
  process.exit(1);
});
