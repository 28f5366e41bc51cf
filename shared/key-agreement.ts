// Several instances serving one tailnet must use the same Noise key: clients pin it from GET /key and a client that
// reconnects through the load balancer to another instance must find the same key there. The key stays in a file
// under HSE_DATA_DIR — the operator copies it to every instance (advanced/ha.md) — and the first instance to start
// records its public half in Redis; an instance whose key differs refuses to start with one line naming the file to
// copy, instead of answering clients with a key they will not accept. (Relay keys may differ per instance, as each
// derper in a region has its own: clients learn a relay's key from its greeting.)
import type { Redis } from 'ioredis';
import { StartupError } from './errors.ts';
import type { Logger } from './log.ts';

/** How long to wait for Redis at start before giving up (pm2 then restarts the process with backoff). */
const WAIT_FOR_STORE_MS = 60_000;

export async function agreeOnKey(redis: Redis, log: Logger, k: { redisKey: string; what: string; file: string; publicHex: string }): Promise<void> {
  const deadline = Date.now() + WAIT_FOR_STORE_MS;
  for (;;) {
    try {
      await redis.set(k.redisKey, k.publicHex, 'NX');
      const recorded = await redis.get(k.redisKey);
      if (recorded === null || recorded === k.publicHex) return;
      throw new StartupError(
        k.file,
        `this instance's ${k.what} (${k.publicHex.slice(0, 16)}…) differs from the one the tailnet uses (${recorded.slice(0, 16)}…); copy ${k.file} from an instance already serving this tailnet (every instance needs the same file)`,
      );
    } catch (e) {
      if (e instanceof StartupError) throw e;
      if (Date.now() > deadline) throw e;
      log.warn('waiting for the store (Redis) to check the key against the tailnet', { error: (e as Error).message });
      await new Promise((r) => setTimeout(r, 1000));
    }
  }
}
