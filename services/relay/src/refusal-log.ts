// Refused relay clients in the activity log, so an operator sees in the console who knocked and why. A refused
// client retries every few seconds, so each key is recorded at most once per window; the process log has every one.
// With several instances the window is kept in Redis too (a key with a TTL per node key), so a client bouncing between
// instances behind the load balancer is still recorded once, not once per instance.
import type { Redis } from 'ioredis';
import type { ActivityLog } from '../../../shared/activity.ts';
import type { Logger } from '../../../shared/log.ts';
import { K } from '../../../shared/redis-keys.ts';

const WINDOW_MS = 10 * 60_000;
/** Bounds the memory of who was recorded recently; past it, the oldest entries are forgotten. */
const MAX_REMEMBERED = 10_000;

export class RefusalLog {
  private readonly activity: ActivityLog;
  private readonly redis: Redis;
  private readonly log: Logger;
  private readonly lastRecorded = new Map<string, number>();

  constructor(activity: ActivityLog, redis: Redis, log: Logger) {
    this.activity = activity;
    this.redis = redis;
    this.log = log;
  }

  note(clientIp: string, nodeKey: string, reason: string, now = Date.now()): void {
    const last = this.lastRecorded.get(nodeKey);
    if (last !== undefined && now - last < WINDOW_MS) return;
    this.lastRecorded.delete(nodeKey);
    this.lastRecorded.set(nodeKey, now);
    if (this.lastRecorded.size > MAX_REMEMBERED) this.lastRecorded.delete(this.lastRecorded.keys().next().value as string);
    this.redis
      .set(`${K.relayRefusedPrefix}${nodeKey}`, '1', 'PX', WINDOW_MS, 'NX')
      .then((first) => {
        if (first !== 'OK') return; // another instance recorded it within the window
        return this.activity.record({
          action: 'relay.refused',
          actor: 'system',
          ip: clientIp,
          target: nodeKey,
          details: { reason },
        });
      })
      .catch((e: Error) => this.log.debug('could not write refusal to the activity log', { error: e.message }));
  }
}
