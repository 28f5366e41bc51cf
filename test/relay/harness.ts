// The relay as a real process for tests: its own data dir, a real redis-server (or none, for an open relay), a free
// UDP port for STUN on loopback only. Plus helpers to register node keys the way the coordination service does.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Redis } from 'ioredis';
import { formatKey } from '../../shared/keys.ts';
import { K } from '../../shared/redis-keys.ts';
import { DerpClient, type DerpClientOptions } from '../../services/relay/src/derp-client.ts';
import { newPrivateKey, publicKeyOf } from '../../services/relay/src/nacl-box.ts';
import { freeUdpPort, runProcess, type Proc } from '../harness/process.ts';
import type { TestRedis } from '../harness/redis.ts';

export interface TestRelay {
  proc: Proc;
  dataDir: string;
  socket: string;
  stunPort: number;
  connect(o?: Partial<DerpClientOptions>): Promise<DerpClient>;
  stop(): Promise<void>;
}

export interface RelayOptions {
  env?: Record<string, string>;
  /** Reuse a data dir (to restart a relay); it is then left in place on stop(). */
  dataDir?: string;
}

export async function startRelay(redis: TestRedis | null, o: RelayOptions = {}): Promise<TestRelay> {
  const ownDir = o.dataDir === undefined;
  const dataDir = o.dataDir ?? fs.mkdtempSync(path.join(os.tmpdir(), 'hse-relay-'));
  const stunPort = await freeUdpPort(['127.0.0.1', '::1']);
  const proc = runProcess('services/relay/src/main.ts', {
    HSE_DATA_DIR: dataDir,
    HSE_STUN_PORT: String(stunPort),
    HSE_STUN_LISTEN: '127.0.0.1,::1',
    HSE_LOG_LEVEL: 'debug',
    ...(redis ? { HSE_REDIS_URL: redis.url } : { HSE_DERP_VERIFY_CLIENTS: 'off' }),
    ...o.env,
  });
  await proc.waitFor(/listening/);
  const socket = path.join(dataDir, 'run', 'relay.sock');
  return {
    proc,
    dataDir,
    socket,
    stunPort,
    connect: (o = {}) => DerpClient.connect({ socketPath: socket, clientIp: '127.0.0.1', ...o }),
    async stop() {
      await proc.stop();
      if (ownDir) fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

export interface TestNode {
  privateKey: Buffer;
  publicKey: Buffer;
  /** "nodekey:<hex>" */
  nodeKey: string;
}

export function newNode(): TestNode {
  const privateKey = newPrivateKey();
  const publicKey = publicKeyOf(privateKey);
  return { privateKey, publicKey, nodeKey: formatKey('nodekey', publicKey) };
}

/** Registers a node key in the index the coordination service keeps (and relay admission reads). */
export async function register(redis: Redis, node: TestNode, nodeId: number): Promise<void> {
  await redis.hset(K.nodeByNodeKey, node.nodeKey, String(nodeId));
}
