// A stream that opens before the policy has been compiled with its node. On a loaded machine with a large tailnet the
// compile a registration schedules can take longer than the hub's 5 s wait (bench/ha.ts at 2,000 nodes hit it), and the
// stream then went ahead with a policy that does not contain the node — which refuses to answer for it, so the map
// request failed with 500. The stream must instead wait for the compile (logging that it waits) and then get its whole
// view in its first map. In-process with the real state layer, policy and hub on a real redis-server.
import { EventEmitter } from 'node:events';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import test from 'ava';
import { ActivityLog } from '../../shared/activity.ts';
import { parseConfig } from '../../shared/config.ts';
import { decodeMapFrames } from '../../services/coordination/src/control/map-frame.ts';
import { MapHub } from '../../services/coordination/src/control/map-hub.ts';
import { LivePolicy } from '../../services/coordination/src/map/live-policy.ts';
import { PolicySource } from '../../services/coordination/src/map/policy-source.ts';
import { PolicyStore } from '../../services/coordination/src/state/policy-store.ts';
import { Store } from '../../services/coordination/src/state/store.ts';
import { Tailnet } from '../../services/coordination/src/state/tailnet.ts';
import type { MapResponse } from '../../services/coordination/src/tailcfg/tailcfg.ts';
import { CaptureLogger } from '../harness/noise-client.ts';
import { nodeFields } from '../harness/node-fields.ts';
import { startRedis, type TestRedis } from '../harness/redis.ts';

/** Stands in for the HTTP/2 response of a map request: keeps what the hub writes. */
class Response extends EventEmitter {
  readonly chunks: Buffer[] = [];
  writableLength = 0;
  writableEnded = false;
  stream = { close: () => this.emit('close') };
  write(b: Buffer): boolean {
    this.chunks.push(b);
    return true;
  }
  end(): void {
    this.writableEnded = true;
  }
  messages(): MapResponse[] {
    return decodeMapFrames(Buffer.concat(this.chunks), false).messages;
  }
}

const fields = (i: number, userId: number) => nodeFields(i, userId, `host-${i}`);

let redis: TestRedis;
let dir: string;
test.before(async () => {
  redis = await startRedis();
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hse-map-before-policy-'));
});
test.after.always(async () => {
  await redis?.stop();
  fs.rmSync(dir, { recursive: true, force: true });
});

test('a stream opened before the policy includes its node waits for the compile and gets its whole view first', async (t) => {
  const log = new CaptureLogger();
  const cfg = parseConfig({ HSE_DATA_DIR: dir });
  const store = new Store(redis.client());
  const tailnet = new Tailnet(store, redis.client(), log);
  await tailnet.start();
  const policy = new LivePolicy({
    tailnet,
    source: new PolicySource({ store: new PolicyStore(store), file: null, log }),
    activity: new ActivityLog(store.redis, { maxEntries: 1000, retentionDays: 90 }),
    log,
    options: { taildrop: true },
  });
  await policy.start();
  const hub = new MapHub({ cfg, tailnet, store, policy, log, instance: 'test' });
  hub.start();

  const u = await store.createUser('early');
  const first = await store.createNode(fields(1, u.id));
  while (!policy.knows(first.id)) await sleep(20);
  const late = await store.createNode(fields(2, u.id));
  t.false(policy.knows(late.id), 'the compile that includes the new node has not run yet');

  const res = new Response();
  await hub.open(late, res as never, false);
  t.true(policy.knows(late.id), 'the stream waited for the compile');
  const [full, ...rest] = res.messages();
  t.truthy(full?.Node, 'the stream got its full map');
  t.deepEqual(
    (full.Peers ?? []).map((p) => p.ID),
    [first.id],
    'with its peer in it',
  );
  t.true((full.PacketFilter ?? []).length > 0, 'and its packet filter');
  t.deepEqual(rest, [], 'nothing before it');
  t.false(
    log.lines.some((l) => l.level === 'error'),
    JSON.stringify(log.lines.filter((l) => l.level === 'error')),
  );
  hub.closeAll();
  policy.stop();
});
