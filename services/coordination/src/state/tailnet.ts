// The in-memory view of the tailnet every map session reads: nodes, users and who is online. It is filled from Redis
// at start and kept current by the change channel (K.changes), so a change made anywhere — this process, another
// instance, the console, the CLI — reaches every stream. Events are applied strictly in arrival order. If the
// subscription drops (Redis restart), everything is reloaded and the differences are replayed as events, so no
// stream misses a change it could not have heard.
import { EventEmitter } from 'node:events';
import type { Redis } from 'ioredis';
import { decodeChange, type ChangeEvent } from '../../../../shared/changes.ts';
import { defaultDnsSettings, type DnsSettings } from '../../../../shared/dns-settings.ts';
import type { Logger } from '../../../../shared/log.ts';
import type { NodeRecord, UserRecord } from '../../../../shared/model.ts';
import { K } from '../../../../shared/redis-keys.ts';
import type { Store } from './store.ts';

export interface TailnetEvents {
  /** A node was created or changed. `full` = peers need the whole node, else a patch suffices. */
  node: [node: NodeRecord, prev: NodeRecord | undefined, full: boolean];
  delete: [node: NodeRecord];
  online: [node: NodeRecord, online: boolean];
  user: [user: UserRecord | undefined, id: number];
  pending: [authId: string];
  /** A new policy version was saved (by any instance). */
  policy: [version: number];
  /** The DNS settings were replaced. */
  dns: [settings: DnsSettings];
}

export class Tailnet extends EventEmitter<TailnetEvents> {
  readonly nodes = new Map<number, NodeRecord>();
  readonly users = new Map<number, UserRecord>();
  readonly online = new Set<number>();
  /** The tailnet's DNS settings (K.dns). */
  dns: DnsSettings = defaultDnsSettings();
  private readonly store: Store;
  private readonly sub: Redis;
  private readonly log: Logger;
  private queue: Promise<void> = Promise.resolve();
  private subscribedOnce = false;
  private resyncTimer: NodeJS.Timeout | null = null;
  /** Whether this process holds a map stream of the node (set by the map hub once it exists). */
  servedHere: (nodeId: number) => boolean = () => false;

  constructor(store: Store, subscriber: Redis, log: Logger) {
    super();
    this.setMaxListeners(0);
    this.store = store;
    this.sub = subscriber;
    this.log = log;
  }

  async start(): Promise<void> {
    this.sub.on('message', (channel: string, message: string) => {
      if (channel !== K.changes) return;
      const e = decodeChange(message);
      if (e) this.enqueue(() => this.apply(e));
    });
    // ioredis re-subscribes by itself after a reconnect; a reload covers what was published meanwhile.
    this.sub.on('ready', () => {
      if (this.subscribedOnce) this.enqueue(() => this.resync());
    });
    await this.sub.subscribe(K.changes);
    this.subscribedOnce = true;
    await this.resync();
  }

  private enqueue(task: () => Promise<void>): void {
    this.queue = this.queue.then(task).catch((e: Error) => {
      this.log.warn('could not apply a state change; reloading the tailnet from the store in 1 s', { error: e.message });
      this.resyncSoon();
    });
  }

  /**
   * Reloads the whole view from the store in a second (once, however often asked meanwhile): after a change that could
   * not be applied, or when a node the store has is missing here (a change message that never arrived). The delay keeps
   * a store that is down from being asked in a tight loop.
   */
  resyncSoon(): void {
    if (this.resyncTimer) return;
    this.resyncTimer = setTimeout(() => {
      this.resyncTimer = null;
      this.enqueue(() => this.resync());
    }, 1000);
    this.resyncTimer.unref();
  }

  private async apply(e: ChangeEvent): Promise<void> {
    switch (e.kind) {
      case 'node.upsert': {
        const n = await this.store.getNode(e.nodeId);
        if (!n) return;
        const prev = this.nodes.get(n.id);
        this.nodes.set(n.id, n);
        this.emit('node', n, prev, e.full || prev === undefined);
        return;
      }
      case 'node.delete': {
        const n = this.nodes.get(e.nodeId);
        this.nodes.delete(e.nodeId);
        this.online.delete(e.nodeId);
        if (n) this.emit('delete', n);
        return;
      }
      case 'node.online': {
        const n = this.nodes.get(e.nodeId);
        if (!n) return;
        const was = this.online.has(n.id);
        if (e.online) this.online.add(n.id);
        else this.online.delete(n.id);
        if (!e.online) n.lastSeen = e.lastSeen;
        if (was !== e.online) this.emit('online', n, e.online);
        return;
      }
      case 'user.change': {
        const u = await this.store.getUser(e.userId);
        if (u) this.users.set(u.id, u);
        else this.users.delete(e.userId);
        this.emit('user', u ?? undefined, e.userId);
        return;
      }
      case 'pending.change':
        this.emit('pending', e.authId);
        return;
      case 'policy.change':
        this.emit('policy', e.version);
        return;
      case 'node.keyrotate':
        return; // the node.upsert that follows carries the new key
      case 'dns.change':
        this.dns = await this.store.getDnsSettings();
        this.emit('dns', this.dns);
        return;
    }
  }

  /** Reloads everything and emits the differences. */
  private async resync(): Promise<void> {
    const [nodes, users, online, dns] = await Promise.all([
      this.store.listNodes(),
      this.store.listUsers(),
      this.store.presence.onlineIds(),
      this.store.getDnsSettings(),
    ]);
    if (JSON.stringify(dns) !== JSON.stringify(this.dns)) {
      this.dns = dns;
      this.emit('dns', dns);
    }
    this.users.clear();
    for (const u of users) this.users.set(u.id, u);
    const seen = new Set<number>();
    for (const n of nodes) {
      seen.add(n.id);
      const prev = this.nodes.get(n.id);
      this.nodes.set(n.id, n);
      if (!prev || JSON.stringify(prev) !== JSON.stringify(n)) this.emit('node', n, prev, true);
    }
    for (const [id, n] of this.nodes) {
      if (!seen.has(id)) {
        this.nodes.delete(id);
        this.online.delete(id);
        this.emit('delete', n);
      }
    }
    // Who is online, as the store says — except the nodes whose streams this process holds, which are online whatever
    // the store lost (a Redis failover can drop the last presence writes; the hub renews them on reconnect). Nodes
    // whose state changed while the change feed was away get their event now, like every other difference.
    for (const id of this.online) {
      if (online.has(id) || this.servedHere(id) || !this.nodes.has(id)) continue;
      this.online.delete(id);
      this.emit('online', this.nodes.get(id)!, false);
    }
    for (const id of online) {
      if (this.online.has(id) || !this.nodes.has(id)) continue;
      this.online.add(id);
      this.emit('online', this.nodes.get(id)!, true);
    }
    this.log.info('state loaded', { nodes: this.nodes.size, users: this.users.size, online: this.online.size });
  }
}
