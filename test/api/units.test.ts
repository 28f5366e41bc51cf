// The pure pieces of the automation features: the HSE_METRICS_LISTEN setting, reading an API key from Authorization,
// the webhook signature and retry schedule, which activity entries become which webhook events, and policy preview.
import crypto from 'node:crypto';
import test from 'ava';
import { ConfigError, parseConfig } from '../../shared/config.ts';
import { credentialOf } from '../../services/coordination/src/api/api-server.ts';
import { previewRules } from '../../services/coordination/src/policy/preview.ts';
import { eventsOf } from '../../services/coordination/src/webhooks/events.ts';
import { signature } from '../../services/coordination/src/webhooks/sender.ts';
import { nextAttemptAt } from '../../services/coordination/src/webhooks/worker.ts';

const refusal = (env: Record<string, string>) => {
  try {
    parseConfig(env);
    return null;
  } catch (e) {
    return e instanceof ConfigError ? `${e.variable}: ${e.reason}` : String(e);
  }
};

test('HSE_METRICS_LISTEN: off by default, an address and port when set, refused with the reason otherwise', (t) => {
  t.is(parseConfig({}).metricsListen, null);
  t.is(parseConfig({ HSE_METRICS_LISTEN: 'off' }).metricsListen, null);
  t.deepEqual(parseConfig({ HSE_METRICS_LISTEN: '127.0.0.1:9090' }).metricsListen, { host: '127.0.0.1', port: 9090 });
  t.deepEqual(parseConfig({ HSE_METRICS_LISTEN: '[::1]:9100' }).metricsListen, { host: '::1', port: 9100 });
  t.regex(refusal({ HSE_METRICS_LISTEN: '9090' }) ?? '', /^HSE_METRICS_LISTEN: "9090" is not an address and port/);
  t.regex(refusal({ HSE_METRICS_LISTEN: 'localhost:9090' }) ?? '', /^HSE_METRICS_LISTEN: /);
  t.regex(refusal({ HSE_METRICS_LISTEN: '127.0.0.1:70000' }) ?? '', /^HSE_METRICS_LISTEN: /);
  t.regex(refusal({ HSE_METRICS_LISTEN: '127.0.0.1:8080', HSE_HTTP_PORT: '8080' }) ?? '', /router's own port/);
});

test('an API key is read from a Bearer token or from the basic-auth user name, as Tailscale accepts it', (t) => {
  t.is(credentialOf('Bearer hse-api-abc'), 'hse-api-abc');
  t.is(credentialOf('bearer hse-api-abc'), 'hse-api-abc');
  t.is(credentialOf(`Basic ${Buffer.from('hse-api-abc:').toString('base64')}`), 'hse-api-abc');
  t.is(credentialOf(`Basic ${Buffer.from('hse-api-abc:ignored').toString('base64')}`), 'hse-api-abc');
  t.is(credentialOf(`Basic ${Buffer.from(':x').toString('base64')}`), null);
  t.is(credentialOf(undefined), null);
  t.is(credentialOf('Token abc'), null);
});

test('a webhook signature is Tailscale\'s: t=<unix>,v1=<hex HMAC-SHA256 of "t.body">', (t) => {
  const body = '[{"type":"test"}]';
  const sig = signature('tskey-webhook-xxxxx', body, 1700000000);
  const want = crypto.createHmac('sha256', 'tskey-webhook-xxxxx').update(`1700000000.${body}`).digest('hex');
  t.is(sig, `t=1700000000,v1=${want}`);
});

test('a failed delivery is retried after 10 s, doubling to an hour, and given up a day after the event', (t) => {
  const created = 0;
  t.is(nextAttemptAt(1, created, 0), 10_000);
  t.is(nextAttemptAt(2, created, 0), 20_000);
  t.is(nextAttemptAt(20, created, 0), 3_600_000);
  t.is(nextAttemptAt(20, created, 86_400_000 - 3_600_000), 86_400_000);
  t.is(nextAttemptAt(20, created, 86_400_000 - 3_599_999), null);
});

test('activity entries become webhook events with string data, most entries none', (t) => {
  const ctx = { tailnet: 'hse.internal', baseDomain: 'hse.internal', publicOrigin: 'https://vpn.example.com' };
  const entry = (action: string, details: Record<string, unknown> = {}) => ({
    id: '1-0',
    time: '2026-01-01T00:00:00.000Z',
    action,
    actor: 'cli',
    ip: '',
    target: 'laptop',
    details,
  });
  t.deepEqual(
    eventsOf(ctx, entry('node.approve', { nodeId: 'nabc', machineId: 3 })).map((e) => e.type),
    ['nodeCreated', 'nodeApproved'],
  );
  const [del] = eventsOf(ctx, entry('node.delete', { nodeId: 'nabc' }));
  t.like(del, { version: 1, type: 'nodeDeleted', tailnet: 'hse.internal', data: { nodeID: 'nabc', deviceName: 'laptop.hse.internal', actor: 'cli' } });
  t.deepEqual(eventsOf(ctx, entry('node.logout', {})), []);
  t.is(eventsOf(ctx, entry('node.logout', { removed: true }))[0].type, 'nodeDeleted');
  t.is(eventsOf(ctx, entry('route.needs_approval', { routes: ['10.0.0.0/24', 'exit'] }))[0].data.routes, '10.0.0.0/24,exit');
  t.deepEqual(eventsOf(ctx, entry('console.signin')), []);
  for (const e of eventsOf(ctx, entry('policy.change', { version: 4 }))) {
    t.true(Object.values(e.data).every((v) => typeof v === 'string'));
  }
});

test('policy preview: the rules naming a user as a source, and the rules reaching an address and port', (t) => {
  const snapshot = {
    users: [
      { id: 1, name: 'alice', email: 'alice@example.com', idpGroups: [] },
      { id: 2, name: 'bob', email: null, idpGroups: [] },
    ],
    nodes: [
      { id: 1, ipv4: '100.64.0.1', ipv6: 'fd7a:115c:a1e0::1', userId: 1, tags: [], approvedRoutes: [] },
      { id: 2, ipv4: '100.64.0.2', ipv6: 'fd7a:115c:a1e0::2', userId: 2, tags: ['tag:db'], approvedRoutes: [] },
    ],
  };
  const policy = `{
  "groups": { "group:eng": ["alice@"] },
  "tagOwners": { "tag:db": ["bob@"] },
  "acls": [
    { "action": "accept", "src": ["group:eng"], "dst": ["tag:db:5432"] },
    { "action": "accept", "src": ["bob@"], "dst": ["alice@:22"] },
  ],
}`;
  const alice = previewRules(policy, snapshot, 'user', 'alice@example.com');
  t.deepEqual(alice, { ok: true, matches: [{ users: ['group:eng'], ports: ['tag:db:5432'], lineNumber: 5 }] });
  const db = previewRules(policy, snapshot, 'ipport', '100.64.0.2:5432');
  t.deepEqual(db.ok && db.matches.map((m) => m.lineNumber), [5]);
  const closed = previewRules(policy, snapshot, 'ipport', '100.64.0.2:22');
  t.deepEqual(closed.ok && closed.matches, []);
  const broken = previewRules('{ "acls": [', snapshot, 'user', 'alice@');
  t.false(broken.ok);
});
