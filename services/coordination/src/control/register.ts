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
import type { NodeRecord, PendingAuth, PreAuthKeyRecord, UserRecord } from '../../../../shared/model.ts';
import { isExpired } from '../map/map-builder.ts';
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
    const name = u?.name ?? `user-${node.userId}`;
    return {
      User: { ID: node.userId, DisplayName: u?.displayName ?? name },
      Login: { ID: node.userId, Provider: '', LoginName: name, DisplayName: u?.displayName ?? name },
      MachineAuthorized: !isExpired(node),
      NodeKeyExpired: isExpired(node),
    };
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
        this.activity('node.logout', byKey, clientIp, { ephemeral: true, removed: true });
        return { NodeKeyExpired: true, MachineAuthorized: false };
      }
      const n = await this.d.store.updateNode(byKey.id, (x) => ({ ...x, expiry: new Date(now).toISOString() }), true);
      this.activity('node.logout', byKey, clientIp, {});
      return this.authorized(n ?? byKey);
    }

    // Known node key, no new credentials: the client checks it is still logged in, or asks for an earlier expiry
    // (SetExpirySooner), which is granted; a later one is not (expiry is extended only by logging in again).
    if (byKey && !authKey) {
      if (!isExpired(byKey)) {
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
    return { AuthURL: authURL(this.d.cfg, pending.authId) };
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
      key = await this.d.store.usePreAuthKey(authKey);
    } catch (e) {
      if (e instanceof HseError) {
        this.d.log.warn('register refused', { reason: e.message, hostname: hostnameOf(req.Hostinfo), ip: clientIp });
        this.d.activity
          .record({ action: 'node.register_refused', actor: `device:${hostnameOf(req.Hostinfo)}`, ip: clientIp, details: { reason: e.message } })
          .catch((err: Error) => this.d.log.warn('could not write activity entry', { action: 'node.register_refused', error: err.message }));
        return { Error: e.message };
      }
      throw e;
    }
    const node = await this.upsertNode({
      machineKey,
      nodeKey,
      userId: key.userId,
      hostinfo: (req.Hostinfo as Record<string, unknown>) ?? null,
      hostname: hostnameOf(req.Hostinfo),
      requestedExpiry: expiry,
      ephemeral: key.ephemeral || req.Ephemeral === true,
      authKeyId: key.id,
      registeredBy: 'authkey',
    });
    this.activity('node.register', node, clientIp, { method: 'pre-auth key', keyPrefix: key.prefix, user: key.userId, ephemeral: node.ephemeral });
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
    },
  ): Promise<NodeRecord> {
    const { requestedExpiry, ...fields } = f;
    const existing = await this.d.store.getNodeByMachineKey(f.machineKey);
    if (existing) {
      const n = await this.d.store.updateNode(
        existing.id,
        (x) => ({ ...x, ...fields, expiry: keyExpiryAt(this.d.cfg, requestedExpiry, x.keyExpiryDisabled === true) }),
        true,
      );
      if (n) return n;
    }
    return this.d.store.createNode({
      ...fields,
      expiry: keyExpiryAt(this.d.cfg, requestedExpiry, false),
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
    if (decided.status === 'rejected') return { Error: 'an administrator rejected this device' };
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

  /** Operator approval of an interactive login (admin API): creates or re-keys the node and releases the client. */
  async approve(authId: string, userId: number, actor: string): Promise<NodeRecord> {
    const p = await this.d.store.getPending(authId);
    if (!p) throw new HseError(404, 'this login request is unknown or expired; run tailscale up again on the device');
    if (p.status !== 'pending') throw new HseError(409, `this login request was already ${p.status}`);
    if (!(await this.d.store.getUser(userId))) throw new HseError(404, `no user with id ${userId}`);
    const node = await this.upsertNode({
      machineKey: p.machineKey,
      nodeKey: p.nodeKey,
      userId,
      hostinfo: p.hostinfo,
      hostname: p.hostname,
      requestedExpiry: p.expiry ? new Date(p.expiry) : null,
      ephemeral: p.ephemeral,
      authKeyId: null,
      registeredBy: 'interactive',
    });
    await this.d.store.decidePending({ ...p, status: 'approved', nodeId: node.id, decidedBy: actor });
    return node;
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
