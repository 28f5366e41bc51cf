// Bounded concurrency and polling for tests and benchmarks: many connections opened a few at a time, and waiting for
// a condition that no event announces.
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * Runs `fn` over `items` with at most `limit` calls in flight; results in the order of `items`. After a failure no
 * further call starts, and the first error is thrown once the calls in flight have ended.
 */
export async function pool<T, R>(items: T[], limit: number, fn: (item: T, index: number) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  let failed = false;
  let error: unknown;
  const worker = async () => {
    while (!failed && next < items.length) {
      const i = next++;
      try {
        out[i] = await fn(items[i], i);
      } catch (e) {
        if (!failed) error = e;
        failed = true;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  if (failed) throw error;
  return out;
}

/** Polls `done` every `everyMs` until it holds or `ms` pass; returns whether it held. */
export async function until(done: () => boolean, ms: number, everyMs = 20): Promise<boolean> {
  const deadline = performance.now() + ms;
  while (!done()) {
    if (performance.now() > deadline) return false;
    await sleep(everyMs);
  }
  return true;
}
