// Fair reading for busy byte streams that share one event loop (the router's tunnels, the relay's DERP connections).
//
// libuv reads a readable socket up to 32 times in a row (64 KiB each) before it looks at the next one, and Node hands
// every read to JavaScript at once. Under load, one event-loop turn then carries megabytes of a few busy peers' data,
// and a quiet peer's small packet (a latency probe, a disco ping, a keep-alive) waits for the whole turn before it is
// even read. A stream with a turn budget is paused once it has delivered `budget` bytes in the current turn and
// resumed in the check phase that ends it (setImmediate), so every ready stream gets its share of each turn.
import type { Readable } from 'node:stream';

/** What one busy stream may deliver per event-loop turn: ~45 relayed 1,400-byte packets. */
export const TURN_BUDGET_BYTES = 64 * 1024;

export class TurnBudget {
  private readonly stream: Readable;
  private readonly budget: number;
  private used = 0;
  private waitingTurn = false;
  /** Held by the owner for its own reason (backpressure): the turn's end does not resume the stream. */
  private held = false;

  constructor(stream: Readable, budget = TURN_BUDGET_BYTES) {
    this.stream = stream;
    this.budget = budget;
  }

  /** Counts `n` bytes just delivered; pauses the stream until the turn ends when its share is spent. */
  spend(n: number): void {
    this.used += n;
    if (this.used < this.budget || this.waitingTurn) return;
    this.waitingTurn = true;
    this.stream.pause();
    setImmediate(this.nextTurn);
  }

  /** The owner pauses the stream (its destination pushes back); only release() resumes it. */
  hold(): void {
    this.held = true;
    this.stream.pause();
  }

  release(): void {
    this.held = false;
    if (!this.waitingTurn) this.stream.resume();
  }

  private readonly nextTurn = (): void => {
    this.used = 0;
    this.waitingTurn = false;
    if (!this.held && !this.stream.destroyed) this.stream.resume();
  };
}
