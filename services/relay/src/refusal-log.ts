// Refused relay clients in the activity log, so an operator sees in the console who knocked and why. A refused
// client retries every few seconds, so each key is recorded at most once per window; the process log has every one.
import type { ActivityLog } from '../../../shared/activity.ts';
import type { Logger } from '../../../shared/log.ts';

const WINDOW_MS = 10 * 60_000;
/** Bounds the memory of who was recorded recently; past it, the oldest entries are forgotten. */
const MAX_REMEMBERED = 10_000;

export class RefusalLog {
  private readonly activity: ActivityLog;
  private readonly log: Logger;
  private readonly lastRecorded = new Map<string, number>();

  constructor(activity: ActivityLog, log: Logger) {
    this.activity = activity;
    this.log = log;
  }

  note(clientIp: string, nodeKey: string, reason: string, now = Date.now()): void {
    const last = this.lastRecorded.get(nodeKey);
    if (last !== undefined && now - last < WINDOW_MS) return;
    this.lastRecorded.delete(nodeKey);
    this.lastRecorded.set(nodeKey, now);
    if (this.lastRecorded.size > MAX_REMEMBERED) this.lastRecorded.delete(this.lastRecorded.keys().next().value as string);
    this.activity
      .record({
        action: 'relay.refused',
        actor: 'system',
        ip: clientIp,
        target: nodeKey,
        details: { reason },
      })
      .catch((e: Error) => this.log.debug('could not write refusal to the activity log', { error: e.message }));
  }
}
