// POST /machine/register: what a client sends to log in, log out, rotate its node key or finish an interactive login.
// The machine key comes from the Noise handshake, never from the body; a node is bound to the machine key it first
// registered with, and a request over another machine key is refused. Order of cases follows the client's flows
// (tailscale control/controlclient direct.go): logout (past Expiry) → known node key → rotation (OldNodeKey) →
// follow-up of an AuthURL → pre-auth key → new interactive login.
import type { ActivityLog } from '../../../../shared/activity.ts';
import type { Config } from '../../../../shared/config.ts';
import { HseError } from '../../../../shared/errors.ts';
import { normaliseKey } from '../../../../shared/keys.ts';
import type { Logger } from '../../../../shared/log.ts';
import { redact } from '../../../../shared/log.ts';
import { isExpired, type NodeRecord, type PendingAuth, type PreAuthKeyRecord, type ProviderIdentity, type UserRecord } from '../../../../shared/model.ts';
import type { LivePolicy } from '../map/live-policy.ts';
import { profileOf } from '../map/map-builder.ts';
import { keyExpiryAt } from '../state/key-expiry.ts';
import type { Store } from '../state/store.ts';
import type { Tailnet } from '../state/tailnet.ts';
import { capVersionProblem } from '../tailcfg/capver.ts';
import { cleanHostinfo } from '../tailcfg/hostinfo.ts';
import { goTime, type Hostinfo, type RegisterRequest, type RegisterResponse } from '../tailcfg/tailcfg.ts';

/** How long a follow-up request is held before the client is told to ask again with the same URL. */
const FOLLOWUP_HOLD_MS = 120_000;

export interface RegisterDeps {
  cfg: Config;
  activity: ActivityLog;
  store: Store;
  /** The policy in force: who may own which tags (--advertise-tags). */
  policy: LivePolicy;
  tailnet: Tailnet;
  log: Logger;
}

export interface RegisterCall {
  req: RegisterRequest;
  machineKey: string;
  clientIp: string;
  /** Aborted when the client goes away while a follow-up is held. */
  signal: AbortSignal;
}

/** Hostinfo.RequestTags (`tailscale up --advertise-tags`), lowercased, sorted, each once. */
function requestedTags(h: Hostinfo | null | undefined): string[] {
  const raw = (h as { RequestTags?: unknown } | null | undefined)?.RequestTags;
  if (!Array.isArray(raw)) return [];
  return [...new Set(raw.filter((t): t is string => typeof t === 'string').map((t) => t.toLowerCase()))].sort();
}

function hostnameOf(h: Hostinfo | null | undefined): string {
  return typeof h?.Hostname === 'string' && h.Hostname.trim() !== '' ? h.Hostname.trim() : 'node';
}

export function authURL(cfg: Config, authId: string): string {
  return `${cfg.publicOrigin}/console/register/${authId}`;
}

/** The auth id at the end of an AuthURL we issued; null when the URL is not ours. */
export function authIdFromURL(cfg: Config, url: string): string | null {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return null;
  }
  const m = /^\/console\/register\/([A-Za-z0-9_-]{1,64})$/.exec(u.pathname);
  return u.origin === cfg.publicOrigin && m ? m[1] : null;
}

export class Registrar {
  private readonly d: RegisterDeps;
  constructor(deps: RegisterDeps) {
    this.d = deps;
  }

  private async userOf(node: { userId: number }): Promise<UserRecord | null> {
    return this.d.tailnet.users.get(node.userId) ?? (await this.d.store.getUser(node.userId));
  }

  private async authorized(node: NodeRecord): Promise<RegisterResponse> {
    const u = await this.userOf(node);
    // A tagged node is nobody's: it is told its own identity, as its map's self Node carries it (map-builder.ts).
    const users = u ? new Map([[u.id, u]]) : this.d.tailnet.users;
    const p = profileOf({ cfg: this.d.cfg, users }, node, true) ?? { ID: node.userId, LoginName: `user-${node.userId}`, DisplayName: `user-${node.userId}` };
    return {
      User: { ID: p.ID, DisplayName: p.DisplayName },
      Login: { ID: p.ID, Provider: '', LoginName: p.LoginName, DisplayName: p.DisplayName },
      MachineAuthorized: !isExpired(node),
      NodeKeyExpired: isExpired(node),
    };
  }

  /**
   * The tags a device asks for (`tailscale up --advertise-tags`, Hostinfo.RequestTags), checked against the policy:
   * each must be defined in tagOwners and owned by the user (or by a tag the node already has). Returns the sorted
   * tags, or the refusal the client prints ("backend error: …"), naming the tags.
   */
  private checkRequestedTags(requested: string[], userId: number, currentTags: string[] = []): { tags: string[] } | { error: string } {
    const tags = [...new Set(requested.map((t) => t.toLowerCase()))].sort();
    const policy = this.d.policy.policy;
    const refused = tags.filter((t) => !(policy.mayOwnTag(userId, t) || policy.tagsMayOwnTag(currentTags, t)));
    if (refused.length === 0) return { tags };
    const defined = policy.definedTags();
    const why = refused.map((t) => (defined.includes(t) ? `${t} (not owned by this user in tagOwners)` : `${t} (not defined in tagOwners)`));
    return { error: `requested tags [${refused.join(' ')}] are invalid or not permitted: ${why.join(', ')}` };
  }

  private activity(action: string, node: Pick<NodeRecord, 'givenName' | 'hostname'>, ip: string, details: Record<string, unknown>): void {
    this.d.activity
      .record({ action, actor: `device:${node.hostname}`, ip, target: node.givenName, details })
      .catch((e: Error) => this.d.log.warn('could not write activity entry', { action, error: e.message }));
  }

  async register(raw: RegisterCall): Promise<RegisterResponse> {
    if (typeof raw.req !== 'object' || raw.req === null) throw new HseError(400, 'register request must be a JSON object');
    // Hostinfo is stored and shown to every peer: only what their clients can decode (hostinfo.ts).
    const call: RegisterCall = { ...raw, req: { ...raw.req, Hostinfo: cleanHostinfo(raw.req.Hostinfo) } };
    const { req, machineKey, clientIp } = call;
    const versionProblem = capVersionProblem(req.Version);
    if (versionProblem) throw new HseError(400, versionProblem);
    const nodeKey = normaliseKey('nodekey', req.NodeKey);
    if (!nodeKey) throw new HseError(400, 'NodeKey is missing or not a nodekey:<hex> value');
    const oldNodeKey = req.OldNodeKey ? normaliseKey('nodekey', req.OldNodeKey) : null;
    const expiry = goTime(req.Expiry);
    const now = Date.now();
    const authKey = typeof req.Auth?.AuthKey === 'string' && req.Auth.AuthKey !== '' ? req.Auth.AuthKey : null;

    const byKey = await this.d.store.getNodeByNodeKey(nodeKey);
    if (byKey && byKey.machineKey !== machineKey) {
      this.d.log.warn('register refused: node key belongs to another machine', { nodeKey: redact(nodeKey, 16), ip: clientIp });
      return { Error: 'this node key is registered to a different machine' };
    }

    // Logout: a past expiry on a known node.
    if (expiry && expiry.getTime() <= now) {
      if (!byKey) return { NodeKeyExpired: true };
      if (byKey.ephemeral) {
        await this.d.store.deleteNode(byKey.id);
        this.activity('node.logout', byKey, clientIp, { ephemeral: true, removed: true, nodeId: byKey.stableId });
        return { NodeKeyExpired: true, MachineAuthorized: false };
      }
      const n = await this.d.store.updateNode(byKey.id, (x) => ({ ...x, expiry: new Date(now).toISOString() }), true);
      this.activity('node.logout', byKey, clientIp, {});
      return this.authorized(n ?? byKey);
    }

    // Known node key, no new credentials: the client checks it is still logged in, asks for an earlier expiry
    // (SetExpirySooner), which is granted (a later one is not: expiry is extended only by logging in again) — or,
    // after `tailscale up --advertise-tags=…` on a registered device, asks for tags (it logs in again when they change).
    if (byKey && !authKey) {
      if (!isExpired(byKey)) {
        const requested = requestedTags(req.Hostinfo);
        if (requested.length > 0 && requested.join() !== byKey.tags.join()) {
          const checked = this.checkRequestedTags(requested, byKey.userId, byKey.tags);
          if ('error' in checked) {
            this.refused(req, clientIp, checked.error);
            return { Error: checked.error };
          }
          // Owned by tags from now on: no key expiry, as Tailscale does for tagged nodes.
          const n = await this.d.store.updateNode(byKey.id, (x) => ({ ...x, tags: checked.tags, expiry: null }), true);
          this.activity('node.tags', byKey, clientIp, { from: byKey.tags, to: checked.tags, by: 'advertise-tags' });
          await this.updateHostinfo(n ?? byKey, req);
          return this.authorized(n ?? byKey);
        }
        await this.updateHostinfo(byKey, req);
        const sooner = expiry && !byKey.keyExpiryDisabled && (byKey.expiry === null || expiry.getTime() < Date.parse(byKey.expiry));
        if (sooner) {
          const n = await this.d.store.updateNode(byKey.id, (x) => ({ ...x, expiry: expiry.toISOString() }), true);
          this.activity('node.expiry_sooner', byKey, clientIp, { expiry: expiry.toISOString() });
          return this.authorized(n ?? byKey);
        }
        return this.authorized(byKey);
      }
      // An expired key: the client generates a new one and sends this one as OldNodeKey (direct.go doLogin), which
      // then needs new credentials (a pre-auth key, or an operator's approval) like a first login.
      return { NodeKeyExpired: true, MachineAuthorized: false };
    }

    // Node-key rotation: the old key proves who this is, the machine key must match. An expired old key proves
    // nothing: that is a re-login, which goes on below like any login and keeps the machine's id and addresses.
    if (oldNodeKey && !authKey && !byKey) {
      const old = await this.d.store.getNodeByNodeKey(oldNodeKey);
      if (old && old.machineKey === machineKey && !isExpired(old)) {
        const n = await this.d.store.updateNode(old.id, (x) => ({ ...x, nodeKey, hostinfo: req.Hostinfo ?? x.hostinfo }), true);
        this.activity('node.key_rotate', old, clientIp, {});
        this.d.log.info('node key rotated', { node: old.givenName, id: old.id });
        return this.authorized(n ?? old);
      }
    }

    if (req.Followup) return this.followup(call, nodeKey);

    if (authKey) return this.withAuthKey(call, nodeKey, authKey, expiry);

    const pending = await this.d.store.createPending({
      machineKey,
      nodeKey,
      hostname: hostnameOf(req.Hostinfo),
      hostinfo: (req.Hostinfo as Record<string, unknown>) ?? null,
      expiry: expiry ? expiry.toISOString() : null,
      ephemeral: req.Ephemeral === true,
      ip: clientIp,
    });
    this.d.log.info('device waiting for approval', { hostname: pending.hostname, ip: clientIp, url: authURL(this.d.cfg, pending.authId) });
    // In the activity log (and so to webhooks as nodeNeedsApproval) with the link that approves it.
    this.activity('node.login_pending', { givenName: pending.hostname, hostname: pending.hostname }, clientIp, { url: authURL(this.d.cfg, pending.authId) });
    return { AuthURL: authURL(this.d.cfg, pending.authId) };
  }

  /** A registration refused with a reason the client prints: in the log and the activity log. */
  private refused(req: RegisterRequest, clientIp: string, reason: string): void {
    this.d.log.warn('register refused', { reason, hostname: hostnameOf(req.Hostinfo), ip: clientIp });
    this.d.activity
      .record({ action: 'node.register_refused', actor: `device:${hostnameOf(req.Hostinfo)}`, ip: clientIp, details: { reason } })
      .catch((err: Error) => this.d.log.warn('could not write activity entry', { action: 'node.register_refused', error: err.message }));
  }

  private async updateHostinfo(node: NodeRecord, req: RegisterRequest): Promise<void> {
    if (!req.Hostinfo) return;
    const hostname = hostnameOf(req.Hostinfo);
    if (JSON.stringify(req.Hostinfo) === JSON.stringify(node.hostinfo)) return;
    await this.d.store.updateNode(node.id, (x) => ({ ...x, hostinfo: req.Hostinfo as Record<string, unknown>, hostname }), true);
  }

  private async withAuthKey(call: RegisterCall, nodeKey: string, authKey: string, expiry: Date | null): Promise<RegisterResponse> {
    const { req, machineKey, clientIp } = call;
    let key: PreAuthKeyRecord;
    try {
      key = await this.d.store.usePreAuthKey(authKey, machineKey);
    } catch (e) {
      if (e instanceof HseError) {
        this.refused(req, clientIp, e.message);
        return { Error: e.message };
      }
      throw e;
    }
    // A tagged key gives its tags (the device is then owned by them); an untagged key lets the device ask for tags its
    // user may own. A refusal gives a single-use key back, so the corrected `tailscale up` can still use it.
    const requested = requestedTags(req.Hostinfo);
    let tags = key.tags;
    if (tags.length === 0 && requested.length > 0) {
      const checked = this.checkRequestedTags(requested, key.userId);
      if ('error' in checked) {
        if (!key.reusable) await this.d.store.releasePreAuthKey(key.id);
        this.refused(req, clientIp, checked.error);
        return { Error: checked.error };
      }
      tags = checked.tags;
    }
    const node = await this.upsertNode({
      machineKey,
      nodeKey,
      tags,
      userId: key.userId,
      hostinfo: (req.Hostinfo as Record<string, unknown>) ?? null,
      hostname: hostnameOf(req.Hostinfo),
      requestedExpiry: expiry,
      ephemeral: key.ephemeral || req.Ephemeral === true,
      authKeyId: key.id,
      registeredBy: 'authkey',
    });
    this.activity('node.register', node, clientIp, {
      method: 'pre-auth key',
      keyPrefix: key.prefix,
      user: key.userId,
      ephemeral: node.ephemeral,
      nodeId: node.stableId,
      machineId: node.id,
    });
    this.d.log.info('node registered with pre-auth key', { node: node.givenName, id: node.id, ip: clientIp, key: key.prefix });
    return this.authorized(node);
  }

  /**
   * Creates the node, or — for a machine registered before (re-login after logout or expiry) — gives the existing
   * node its new key and owner while keeping its id, addresses and name. The key's expiry starts afresh
   * (state/key-expiry.ts), unless an operator disabled expiry for this machine.
   */
  async upsertNode(
    f: Pick<NodeRecord, 'machineKey' | 'nodeKey' | 'userId' | 'hostinfo' | 'hostname' | 'ephemeral' | 'authKeyId' | 'registeredBy'> & {
      requestedExpiry: Date | null;
      /** The node's tags; undefined keeps a re-registering node's tags as they are. */
      tags?: string[];
    },
  ): Promise<NodeRecord> {
    const { requestedExpiry, tags, ...fields } = f;
    const existing = await this.d.store.getNodeByMachineKey(f.machineKey);
    if (existing) {
      const n = await this.d.store.updateNode(
        existing.id,
        (x) => {
          const nodeTags = tags ?? x.tags;
          // A node owned by tags has no key expiry (as Tailscale): it is nobody's to log in again.
          return { ...x, ...fields, tags: nodeTags, expiry: keyExpiryAt(this.d.cfg, requestedExpiry, x.keyExpiryDisabled === true || nodeTags.length > 0) };
        },
        true,
      );
      if (n) return n;
    }
    return this.d.store.createNode({
      ...fields,
      tags: tags ?? [],
      approvedRoutes: [],
      expiry: keyExpiryAt(this.d.cfg, requestedExpiry, (tags ?? []).length > 0),
      discoKey: '',
      endpoints: [],
      homeDerp: 0,
      capVersion: 0,
    });
  }

  /** Holds a follow-up until the operator approves or rejects, or FOLLOWUP_HOLD_MS pass (the client then asks again). */
  private async followup(call: RegisterCall, nodeKey: string): Promise<RegisterResponse> {
    const authId = authIdFromURL(this.d.cfg, call.req.Followup ?? '');
    const pending = authId ? await this.d.store.getPending(authId) : null;
    if (!pending || pending.machineKey !== call.machineKey || pending.nodeKey !== nodeKey) {
      // Unknown or expired URL: start over with a fresh one rather than leaving the client stuck.
      return this.register({ ...call, req: { ...call.req, Followup: undefined } });
    }
    const decided = await this.waitForDecision(pending.authId, call.signal);
    if (!decided || decided.status === 'pending') return { AuthURL: authURL(this.d.cfg, pending.authId) };
    if (decided.status === 'rejected') return { Error: decided.reason ?? 'an administrator rejected this device' };
    const node = decided.nodeId ? await this.d.store.getNode(decided.nodeId) : null;
    if (!node) return { Error: 'the approved machine was removed before it could log in; run tailscale up again' };
    return this.authorized(node);
  }

  private async waitForDecision(authId: string, signal: AbortSignal): Promise<PendingAuth | null> {
    const deadline = Date.now() + FOLLOWUP_HOLD_MS;
    while (!signal.aborted && Date.now() < deadline) {
      const p = await this.d.store.getPending(authId);
      if (p?.status !== 'pending') return p;
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          this.d.tailnet.off('pending', onPending);
          signal.removeEventListener('abort', done);
          resolve();
        };
        const onPending = (id: string) => {
          if (id === authId) done();
        };
        // Re-check now and then in case the change event was missed (Redis reconnect).
        const timer = setTimeout(done, 5000);
        this.d.tailnet.on('pending', onPending);
        signal.addEventListener('abort', done, { once: true });
      });
    }
    return null;
  }

  /** The waiting registration, refused with a message for the person when it is unknown or already decided. */
  private async openPending(authId: string): Promise<PendingAuth> {
    const p = await this.d.store.getPending(authId);
    if (!p) throw new HseError(404, 'this login request is unknown or expired; run tailscale up again on the device');
    if (p.status !== 'pending') throw new HseError(409, `this login request was already ${p.status}`);
    return p;
  }

  /** Creates or re-keys the node of a waiting registration for `userId` and releases the client's held follow-up. */
  private async admit(p: PendingAuth, userId: number, registeredBy: NodeRecord['registeredBy'], decidedBy: string): Promise<NodeRecord> {
    // Tags the device asked for must be the admitting user's to give; otherwise the device is told why.
    const requested = requestedTags(p.hostinfo as Hostinfo | null);
    let tags: string[] | undefined;
    if (requested.length > 0) {
      const checked = this.checkRequestedTags(requested, userId);
      if ('error' in checked) {
        await this.d.store.decidePending({ ...p, status: 'rejected', decidedBy, reason: checked.error });
        throw new HseError(
          403,
          `${checked.error}; the device was told so (it must run tailscale up again without those tags, or a user who owns them must approve it)`,
        );
      }
      tags = checked.tags;
    }
    const node = await this.upsertNode({
      tags,
      machineKey: p.machineKey,
      nodeKey: p.nodeKey,
      userId,
      hostinfo: p.hostinfo,
      hostname: p.hostname,
      requestedExpiry: p.expiry ? new Date(p.expiry) : null,
      ephemeral: p.ephemeral,
      authKeyId: null,
      registeredBy,
    });
    await this.d.store.decidePending({ ...p, status: 'approved', nodeId: node.id, decidedBy });
    return node;
  }

  /**
   * Operator approval of an interactive login (admin API). With an identity provider configured, devices join by
   * their owner signing in there, and approving by hand is the fallback an administrator switches on
   * (HSE_OIDC_OPERATOR_APPROVAL).
   */
  async approve(authId: string, userId: number, actor: string): Promise<NodeRecord> {
    const oidc = this.d.cfg.oidc;
    if (oidc && !oidc.operatorApproval) {
      throw new HseError(
        409,
        `devices join by their owner signing in with ${oidc.displayName}, so approving by hand is switched off; the owner opens the device's login link, or an administrator sets HSE_OIDC_OPERATOR_APPROVAL=on`,
      );
    }
    const p = await this.openPending(authId);
    if (!(await this.d.store.getUser(userId))) throw new HseError(404, `no user with id ${userId}`);
    return this.admit(p, userId, 'interactive', actor);
  }

  /**
   * Someone signed in with the identity provider from the device's login link (the console checked they may): the
   * device becomes theirs, their user made at the first sign-in and its profile and groups refreshed at each.
   */
  async signInDevice(authId: string, identity: ProviderIdentity): Promise<{ node: NodeRecord; user: UserRecord; userCreated: boolean }> {
    if (!this.d.cfg.oidc) throw new HseError(409, 'no identity provider is configured (HSE_OIDC_ISSUER)');
    const p = await this.openPending(authId);
    const { user, created } = await this.d.store.signInUser(identity);
    const node = await this.admit(p, user.id, 'identity-provider', user.name);
    return { node, user, userCreated: created };
  }

  async reject(authId: string, actor: string): Promise<PendingAuth> {
    const p = await this.d.store.getPending(authId);
    if (!p) throw new HseError(404, 'this login request is unknown or expired');
    if (p.status !== 'pending') throw new HseError(409, `this login request was already ${p.status}`);
    const next: PendingAuth = { ...p, status: 'rejected', decidedBy: actor };
    await this.d.store.decidePending(next);
    return next;
  }
}
