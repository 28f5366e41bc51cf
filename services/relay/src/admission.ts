// Who may use the relay. By default only node keys registered with this coordination server: the coordination
// service keeps the index K.nodeByNodeKey ("nodekey:<hex>" -> node id) in Redis, and we ask it once per connection.
// HSE_DERP_VERIFY_CLIENTS=off opens the relay to any key.
//
// When Redis cannot answer, new clients are refused (fail closed): a relay that admits anyone while the store is
// down would be an open relay whenever Redis restarts. Connections already admitted carry on.
import type { Redis } from 'ioredis';
import { K } from '../../../shared/redis-keys.ts';

export type Verdict =
  | { admitted: true; nodeId: string | null }
  /** `unavailable`: the store could not answer, so the refusal says nothing about the key itself. */
  | { admitted: false; reason: string; unavailable: boolean };

export interface Admission {
  /** `nodeKey` in its text form, "nodekey:<64 lowercase hex>". */
  check(nodeKey: string): Promise<Verdict>;
  /** For the "listening" log line. */
  readonly description: string;
}

export class OpenAdmission implements Admission {
  readonly description = 'open (HSE_DERP_VERIFY_CLIENTS=off)';
  async check(): Promise<Verdict> {
    return { admitted: true, nodeId: null };
  }
}

/** Redis answers in milliseconds; this only bounds how long a client waits when it does not answer at all. */
const LOOKUP_TIMEOUT_MS = 5_000;

export class RegisteredNodesAdmission implements Admission {
  readonly description = 'registered node keys only';
  private readonly redis: Redis;
  private readonly timeoutMs: number;

  constructor(redis: Redis, timeoutMs = LOOKUP_TIMEOUT_MS) {
    this.redis = redis;
    this.timeoutMs = timeoutMs;
  }

  async check(nodeKey: string): Promise<Verdict> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${this.timeoutMs} ms`)), this.timeoutMs);
    });
    try {
      const id = await Promise.race([this.redis.hget(K.nodeByNodeKey, nodeKey), timeout]);
      if (id === null) return { admitted: false, reason: 'node key is not registered with this server', unavailable: false };
      return { admitted: true, nodeId: id };
    } catch (e) {
      return { admitted: false, reason: `store unavailable (${(e as Error).message})`, unavailable: true };
    } finally {
      clearTimeout(timer);
    }
  }
}
