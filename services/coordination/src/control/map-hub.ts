// Fan-out of tailnet changes to the open map streams of this process, each stream getting the delta of its own view.
//
// A stream's view is what the compiled policy gives its node (map/live-policy.ts): its peers, its PacketFilter, its
// SSH policy, its own CapMap, and per router the routes it may use. The hub remembers, per stream, the digest of the
// view it last sent and the peers it sent; when the policy is recompiled (the policy or the tailnet changed) only
// streams whose digest changed get a message — the peers that appeared (PeersChanged), disappeared (PeersRemoved) or
// whose routes for this viewer changed, and the new filter or SSH policy — and streams not affected get nothing.
// Changes that do not touch the policy (Hostinfo, endpoints, online state) go only to the streams that have that node
// as a peer. Each peer's Node JSON is built once per change and per distinct set of routes shown, and spliced into
// every stream's message.
//
// Online/offline, primary-route failover, ephemeral clean-up and key expiry are driven here because they follow from
// streams opening, closing and time passing.
import type { Http2ServerResponse } from 'node:http2';
import type { Config } from '../../../../shared/config.ts';
import type { DnsSettings } from '../../../../shared/dns-settings.ts';
import { statusOf } from '../../../../shared/errors.ts';
import type { Logger } from '../../../../shared/log.ts';
import type { NodeRecord, UserRecord } from '../../../../shared/model.ts';
import { buildDerpMap } from '../map/derp-map.ts';
import type { LivePolicy } from '../map/live-policy.ts';
import { fullMapHead, type MapContext, type NodeRoutes, profileOf, profilesFor, toPeerChange, toTailNode, userProfile } from '../map/map-builder.ts';
import { effectiveRoutes, isExitNode, isExitPrefix, PrimaryRoutes } from '../map/routes.ts';
import type { CompiledPolicy, ViewDigest } from '../policy/index.ts';
import { PRESENCE_REFRESH_MS, PRESENCE_TTL_MS } from '../state/housekeeping.ts';
import { buildDnsConfig } from '../map/dns-config.ts';
import type { Store } from '../state/store.ts';
import type { Tailnet } from '../state/tailnet.ts';
import { MapSession } from './map-session.ts';
import type { ActivityLog } from '../../../../shared/activity.ts';
import { PeerViewers, SentPeers } from './sent-peers.ts';

const EXPIRY_CHECK_MS = 15_000;
/**
 * A node that registered a moment ago may not be in the compiled policy yet (the change channel and the batched
 * compile lag it, more so on a loaded machine); its first map waits for it, saying so in the log every this long.
 */
const POLICY_WAIT_MS = 5_000;

/**
 * What a map built for a node the compiled policy does not contain carries (a safety net: streams and one-shot maps
 * wait in untilPolicyKnows first): no peers, no packet allowed in (an empty PacketFilter denies all), no SSH, no
 * capabilities. Its stream's view is recorded as unknown, so the next compile sends it the whole real view
 * (onCompiled). The compiled policy itself refuses to answer for a node it does not contain.
 */
const UNKNOWN_NODE_VIEW: Pick<CompiledPolicy, 'filterFor' | 'sshPolicyFor'> = { filterFor: () => [], sshPolicyFor: () => null };

/** A peer's Node as one viewer sees it: JSON for deltas, and the same as UTF-8 bytes once a full map needed them. */
interface PeerJson {
  json: string;
  bytes: Buffer | null;
}

const COMMA = Buffer.from(',');
const CLOSING = Buffer.from(']}');

/** What a stream was last sent: the view digest, and for each peer the routes key of the Node sent. */
interface SentView {
  digest: ViewDigest | null;
  peers: SentPeers;
  /** The peers whose Node went out with routes (a key other than ""): a change of routes alone concerns only them and routers. */
  routed: Set<number>;
}

function newView(session: MapSession, viewers: PeerViewers): SentView {
  return { digest: null, peers: new SentPeers(session, viewers), routed: new Set() };
}

/** Records the routes key of the peer's Node as sent. */
function remember(view: SentView, id: number, key: string): void {
  view.peers.set(id, key);
  if (key === '') view.routed.delete(id);
  else view.routed.add(id);
}

function forget(view: SentView, id: number): boolean {
  view.routed.delete(id);
  return view.peers.delete(id);
}

export interface MapHubDeps {
  cfg: Config;
  tailnet: Tailnet;
  store: Store;
  policy: LivePolicy;
  log: Logger;
  /** This process's id in presence entries. */
  instance: string;
  /** Where an ephemeral node's removal is recorded (and so reaches webhooks as nodeDeleted). */
  activity?: ActivityLog;
}

export class MapHub {
  private readonly sessions = new Map<number, Set<MapSession>>();
  private readonly sent = new WeakMap<MapSession, SentView>();
  /** For each node, the streams that have it among their sent peers (kept by SentPeers). */
  private readonly viewers = new PeerViewers();
  /** Peer Node JSON by node id, then by the routes shown (most nodes have one entry: no routes). */
  private readonly nodeJson = new Map<number, Map<string, PeerJson>>();
  private readonly ephemeralTimers = new Map<number, NodeJS.Timeout>();
  private readonly timers: NodeJS.Timeout[] = [];
  private readonly primaries = new PrimaryRoutes();
  private readonly ctx: MapContext;
  private readonly d: MapHubDeps;
  private lastExpiryCheck = Date.now();

  constructor(d: MapHubDeps) {
    this.d = d;
    this.ctx = {
      cfg: d.cfg,
      derpMap: buildDerpMap(d.cfg),
      dnsConfig: buildDnsConfig(d.tailnet.dns, d.cfg.baseDomain),
      users: d.tailnet.users,
      online: d.tailnet.online,
    };
  }

  private get tailnet(): Tailnet {
    return this.d.tailnet;
  }

  private get policy(): CompiledPolicy {
    return this.d.policy.policy;
  }

  get streamCount(): number {
    let n = 0;
    for (const s of this.sessions.values()) n += s.size;
    return n;
  }

  isConnectedHere(nodeId: number): boolean {
    return (this.sessions.get(nodeId)?.size ?? 0) > 0;
  }

  /** The prefixes the node is primary router for (console, admin API). */
  primaryRoutesOf(nodeId: number): string[] {
    return this.primaries.of(nodeId);
  }

  start(): void {
    this.primaries.update(this.tailnet.nodes.values(), this.tailnet.online);
    this.tailnet.on('node', (n, prev, full) => this.onNode(n, prev, full));
    this.tailnet.on('delete', (n) => this.onDelete(n));
    this.tailnet.on('online', (n) => this.onOnline(n));
    this.tailnet.on('user', (u) => this.onUser(u));
    this.d.policy.on('compiled', (p) => this.onCompiled(p));
    this.tailnet.on('dns', (settings) => this.onDns(settings));
    // The settings loaded with the tailnet (start() runs after tailnet.start()).
    this.ctx.dnsConfig = buildDnsConfig(this.tailnet.dns, this.d.cfg.baseDomain);
    this.timers.push(setInterval(() => void this.refreshPresence(), PRESENCE_REFRESH_MS).unref());
    // After a Redis outage, renew at once: entries may have run out meanwhile, and the housekeeping sweep must find
    // the nodes this instance still serves renewed before it looks (state/housekeeping.ts).
    this.d.store.redis.on('ready', () => void this.refreshPresence());
    this.timers.push(setInterval(() => this.checkExpiries(), EXPIRY_CHECK_MS).unref());
    // Ephemeral nodes left offline by a previous run are collected like ones that just disconnected.
    for (const n of this.tailnet.nodes.values()) if (n.ephemeral && !this.tailnet.online.has(n.id)) this.scheduleEphemeral(n);
  }

  // ---- building views --------------------------------------------------------------------------------------------

  /** The routes of `router` that `viewer` gets in the router's Node: usable by the viewer, and primary (subnets). */
  private routesFor(viewerId: number, router: NodeRecord): NodeRoutes {
    if (router.approvedRoutes.length === 0 || effectiveRoutes(router).length === 0) return { allowed: [], primary: [] };
    // A router (or viewer) the compiled policy has not seen yet gets its routes with the next compile.
    if (!this.d.policy.knows(viewerId) || !this.d.policy.knows(router.id)) return { allowed: [], primary: [] };
    const exit = isExitNode(router);
    const allowed = this.policy.routesFor(viewerId, router.id).filter((p) => (isExitPrefix(p) ? exit : this.primaries.isPrimary(router.id, p)));
    return { allowed, primary: allowed.filter((p) => !isExitPrefix(p)) };
  }

  /** The peer's Node JSON as `viewerId` sees it (cached), and the key of its routes (to tell when that view changes). */
  private peerEntry(viewerId: number, peer: NodeRecord): { entry: PeerJson; key: string } {
    const routes = this.routesFor(viewerId, peer);
    const key = routes.allowed.join(',');
    let variants = this.nodeJson.get(peer.id);
    if (!variants) {
      variants = new Map();
      this.nodeJson.set(peer.id, variants);
    }
    let entry = variants.get(key);
    if (entry === undefined) {
      entry = { json: JSON.stringify(toTailNode(this.ctx, peer, routes)), bytes: null };
      variants.set(key, entry);
    }
    return { entry, key };
  }

  private peerJson(viewerId: number, peer: NodeRecord): { json: string; key: string } {
    const { entry, key } = this.peerEntry(viewerId, peer);
    return { json: entry.json, key };
  }

  private forgetJson(nodeId: number): void {
    this.nodeJson.delete(nodeId);
  }

  /** The node as it sees itself: all its routes in effect, the ones it is primary for, its CapMap. */
  private selfJson(n: NodeRecord): string {
    const capMap = this.d.policy.knows(n.id) ? this.policy.capMapFor(n.id) : {};
    const self = toTailNode(this.ctx, n, { allowed: effectiveRoutes(n), primary: this.primaries.of(n.id) }, { capMap });
    return JSON.stringify(self);
  }

  private visiblePeers(viewerId: number): NodeRecord[] {
    const out: NodeRecord[] = [];
    for (const id of this.policy.peersOf(viewerId)) {
      const p = this.tailnet.nodes.get(id);
      if (p && id !== viewerId) out.push(p);
    }
    return out;
  }

  /**
   * The full map for `node` as UTF-8 JSON, with every visible peer's cached Node JSON spliced in as bytes; records
   * what was sent. (Joining the peers' strings and encoding the result cost a third of the coordination's CPU while
   * 2,000 nodes fetched their full maps: the joined text is a rope V8 must flatten, then encode whole, for every map.)
   */
  private fullMapFor(node: NodeRecord, view: SentView | null): Buffer {
    const known = this.d.policy.knows(node.id);
    const policy = this.policy;
    const peers = known ? this.visiblePeers(node.id) : [];
    const parts: Buffer[] = [];
    let length = 0;
    for (const p of peers) {
      const { entry, key } = this.peerEntry(node.id, p);
      entry.bytes ??= Buffer.from(entry.json);
      if (parts.length > 0) parts.push(COMMA);
      parts.push(entry.bytes);
      length += entry.bytes.length;
      if (view) remember(view, p.id, key);
    }
    if (view) view.digest = known ? policy.viewDigest(node.id) : null;
    const self = JSON.parse(this.selfJson(node));
    const head = JSON.stringify(fullMapHead(this.ctx, self, known ? policy : UNKNOWN_NODE_VIEW, node, profilesFor(this.ctx, node, peers)));
    const opening = Buffer.from(`${head.slice(0, -1)},"Peers":[`);
    return Buffer.concat([opening, ...parts, CLOSING], opening.length + length + Math.max(0, peers.length - 1) + CLOSING.length);
  }

  /**
   * Waits until the compiled policy includes the node, as long as `alive()` holds. A map built before then would have
   * no filter and no peers for it (the policy cannot answer for a node it has not seen).
   */
  private async untilPolicyKnows(node: NodeRecord, alive: () => boolean): Promise<boolean> {
    const started = Date.now();
    while (!this.d.policy.knows(node.id)) {
      if (!alive()) return false;
      await this.d.policy.ready(node.id, POLICY_WAIT_MS);
      if (!this.d.policy.knows(node.id) && alive()) {
        const missing = !this.tailnet.nodes.has(node.id);
        this.d.log.warn('waiting for the policy to include a new node before its first map', {
          node: node.givenName,
          id: node.id,
          waitedMs: Date.now() - started,
          ...(missing ? { reloading: "the node is in the store but not in this instance's view of the tailnet" } : {}),
        });
        // The change that announced it never reached this instance: reload, and the policy compiles with it.
        if (missing) this.tailnet.resyncSoon();
      }
    }
    return alive();
  }

  /** The full map for a one-shot (non-streaming) map request, as UTF-8 JSON. */
  async fullMapJson(node: NodeRecord, alive: () => boolean = () => true): Promise<Buffer | null> {
    if (!(await this.untilPolicyKnows(node, alive))) return null;
    return this.fullMapFor(node, null);
  }

  // ---- streams ---------------------------------------------------------------------------------------------------

  /** Opens a stream for `node`: full map once the policy includes the node, deltas later. */
  async open(node: NodeRecord, res: Http2ServerResponse, compress: boolean): Promise<MapSession> {
    const session = new MapSession(node.id, res, compress);
    let set = this.sessions.get(node.id);
    if (!set) {
      set = new Set();
      this.sessions.set(node.id, set);
    }
    set.add(session);
    session.onClose = () => this.closed(session);
    if (set.size === 1) void this.markOnline(node);
    if (!(await this.untilPolicyKnows(node, () => !session.isClosed))) return session;
    const view = newView(session, this.viewers);
    this.sent.set(session, view);
    session.sendJsonBytes(this.fullMapFor(this.tailnet.nodes.get(node.id) ?? node, view));
    return session;
  }

  private closed(session: MapSession): void {
    this.sent.get(session)?.peers.clear();
    const set = this.sessions.get(session.nodeId);
    if (!set) return;
    set.delete(session);
    if (set.size > 0) return;
    this.sessions.delete(session.nodeId);
    const node = this.tailnet.nodes.get(session.nodeId);
    if (node) void this.markOffline(node);
  }

  /** The node's own streams that have had their full map. */
  private *selfStreams(nodeId: number): Generator<MapSession> {
    for (const s of this.sessions.get(nodeId) ?? []) if (this.sent.has(s)) yield s;
  }

  /** The streams that have `nodeId` among their sent peers, with what they were sent. */
  private *viewersOf(nodeId: number): Generator<[MapSession, SentView]> {
    for (const s of this.viewers.of(nodeId)) {
      const v = this.sent.get(s);
      if (v && !s.isClosed) yield [s, v];
    }
  }

  /** Every open stream with what it was sent (streams still waiting for their full map are skipped). */
  private *streams(): Generator<[MapSession, SentView]> {
    for (const set of this.sessions.values()) {
      for (const s of set) {
        const v = this.sent.get(s);
        if (v) yield [s, v];
      }
    }
  }

  // ---- reacting to changes ---------------------------------------------------------------------------------------

  /** The policy was recompiled: each stream whose view changed gets the difference. */
  private onCompiled(policy: CompiledPolicy): void {
    let routers: number[] | null = null;
    for (const [s, view] of this.streams()) {
      const id = s.nodeId;
      const node = this.tailnet.nodes.get(id);
      if (!node || !this.d.policy.knows(id)) continue;
      const d = policy.viewDigest(id);
      const before = view.digest;
      if (before && d.all === before.all) continue;
      if (!before || d.filter !== before.filter) s.packetFilter(policy.filterFor(id));
      if (!before || d.ssh !== before.ssh) s.sshPolicy(policy.sshPolicyFor(id) ?? { rules: [] });
      if (!before || d.caps !== before.caps) s.selfChanged(this.selfJson(node));
      if (!before || d.peers !== before.peers) this.resendPeers(s, view, node);
      if (!before || d.routes !== before.routes) {
        routers ??= this.routerIds();
        this.resendRoutes(s, view, node, routers);
      }
      view.digest = d;
    }
  }

  /**
   * Brings a stream's peers in line with the policy: the ones that appeared and the ones that went (routes of the
   * peers it keeps are resendRoutes's). A node joining changes the peers of every stream that may see it, and with
   * everyone allowed to reach everyone that is every stream: so the common case, peers only added, costs one lookup
   * per peer, and the set of visible peers is built only when some sent peer is no longer among them. (Building every
   * peer's Node again instead made one join cost 2,000 streams × 2,000 peers of Node lookups: join → stream p99
   * 953 ms at 2,000 nodes.)
   */
  private resendPeers(s: MapSession, view: SentView, viewer: NodeRecord): void {
    const nodes = this.tailnet.nodes;
    const ids = this.policy.peersOf(viewer.id);
    const added: NodeRecord[] = [];
    let kept = 0;
    for (const id of ids) {
      if (id === viewer.id) continue;
      if (view.peers.has(id)) {
        if (nodes.has(id)) kept++;
        continue;
      }
      const p = nodes.get(id);
      if (!p) continue;
      const { json, key } = this.peerJson(viewer.id, p);
      remember(view, id, key);
      added.push(p);
      s.peerChanged(id, json);
    }
    if (kept + added.length < view.peers.size) {
      const visible = new Set(ids);
      for (const id of [...view.peers.keys()]) {
        if (visible.has(id) && id !== viewer.id && nodes.has(id)) continue;
        forget(view, id);
        s.peerRemoved(id);
      }
    }
    if (added.length > 0) s.userProfiles(profilesFor(this.ctx, null, added));
  }

  /**
   * The routes the viewer may use changed: among the peers it was sent, only routers and peers last sent with routes
   * can look different. (Going through every peer instead cost a tailnet of 2,000 streams 4 million Node lookups per
   * compile, most of the time the event loop was blocked while routers were being approved.)
   */
  private resendRoutes(s: MapSession, view: SentView, viewer: NodeRecord, routers: readonly number[]): void {
    for (const id of new Set([...routers, ...view.routed])) {
      if (id === viewer.id || !view.peers.has(id)) continue;
      const p = this.tailnet.nodes.get(id);
      if (!p) continue;
      const { json, key } = this.peerJson(viewer.id, p);
      if (view.peers.get(id) === key) continue;
      remember(view, id, key);
      s.peerChanged(id, json);
    }
  }

  /** Nodes with routes in effect. */
  private routerIds(): number[] {
    const out: number[] = [];
    for (const n of this.tailnet.nodes.values()) if (effectiveRoutes(n).length > 0) out.push(n.id);
    return out;
  }

  /** Routers whose primary set changed get their Node resent to every stream that sees them. */
  private electPrimaries(): void {
    const changed = this.primaries.update(this.tailnet.nodes.values(), this.tailnet.online);
    if (changed.size === 0) return;
    this.d.log.info('primary routes changed', {
      routers: [...changed].join(','),
      now: JSON.stringify(Object.fromEntries([...changed].map((id) => [id, this.primaries.of(id)]))),
    });
    for (const id of changed) this.forgetJson(id);
    for (const id of changed) {
      const r = this.tailnet.nodes.get(id);
      if (!r) continue;
      for (const s of this.selfStreams(id)) s.selfChanged(this.selfJson(r));
      for (const [s, view] of this.viewersOf(id)) {
        const { json, key } = this.peerJson(s.nodeId, r);
        if (view.peers.get(id) === key) continue;
        remember(view, id, key);
        s.peerChanged(id, json);
      }
    }
  }

  private onNode(n: NodeRecord, prev: NodeRecord | undefined, full: boolean): void {
    this.forgetJson(n.id);
    const newOwner = prev !== undefined && (prev.userId !== n.userId || prev.tags.join() !== n.tags.join());
    const profile = newOwner ? profileOf(this.ctx, n, false) : null;
    // An expired node learns it from its own Node (KeyExpiry in the past) and asks its user to log in again.
    if (full) for (const s of this.selfStreams(n.id)) s.selfChanged(this.selfJson(n));
    // New endpoints of a node that is offline wait for its "online" patch, which carries them (onOnline): a node
    // connecting sends its map request (new endpoints) just before its stream marks it online, and two patches per
    // connecting node to each of its peers doubled the messages of a network coming online.
    if (!full && !this.tailnet.online.has(n.id)) return;
    const patch = full ? null : toPeerChange(this.ctx, n);
    for (const [s, view] of this.viewersOf(n.id)) {
      if (profile) s.userProfiles([profile]);
      if (patch) s.peerPatch(patch);
      else {
        const { json, key } = this.peerJson(s.nodeId, n);
        remember(view, n.id, key);
        s.peerChanged(n.id, json);
      }
    }
    // Routes advertised or approved may have changed (the policy recompiles on its own when they did).
    if (full && (prev === undefined || effectiveRoutes(prev).join() !== effectiveRoutes(n).join())) this.electPrimaries();
  }

  private onDelete(n: NodeRecord): void {
    this.forgetJson(n.id);
    const t = this.ephemeralTimers.get(n.id);
    if (t) clearTimeout(t);
    this.ephemeralTimers.delete(n.id);
    for (const [s, view] of this.viewersOf(n.id)) {
      if (forget(view, n.id)) s.peerRemoved(n.id);
    }
    for (const s of [...(this.sessions.get(n.id) ?? [])]) s.close();
    this.electPrimaries();
  }

  private onOnline(n: NodeRecord): void {
    this.forgetJson(n.id);
    const online = this.tailnet.online.has(n.id);
    // Coming online, the patch carries the endpoints, disco key and home DERP too (onNode held them back).
    const patch = online ? toPeerChange(this.ctx, n) : { NodeID: n.id, Online: false, ...(n.lastSeen ? { LastSeen: n.lastSeen } : {}) };
    for (const [s] of this.viewersOf(n.id)) s.peerPatch(patch);
    if (effectiveRoutes(n).length > 0) this.electPrimaries();
  }

  private onUser(u: UserRecord | undefined): void {
    if (!u) return;
    const p = userProfile(u);
    for (const [s] of this.streams()) s.userProfiles([p]);
  }

  // ---- presence, ephemeral nodes, expiry --------------------------------------------------------------------------

  private async markOnline(node: NodeRecord): Promise<void> {
    const t = this.ephemeralTimers.get(node.id);
    if (t) {
      clearTimeout(t);
      this.ephemeralTimers.delete(node.id);
    }
    try {
      await this.d.store.presence.touch([node.id], this.d.instance, PRESENCE_TTL_MS);
      await this.d.store.publish({ kind: 'node.online', nodeId: node.id, online: true, lastSeen: new Date().toISOString() });
      this.d.log.info('node online', { node: node.givenName, id: node.id });
    } catch (e) {
      this.d.log.warn('could not record node online', { node: node.givenName, error: (e as Error).message });
    }
  }

  private async markOffline(node: NodeRecord): Promise<void> {
    const lastSeen = new Date().toISOString();
    try {
      // The node may have reconnected to another instance before this one saw its old stream close: then it is
      // still online, and saying otherwise would show it offline everywhere until its next reconnect.
      const elsewhere = await this.d.store.presence.release(node.id, this.d.instance);
      if (elsewhere > 0) {
        this.d.log.info('stream closed here; the node is connected to another instance', { node: node.givenName, id: node.id });
        return;
      }
      await this.d.store.setLastSeen(node.id, lastSeen);
      await this.d.store.publish({ kind: 'node.online', nodeId: node.id, online: false, lastSeen });
      this.d.log.info('node offline', { node: node.givenName, id: node.id });
    } catch (e) {
      this.d.log.warn('could not record node offline', { node: node.givenName, error: (e as Error).message });
    }
    if (node.ephemeral) this.scheduleEphemeral(node);
  }

  private scheduleEphemeral(node: NodeRecord): void {
    if (this.ephemeralTimers.has(node.id)) return;
    const t = setTimeout(() => {
      this.ephemeralTimers.delete(node.id);
      if (this.isConnectedHere(node.id) || this.tailnet.online.has(node.id)) return;
      this.d.store
        .deleteNode(node.id)
        .then(() => {
          this.d.log.info('ephemeral node removed after disconnect', { node: node.givenName, id: node.id });
          return this.d.activity?.record({
            action: 'node.delete',
            actor: 'system',
            ip: '',
            target: node.givenName,
            details: { ephemeral: true, nodeId: node.stableId },
          });
        })
        .catch((e: Error) => {
          // Another instance (or the housekeeping sweep) removed it first.
          if (statusOf(e) === 404) this.d.log.debug('ephemeral node already removed', { node: node.givenName, id: node.id });
          else this.d.log.warn('could not remove ephemeral node', { node: node.givenName, error: e.message });
        });
    }, this.d.cfg.ephemeralTimeoutSeconds * 1000);
    t.unref();
    this.ephemeralTimers.set(node.id, t);
  }

  private async refreshPresence(): Promise<void> {
    try {
      await this.d.store.presence.touch([...this.sessions.keys()], this.d.instance, PRESENCE_TTL_MS);
    } catch (e) {
      this.d.log.warn('could not refresh presence', { error: (e as Error).message });
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

  /** New DNS settings: one DNSConfig for everyone, sent whole (the client replaces its copy). */
  private onDns(settings: DnsSettings): void {
    this.ctx.dnsConfig = buildDnsConfig(settings, this.d.cfg.baseDomain);
    const json = JSON.stringify(this.ctx.dnsConfig);
    for (const set of this.sessions.values()) for (const s of set) s.dnsConfig(json);
    this.d.log.info('DNS settings sent to every stream', { streams: this.streamCount });
  }

  /** Closes every stream (SIGTERM); clients reconnect to whichever instance answers next. */
  closeAll(): void {
    for (const t of this.timers) clearInterval(t);
    for (const set of this.sessions.values()) for (const s of [...set]) s.close();
  }
}
