// Fan-out of tailnet changes to the open map streams of this process, and the online state those streams imply.
// Each peer's Node JSON is built once per change and spliced into every stream's message, so a join in a tailnet of
// N nodes costs N small writes, not N node builds. Online/offline, ephemeral clean-up and key expiry are driven here
// because they follow from streams opening, closing and time passing.
import type { Http2ServerResponse } from 'node:http2';
import type { Config } from '../../../../shared/config.ts';
import type { DnsSettings } from '../../../../shared/dns-settings.ts';
import type { Logger } from '../../../../shared/log.ts';
import type { NodeRecord } from '../../../../shared/model.ts';
import { buildDerpMap } from '../map/derp-map.ts';
import { buildDnsConfig } from '../map/dns-config.ts';
import { fullMap, profilesFor, toPeerChange, toTailNode, userProfile, type MapContext } from '../map/map-builder.ts';
import type { Store } from '../state/store.ts';
import type { Tailnet } from '../state/tailnet.ts';
import { MapSession } from './map-session.ts';

const PRESENCE_REFRESH_MS = 30_000;
const PRESENCE_TTL_MS = 90_000;
const EXPIRY_CHECK_MS = 15_000;

export class MapHub {
  private readonly sessions = new Map<number, Set<MapSession>>();
  private readonly nodeJson = new Map<number, string>();
  private readonly ephemeralTimers = new Map<number, NodeJS.Timeout>();
  private readonly timers: NodeJS.Timeout[] = [];
  private readonly ctx: MapContext;
  private readonly tailnet: Tailnet;
  private readonly store: Store;
  private readonly cfg: Config;
  private readonly log: Logger;
  private readonly instance: string;
  private lastExpiryCheck = Date.now();

  constructor(cfg: Config, tailnet: Tailnet, store: Store, log: Logger, instance: string) {
    this.cfg = cfg;
    this.tailnet = tailnet;
    this.store = store;
    this.log = log;
    this.instance = instance;
    this.ctx = { cfg, derpMap: buildDerpMap(cfg), dnsConfig: buildDnsConfig(tailnet.dns, cfg.baseDomain), users: tailnet.users, online: tailnet.online };
  }

  get streamCount(): number {
    let n = 0;
    for (const s of this.sessions.values()) n += s.size;
    return n;
  }

  isConnectedHere(nodeId: number): boolean {
    return (this.sessions.get(nodeId)?.size ?? 0) > 0;
  }

  start(): void {
    this.tailnet.on('node', (n, prev, full) => this.onNode(n, prev, full));
    this.tailnet.on('delete', (n) => this.onDelete(n));
    this.tailnet.on('online', (n) => this.onOnline(n));
    this.tailnet.on('dns', (settings) => this.onDns(settings));
    this.tailnet.on('user', (u) => {
      if (!u) return;
      for (const set of this.sessions.values()) for (const s of set) s.userProfiles([userProfile(u)]);
    });
    // The settings loaded with the tailnet (start() runs after tailnet.start()).
    this.ctx.dnsConfig = buildDnsConfig(this.tailnet.dns, this.cfg.baseDomain);
    this.timers.push(setInterval(() => void this.refreshPresence(), PRESENCE_REFRESH_MS).unref());
    this.timers.push(setInterval(() => this.checkExpiries(), EXPIRY_CHECK_MS).unref());
    // Ephemeral nodes left offline by a previous run are collected like ones that just disconnected.
    for (const n of this.tailnet.nodes.values()) if (n.ephemeral && !this.tailnet.online.has(n.id)) this.scheduleEphemeral(n);
  }

  private json(n: NodeRecord): string {
    let j = this.nodeJson.get(n.id);
    if (j === undefined) {
      j = JSON.stringify(toTailNode(this.ctx, n));
      this.nodeJson.set(n.id, j);
    }
    return j;
  }

  /** Opens a stream for `node`: full map now, deltas later. Resolves once the first message is written. */
  open(node: NodeRecord, res: Http2ServerResponse, compress: boolean): MapSession {
    const session = new MapSession(node.id, res, compress);
    let set = this.sessions.get(node.id);
    if (!set) {
      set = new Set();
      this.sessions.set(node.id, set);
    }
    set.add(session);
    session.onClose = () => this.closed(session);
    session.sendJson(this.fullMapJson(node));
    if (set.size === 1) void this.markOnline(node);
    return session;
  }

  /** The full map for `node` as JSON, with every peer's cached Node JSON spliced in. */
  fullMapJson(node: NodeRecord): string {
    const peers: NodeRecord[] = [];
    const peerJson: string[] = [];
    for (const p of this.tailnet.nodes.values()) {
      if (p.id === node.id) continue;
      peers.push(p);
      peerJson.push(this.json(p));
    }
    const { Peers: _omit, ...rest } = fullMap(this.ctx, node, peers, []);
    const head = JSON.stringify(rest);
    return `${head.slice(0, -1)},"Peers":[${peerJson.join(',')}]}`;
  }

  private closed(session: MapSession): void {
    const set = this.sessions.get(session.nodeId);
    if (!set) return;
    set.delete(session);
    if (set.size > 0) return;
    this.sessions.delete(session.nodeId);
    const node = this.tailnet.nodes.get(session.nodeId);
    if (node) void this.markOffline(node);
  }

  private async markOnline(node: NodeRecord): Promise<void> {
    const t = this.ephemeralTimers.get(node.id);
    if (t) {
      clearTimeout(t);
      this.ephemeralTimers.delete(node.id);
    }
    try {
      await this.store.touchPresence([node.id], this.instance, PRESENCE_TTL_MS);
      await this.store.publish({ kind: 'node.online', nodeId: node.id, online: true, lastSeen: new Date().toISOString() });
      this.log.info('node online', { node: node.givenName, id: node.id });
    } catch (e) {
      this.log.warn('could not record node online', { node: node.givenName, error: (e as Error).message });
    }
  }

  private async markOffline(node: NodeRecord): Promise<void> {
    const lastSeen = new Date().toISOString();
    try {
      await this.store.clearPresence(node.id);
      await this.store.setLastSeen(node.id, lastSeen);
      await this.store.publish({ kind: 'node.online', nodeId: node.id, online: false, lastSeen });
      this.log.info('node offline', { node: node.givenName, id: node.id });
    } catch (e) {
      this.log.warn('could not record node offline', { node: node.givenName, error: (e as Error).message });
    }
    if (node.ephemeral) this.scheduleEphemeral(node);
  }

  private scheduleEphemeral(node: NodeRecord): void {
    if (this.ephemeralTimers.has(node.id)) return;
    const t = setTimeout(() => {
      this.ephemeralTimers.delete(node.id);
      if (this.isConnectedHere(node.id) || this.tailnet.online.has(node.id)) return;
      this.store
        .deleteNode(node.id)
        .then(() => this.log.info('ephemeral node removed after disconnect', { node: node.givenName, id: node.id }))
        .catch((e: Error) => this.log.warn('could not remove ephemeral node', { node: node.givenName, error: e.message }));
    }, this.cfg.ephemeralTimeoutSeconds * 1000);
    t.unref();
    this.ephemeralTimers.set(node.id, t);
  }

  private async refreshPresence(): Promise<void> {
    try {
      await this.store.touchPresence([...this.sessions.keys()], this.instance, PRESENCE_TTL_MS);
    } catch (e) {
      this.log.warn('could not refresh presence', { error: (e as Error).message });
    }
  }

  /** Tells peers about keys that expired since the last check (nothing else changes when time passes). */
  private checkExpiries(): void {
    const now = Date.now();
    for (const n of this.tailnet.nodes.values()) {
      if (n.expiry === null) continue;
      const t = Date.parse(n.expiry);
      if (t > this.lastExpiryCheck && t <= now) this.onNode(n, n, true);
    }
    this.lastExpiryCheck = now;
  }

  private onNode(n: NodeRecord, prev: NodeRecord | undefined, full: boolean): void {
    this.nodeJson.delete(n.id);
    const newUser = !prev || prev.userId !== n.userId;
    const profiles = newUser ? profilesFor(this.ctx, [n]) : null;
    for (const [id, set] of this.sessions) {
      for (const s of set) {
        if (id === n.id) {
          // An expired node learns it from its own Node (KeyExpiry in the past) and asks its user to log in again.
          if (full) s.selfChanged(JSON.stringify(toTailNode(this.ctx, n)));
          continue;
        }
        if (profiles) s.userProfiles(profiles);
        if (full) s.peerChanged(n.id, this.json(n));
        else s.peerPatch(toPeerChange(this.ctx, n));
      }
    }
  }

  /** New DNS settings: one DNSConfig for everyone, sent whole (the client replaces its copy). */
  private onDns(settings: DnsSettings): void {
    this.ctx.dnsConfig = buildDnsConfig(settings, this.cfg.baseDomain);
    const json = JSON.stringify(this.ctx.dnsConfig);
    for (const set of this.sessions.values()) for (const s of set) s.dnsConfig(json);
    this.log.info('DNS settings sent to every stream', { streams: this.streamCount });
  }

  private onDelete(n: NodeRecord): void {
    this.nodeJson.delete(n.id);
    const t = this.ephemeralTimers.get(n.id);
    if (t) clearTimeout(t);
    this.ephemeralTimers.delete(n.id);
    for (const [id, set] of this.sessions) {
      for (const s of set) {
        if (id === n.id) s.close();
        else s.peerRemoved(n.id);
      }
    }
  }

  private onOnline(n: NodeRecord): void {
    this.nodeJson.delete(n.id);
    const online = this.tailnet.online.has(n.id);
    const patch = { NodeID: n.id, Online: online, ...(online || !n.lastSeen ? {} : { LastSeen: n.lastSeen }) };
    for (const [id, set] of this.sessions) if (id !== n.id) for (const s of set) s.peerPatch(patch);
  }

  /** Closes every stream (SIGTERM); clients reconnect to whichever instance answers next. */
  closeAll(): void {
    for (const t of this.timers) clearInterval(t);
    for (const set of this.sessions.values()) for (const s of [...set]) s.close();
  }
}
