// The console's one subscription to the coordination service's change channel (K.changes, shared/changes.ts). Every
// live machine view in this process listens here, so a hundred open Machines tabs cost one subscribed Redis
// connection. The subscription is made when the first view opens and kept until shutdown. After a reconnect
// (Redis restarted) listeners are called with null: changes may have been missed, so views refresh from scratch.
import type { Redis } from 'ioredis';
import { decodeChange, type ChangeEvent } from '../../../../shared/changes.ts';
import type { Logger } from '../../../../shared/log.ts';
import { K } from '../../../../shared/redis-keys.ts';

/** null = "something may have changed that was not announced" (after a reconnect). */
export type ChangeListener = (e: ChangeEvent | null) => void;

export class ChangeFeed {
  private readonly connect: () => Redis;
  private readonly log: Logger;
  private conn: Redis | null = null;
  private readonly listeners = new Set<ChangeListener>();
  private subscribed = false;

  constructor(connect: () => Redis, log: Logger) {
    this.connect = connect;
    this.log = log;
  }

  get listenerCount(): number {
    return this.listeners.size;
  }

  /** Adds a listener; returns the function that removes it. */
  subscribe(fn: ChangeListener): () => void {
    this.listeners.add(fn);
    this.start();
    return () => this.listeners.delete(fn);
  }

  private start(): void {
    if (this.conn) return;
    const conn = this.connect();
    this.conn = conn;
    conn.on('message', (channel: string, message: string) => {
      if (channel !== K.changes) return;
      const e = decodeChange(message);
      if (e) this.emit(e);
    });
    // ioredis subscribes again by itself after a reconnect; what was published meanwhile is lost, so say so. A first
    // subscription that failed (Redis was not there yet) is tried again here.
    conn.on('ready', () => {
      if (this.subscribed) this.emit(null);
      else this.trySubscribe(conn);
    });
    this.trySubscribe(conn);
  }

  private trySubscribe(conn: Redis): void {
    conn.subscribe(K.changes).then(
      () => {
        if (!this.subscribed) this.emit(null);
        this.subscribed = true;
      },
      (e: Error) => this.log.warn('cannot subscribe to state changes yet; live views refresh once it works', { error: e.message }),
    );
  }

  private emit(e: ChangeEvent | null): void {
    for (const l of this.listeners) {
      try {
        l(e);
      } catch (err) {
        this.log.warn('live view listener failed', { error: (err as Error).message });
      }
    }
  }

  stop(): void {
    this.listeners.clear();
    this.conn?.disconnect();
    this.conn = null;
  }
}
