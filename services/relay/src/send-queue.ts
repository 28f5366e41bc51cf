// A bounded FIFO that makes room by dropping its oldest entry. Relayed packets are WireGuard or disco datagrams:
// when a client cannot keep up, a fresh packet is worth more than a stale one, and the sender must never wait.
export class DropOldestQueue<T> {
  private readonly items: (T | undefined)[];
  private head = 0;
  private count = 0;
  /** Entries dropped to make room, over the queue's life. */
  dropped = 0;

  constructor(capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError(`queue capacity must be a positive integer, got ${capacity}`);
    this.items = new Array<T | undefined>(capacity);
  }

  get length(): number {
    return this.count;
  }

  get capacity(): number {
    return this.items.length;
  }

  get full(): boolean {
    return this.count === this.items.length;
  }

  /** Appends `item`; when full, first drops and returns the oldest entry. */
  push(item: T): T | undefined {
    let evicted: T | undefined;
    if (this.count === this.items.length) {
      evicted = this.shift();
      this.dropped++;
    }
    this.items[(this.head + this.count) % this.items.length] = item;
    this.count++;
    return evicted;
  }

  shift(): T | undefined {
    if (this.count === 0) return undefined;
    const item = this.items[this.head];
    this.items[this.head] = undefined;
    this.head = (this.head + 1) % this.items.length;
    this.count--;
    return item;
  }

  clear(): number {
    const n = this.count;
    while (this.count > 0) this.shift();
    return n;
  }
}
