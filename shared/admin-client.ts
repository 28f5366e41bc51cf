// Client of the coordination service's admin API (services/coordination/src/admin/admin-server.ts), used by the
// console and the `hse` CLI. Every call says who acts and from which client address, for the activity log.
import * as nodeHttp from './node-http.ts';
import type { DnsSettings } from './dns-settings.ts';
import { HseError } from './errors.ts';
import type {
  ApiKeyView,
  NodeView,
  PendingAuth,
  PolicyVersion,
  PreAuthKeyView,
  ProviderIdentity,
  Reacher,
  RouteView,
  UserRecord,
  WebhookDelivery,
  WebhookEndpoint,
  WebhookEventType,
} from './model.ts';

/** A webhook endpoint as listed: everything but its signing secret (shown once, when made). */
export type WebhookEndpointView = Omit<WebhookEndpoint, 'secret'>;

/** The coordination service's answer to a refused admin call: its status, its words, and any structured details. */
export class AdminError extends HseError {}

export interface Actor {
  /** Console account name, or "cli". */
  actor: string;
  /** Client address as the router resolved it; "" for the CLI. */
  ip: string;
}

export type UserView = UserRecord & { machines: number };

/** A policy error or warning with its position in the text (1-based). */
export interface PolicyProblem {
  line: number;
  column: number;
  message: string;
}

export interface PolicyInForce {
  /** null = no policy (allow-all). */
  text: string | null;
  version: number | null;
  /** "version 7", "file /etc/hse/policy.hujson", "none". */
  origin: string;
  /** HSE_POLICY_FILE when the policy is a file (then it cannot be changed here). */
  file: string | null;
  allowAll: boolean;
  /** Tags defined in tagOwners. */
  tags: string[];
}

export interface PolicyCheck {
  ok: boolean;
  errors: PolicyProblem[];
  warnings: PolicyProblem[];
  /** Each assertion of the policy's tests and sshTests with its outcome (empty when errors stopped them). */
  tests: PolicyTestOutcome[];
}

export interface PolicyTestOutcome {
  /** "tests[2]" or "sshTests[0]". */
  origin: string;
  line: number;
  column: number;
  /** "alice@ → tag:db:5432 accept". */
  assertion: string;
  passed: boolean;
  detail: string;
}

export type { PolicyVersion, Reacher, RouteView } from './model.ts';

export class AdminClient {
  readonly socketPath: string;
  constructor(socketPath: string) {
    this.socketPath = socketPath;
  }

  request<T>(method: string, path: string, who: Actor, body?: unknown): Promise<T> {
    const data = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
    return new Promise<T>((resolve, reject) => {
      const req = nodeHttp.request(
        {
          socketPath: this.socketPath,
          method,
          path,
          headers: {
            'x-hse-actor': who.actor,
            'x-hse-client-ip': who.ip,
            ...(data ? { 'content-type': 'application/json', 'content-length': data.length } : {}),
          },
          timeout: 15_000,
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            const text = Buffer.concat(chunks).toString('utf8');
            let parsed: unknown;
            try {
              parsed = JSON.parse(text);
            } catch {
              reject(new AdminError(502, `coordination service answered ${res.statusCode} with a non-JSON body`));
              return;
            }
            if ((res.statusCode ?? 500) >= 400) {
              const body = parsed as { error?: string; details?: unknown };
              reject(new AdminError(res.statusCode ?? 500, body.error ?? 'request failed', { details: body.details }));
            } else resolve(parsed as T);
          });
        },
      );
      req.on('timeout', () => req.destroy(new Error('timed out')));
      req.on('error', (e: NodeJS.ErrnoException) =>
        reject(
          new AdminError(
            503,
            e.code === 'ENOENT' || e.code === 'ECONNREFUSED' ? 'the coordination service is not running' : `coordination service unreachable: ${e.message}`,
          ),
        ),
      );
      req.end(data);
    });
  }

  listUsers(who: Actor) {
    return this.request<UserView[]>('GET', '/v1/users', who);
  }
  createUser(who: Actor, name: string, displayName?: string) {
    return this.request<UserRecord>('POST', '/v1/users', who, { name, displayName });
  }
  renameUser(who: Actor, id: number, name: string) {
    return this.request<UserRecord>('PATCH', `/v1/users/${id}`, who, { name });
  }
  deleteUser(who: Actor, id: number) {
    return this.request<UserRecord>('DELETE', `/v1/users/${id}`, who);
  }
  listPreAuthKeys(who: Actor) {
    return this.request<PreAuthKeyView[]>('GET', '/v1/preauthkeys', who);
  }
  createPreAuthKey(who: Actor, opts: { user: string | number; reusable?: boolean; ephemeral?: boolean; tags?: string[]; expiresInSeconds?: number }) {
    return this.request<PreAuthKeyView & { key: string }>('POST', '/v1/preauthkeys', who, opts);
  }
  expirePreAuthKey(who: Actor, id: number) {
    return this.request<PreAuthKeyView>('POST', `/v1/preauthkeys/${id}/expire`, who);
  }
  listApiKeys(who: Actor) {
    return this.request<ApiKeyView[]>('GET', '/v1/apikeys', who);
  }
  /** The answer holds the whole key, this once. */
  createApiKey(who: Actor, opts: { description: string; expiresInSeconds: number; role: 'admin' | 'readonly' }) {
    return this.request<ApiKeyView & { key: string }>('POST', '/v1/apikeys', who, opts);
  }
  revokeApiKey(who: Actor, id: number) {
    return this.request<ApiKeyView>('POST', `/v1/apikeys/${id}/revoke`, who);
  }
  listWebhooks(who: Actor) {
    return this.request<WebhookEndpointView[]>('GET', '/v1/webhooks', who);
  }
  /** The answer holds the signing secret, this once. */
  createWebhook(who: Actor, url: string, events: WebhookEventType[]) {
    return this.request<WebhookEndpoint>('POST', '/v1/webhooks', who, { url, events });
  }
  deleteWebhook(who: Actor, id: number) {
    return this.request<WebhookEndpointView>('DELETE', `/v1/webhooks/${id}`, who);
  }
  webhookDeliveries(who: Actor, id: number) {
    return this.request<WebhookDelivery[]>('GET', `/v1/webhooks/${id}/deliveries`, who);
  }
  testWebhook(who: Actor, id: number) {
    return this.request<WebhookDelivery>('POST', `/v1/webhooks/${id}/test`, who);
  }
  resendDelivery(who: Actor, id: number) {
    return this.request<WebhookDelivery>('POST', `/v1/webhooks/deliveries/${id}/resend`, who);
  }
  listNodes(who: Actor) {
    return this.request<NodeView[]>('GET', '/v1/nodes', who);
  }
  getNode(who: Actor, id: number) {
    return this.request<NodeView>('GET', `/v1/nodes/${id}`, who);
  }
  renameNode(who: Actor, id: number, name: string) {
    return this.request<NodeView>('POST', `/v1/nodes/${id}/rename`, who, { name });
  }
  expireNode(who: Actor, id: number) {
    return this.request<NodeView>('POST', `/v1/nodes/${id}/expire`, who);
  }
  setKeyExpiryDisabled(who: Actor, id: number, disabled: boolean) {
    return this.request<NodeView>('POST', `/v1/nodes/${id}/key-expiry`, who, { disabled });
  }
  moveNode(who: Actor, id: number, user: string | number) {
    return this.request<NodeView>('POST', `/v1/nodes/${id}/user`, who, { user });
  }
  deleteNode(who: Actor, id: number) {
    return this.request<NodeView>('DELETE', `/v1/nodes/${id}`, who);
  }
  tagNode(who: Actor, id: number, tags: string[]) {
    return this.request<NodeView>('POST', `/v1/nodes/${id}/tags`, who, { tags });
  }
  nodeAccess(who: Actor, id: number) {
    return this.request<{ reachers: Reacher[] }>('GET', `/v1/nodes/${id}/access`, who);
  }
  listRoutes(who: Actor) {
    return this.request<RouteView[]>('GET', '/v1/routes', who);
  }
  nodeRoutes(who: Actor, id: number) {
    return this.request<RouteView[]>('GET', `/v1/nodes/${id}/routes`, who);
  }
  /** Approves (or unapproves) routes of a machine; "exit" stands for 0.0.0.0/0 + ::/0. */
  setRoutesApproved(who: Actor, id: number, prefixes: string[], approved: boolean) {
    return this.request<RouteView[]>('POST', `/v1/nodes/${id}/routes/${approved ? 'approve' : 'unapprove'}`, who, { prefixes });
  }
  getPolicy(who: Actor) {
    return this.request<PolicyInForce>('GET', '/v1/policy', who);
  }
  checkPolicy(who: Actor, text: string) {
    return this.request<PolicyCheck>('POST', '/v1/policy/check', who, { text });
  }
  setPolicy(who: Actor, text: string, ifVersion?: number) {
    return this.request<PolicyVersion & { warnings: PolicyProblem[] }>('PUT', '/v1/policy', who, { text, ifVersion });
  }
  policyHistory(who: Actor) {
    return this.request<(PolicyVersion & { diff: string })[]>('GET', '/v1/policy/history', who);
  }
  revertPolicy(who: Actor, version: number) {
    return this.request<PolicyVersion & { warnings: PolicyProblem[] }>('POST', `/v1/policy/revert/${version}`, who);
  }
  getDns(who: Actor) {
    return this.request<DnsSettings>('GET', '/v1/dns', who);
  }
  /** Replaces the DNS settings; a refusal (400) names the field and leaves the previous settings in force. */
  setDns(who: Actor, settings: unknown) {
    return this.request<DnsSettings>('PUT', '/v1/dns', who, settings);
  }
  listPending(who: Actor) {
    return this.request<PendingAuth[]>('GET', '/v1/pending', who);
  }
  getPending(who: Actor, authId: string) {
    return this.request<PendingAuth>('GET', `/v1/pending/${encodeURIComponent(authId)}`, who);
  }
  approve(who: Actor, authId: string, user: string | number) {
    return this.request<NodeView>('POST', `/v1/pending/${encodeURIComponent(authId)}/approve`, who, { user });
  }
  /** The device of this login request becomes the signed-in person's (their user created at the first sign-in). */
  signInDevice(who: Actor, authId: string, identity: ProviderIdentity) {
    return this.request<{ node: NodeView; user: UserRecord }>('POST', `/v1/pending/${encodeURIComponent(authId)}/signin`, who, { identity });
  }
  reject(who: Actor, authId: string) {
    return this.request<PendingAuth>('POST', `/v1/pending/${encodeURIComponent(authId)}/reject`, who);
  }
}
