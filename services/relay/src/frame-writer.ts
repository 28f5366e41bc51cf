// The outgoing side of one DERP connection, for the server's client connections and the mesh links alike. Frames wait
// in four queues, written in this order whenever the transport takes data:
//   control   protocol frames (ServerInfo, PeerGone, Pong, KeepAlive, Health, WatchConns, Ping): few and tiny; a
//             bound only matters against a peer that pings without reading, and then the oldest goes
//   presence  PeerPresent/PeerGone for a mesh watcher: only the latest frame per peer key is kept, so a watcher that
//             falls behind costs at most one frame per client, and what it finally reads is the current state
//   disco     disco packets: their own queue, so a flood of data cannot starve path discovery
//   data      other packets
// Packets queue only while the transport pushes back; a full packet queue drops its oldest packet, so a slow reader
// never slows the senders. A transport that takes nothing for writeStallMs belongs to a peer that is gone.
import type { Duplex } from 'node:stream';
import { DropOldestQueue } from './send-queue.ts';

export interface FrameWriterOptions {
  /** Packets held per packet queue while the transport pushes back. */
  queueDepth: number;
  writeStallMs: number;
  /** The transport took nothing for writeStallMs. */
  onStall: () => void;
  /** A control frame left its queue, written or dropped (the connection tracks its one pending Pong with this). */
  onControlGone?: (frame: Buffer) => void;
}

const CONTROL_QUEUE_MAX = 64;
/** Bytes gathered into one transport write. */
const BATCH_BYTES = 64 << 10;

export class FrameWriter {
  private readonly stream: Duplex;
  private readonly o: FrameWriterOptions;
  private readonly controlQ: Buffer[] = [];
  private readonly presenceQ = new Map<string, Buffer>();
  private readonly disco: DropOldestQueue<Buffer>;
  private readonly data: DropOldestQueue<Buffer>;
  private blocked = false;
  private flushScheduled = false;
  private stopped = false;
  private stallTimer: NodeJS.Timeout | null = null;

  constructor(stream: Duplex, o: FrameWriterOptions) {
    this.stream = stream;
    this.o = o;
    this.disco = new DropOldestQueue(o.queueDepth);
    this.data = new DropOldestQueue(o.queueDepth);
  }

  /** Packets dropped because the transport did not keep up. */
  get dropped(): number {
    return this.disco.dropped + this.data.dropped;
  }

  control(frame: Buffer): void {
    if (this.stopped) return;
    if (this.controlQ.length >= CONTROL_QUEUE_MAX) {
      if (!this.blocked) this.flush();
      else {
        const gone = this.controlQ.shift();
        if (gone) this.o.onControlGone?.(gone);
      }
    }
    this.controlQ.push(frame);
    this.scheduleFlush();
  }

  /** The latest presence frame about `peerHex` replaces any earlier one not yet written, and goes to the back. */
  presence(peerHex: string, frame: Buffer): void {
    if (this.stopped) return;
    this.presenceQ.delete(peerHex);
    this.presenceQ.set(peerHex, frame);
    this.scheduleFlush();
  }

  packet(frame: Buffer, disco: boolean): void {
    if (this.stopped) return;
    const queue = disco ? this.disco : this.data;
    // While the transport takes data, a full queue is written out rather than trimmed: drops are for slow readers.
    if (queue.full && !this.blocked) this.flush();
    queue.push(frame);
    this.scheduleFlush();
  }

  /** Drops everything queued and writes nothing more. */
  stop(): void {
    this.stopped = true;
    if (this.stallTimer) clearTimeout(this.stallTimer);
    this.stallTimer = null;
    this.controlQ.length = 0;
    this.presenceQ.clear();
    this.disco.clear();
    this.data.clear();
  }

  private scheduleFlush(): void {
    if (this.flushScheduled || this.blocked) return;
    this.flushScheduled = true;
    // Everything queued while handling one read goes out in one write.
    setImmediate(() => {
      this.flushScheduled = false;
      this.flush();
    });
  }

  private next(): Buffer | undefined {
    const c = this.controlQ.shift();
    if (c !== undefined) {
      this.o.onControlGone?.(c);
      return c;
    }
    const first = this.presenceQ.entries().next();
    if (!first.done) {
      this.presenceQ.delete(first.value[0]);
      return first.value[1];
    }
    return this.disco.shift() ?? this.data.shift();
  }

  private flush(): void {
    while (!this.blocked && !this.stopped) {
      const batch: Buffer[] = [];
      let bytes = 0;
      while (bytes < BATCH_BYTES) {
        const f = this.next();
        if (f === undefined) break;
        batch.push(f);
        bytes += f.length;
      }
      if (batch.length === 0) return;
      if (!this.stream.write(batch.length === 1 ? batch[0] : Buffer.concat(batch, bytes))) {
        this.blocked = true;
        this.stream.once('drain', this.onDrain);
        this.stallTimer = setTimeout(this.o.onStall, this.o.writeStallMs);
        this.stallTimer.unref();
      }
    }
  }

  private readonly onDrain = (): void => {
    this.blocked = false;
    if (this.stallTimer) clearTimeout(this.stallTimer);
    this.stallTimer = null;
    this.flush();
  };
}
