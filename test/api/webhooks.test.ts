// Webhooks as a receiver sees them: every event a client's interactive join and its approval produce arrives signed
// the way Tailscale signs (the receiver checks each signature as Tailscale's own example consumer does); a receiver
// that is down gets its event once it is back; and an event waiting for a receiver survives a restart of the whole
// image under pm2 (embedded Redis included).
import { execFile } from 'node:child_process';
import crypto from 'node:crypto';
import http from 'node:http';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import test from 'ava';
import { AdminClient } from '../../shared/admin-client.ts';
import type { WebhookDelivery, WebhookEndpoint } from '../../shared/model.ts';
import { startImage } from '../harness/image.ts';
import { freePort, NODE, ROOT } from '../harness/process.ts';
import { haveTailscale, TsNode } from '../harness/tailscale.ts';
import { startSupervisedImage } from '../reliability/lib/supervised-image.ts';

const exec = promisify(execFile);
const who = { actor: 'webhook-test', ip: '' };

interface Received {
  type: string;
  message: string;
  data: Record<string, string>;
  /** The signature checked against the endpoint's secret, as Tailscale's example consumer checks it. */
  signed: boolean;
}

/** Tailscale-Webhook-Signature: t=<unix>,v1=<hex HMAC-SHA256 of "<t>.<body>">, the timestamp no older than 5 min. */
function verify(header: string, body: string, secret: string): boolean {
  const parts = Object.fromEntries(header.split(',').map((p) => p.split('=') as [string, string]));
  const t = Number(parts.t);
  if (!Number.isInteger(t) || Date.now() / 1000 - t > 300 || !parts.v1) return false;
  const want = crypto.createHmac('sha256', secret).update(`${t}.${body}`).digest('hex');
  return crypto.timingSafeEqual(Buffer.from(want), Buffer.from(parts.v1.padEnd(want.length).slice(0, want.length)));
}

/** A webhook receiver on a port that stays the same across stop() and start(). */
class Receiver {
  readonly port: number;
  readonly got: Received[] = [];
  secret = '';
  private server: http.Server | null = null;
  constructor(port: number) {
    this.port = port;
  }
  get url(): string {
    return `http://127.0.0.1:${this.port}/tailscale-events`;
  }
  async start(): Promise<void> {
    this.server = http.createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        const signed = verify(String(req.headers['tailscale-webhook-signature'] ?? ''), body, this.secret);
        for (const e of JSON.parse(body) as Received[]) this.got.push({ type: e.type, message: e.message, data: e.data, signed });
        res.writeHead(200).end();
      });
    });
    await new Promise<void>((r) => this.server!.listen(this.port, '127.0.0.1', r));
  }
  async stop(): Promise<void> {
    const s = this.server;
    this.server = null;
    if (!s) return;
    s.closeAllConnections();
    await new Promise((r) => s.close(r));
  }
  async waitFor(pred: (e: Received) => boolean, what: string, ms = 60_000): Promise<Received> {
    const deadline = Date.now() + ms;
    for (;;) {
      const e = this.got.find(pred);
      if (e) return e;
      if (Date.now() > deadline) throw new Error(`no ${what} within ${ms} ms; received: ${JSON.stringify(this.got)}`);
      await sleep(100);
    }
  }
}

async function waitFailedAttempt(admin: AdminClient, endpointId: number, type: string): Promise<WebhookDelivery> {
  for (let i = 0; i < 600; i++) {
    const d = (await admin.request<WebhookDelivery[]>('GET', `/v1/webhooks/${endpointId}/deliveries`, who)).find((x) => x.type === type);
    if (d && d.attempts >= 1 && d.status === 'pending') return d;
    await sleep(100);
  }
  throw new Error(`no failed attempt of ${type}`);
}

if (!haveTailscale()) {
  test('official Tailscale client is installed', (t) => t.fail('tailscaled/tailscale not found; run .ci/run or go install them (see README)'));
} else {
  test.serial("a client's join and approval reach the receiver as signed events; a receiver that was down gets its event when back", async (t) => {
    const receiver = new Receiver(await freePort());
    await receiver.start();
    // Keys last 12 h here, so the new machine's key "expires within a day" as soon as it joins.
    const image = await startImage({ env: { HSE_NODE_KEY_EXPIRY: '12h' } });
    const node = new TsNode({ name: 'laptop', env: { TS_DEBUG_USE_DERP_HTTP: '1' } });
    const hse = async (...args: string[]) =>
      (await exec(NODE, [path.join(ROOT, 'bin/hse.ts'), ...args], { env: { ...image.env, PATH: process.env.PATH } })).stdout;
    try {
      const admin = new AdminClient(path.join(image.runDir, 'coordination-admin.sock'));
      const ep = await admin.request<WebhookEndpoint>('POST', '/v1/webhooks', who, {
        url: receiver.url,
        events: ['nodeNeedsApproval', 'nodeCreated', 'nodeApproved', 'routesNeedApproval', 'userCreated', 'nodeKeyExpiringInOneDay'],
      });
      receiver.secret = ep.secret;
      await hse('users', 'create', 'alice');
      await node.start();
      const { url, done } = await node.upInteractive(image.url);
      const needs = await receiver.waitFor((e) => e.type === 'nodeNeedsApproval', 'nodeNeedsApproval');
      t.is(needs.data.url, url, 'the event links to the approval page the device printed');
      await hse('pending', 'approve', url.split('/').pop()!, '--user', 'alice');
      t.is(await done, 0);
      const created = await receiver.waitFor((e) => e.type === 'nodeCreated', 'nodeCreated');
      await receiver.waitFor((e) => e.type === 'nodeApproved', 'nodeApproved');
      const status = await node.status();
      t.is(created.data.nodeID, (status.Self as unknown as { ID: string }).ID, 'the event names the node by the StableID the client itself has');
      t.is(created.data.deviceName, 'laptop.hse.internal');
      t.is(created.data.managedBy, 'alice');
      const expiring = await receiver.waitFor((e) => e.type === 'nodeKeyExpiringInOneDay', 'nodeKeyExpiringInOneDay');
      t.is(expiring.data.nodeID, created.data.nodeID);
      await node.cli(['set', '--advertise-routes=10.202.0.0/24']);
      const routes = await receiver.waitFor((e) => e.type === 'routesNeedApproval', 'routesNeedApproval');
      t.is(routes.data.routes, '10.202.0.0/24');
      t.true(
        receiver.got.every((e) => e.signed),
        `every event's signature verifies: ${JSON.stringify(receiver.got.map((e) => [e.type, e.signed]))}`,
      );

      // Down: the delivery fails and waits; back: it arrives, signed, without anyone resending it.
      await receiver.stop();
      await hse('users', 'create', 'bob');
      const waiting = await waitFailedAttempt(admin, ep.id, 'userCreated');
      t.truthy(waiting.lastError);
      await receiver.start();
      const late = await receiver.waitFor((e) => e.type === 'userCreated' && e.data.user === 'bob', 'userCreated for bob after the receiver came back');
      t.true(late.signed);
    } catch (e) {
      t.log(image.logs().slice(-6000));
      throw e;
    } finally {
      await node.destroy();
      await image.stop();
      await receiver.stop();
    }
  });
}

test.serial('an event waiting for its receiver is delivered after a restart of the whole image', async (t) => {
  const receiver = new Receiver(await freePort());
  const image = await startSupervisedImage();
  try {
    const ep = await image.admin.request<WebhookEndpoint>('POST', '/v1/webhooks', who, { url: receiver.url, events: ['userCreated'] });
    receiver.secret = ep.secret;
    await image.admin.createUser(who, 'carol');
    const waiting = await waitFailedAttempt(image.admin, ep.id, 'userCreated');
    t.truthy(waiting.lastError);
    await image.pm2.cli('stop', 'all');
    await image.pm2.cli('start', 'ecosystem.config.js');
    for (const name of ['redis', 'router', 'coordination', 'console', 'relay'] as const) await image.waitListening(name, 2, 90_000);
    await receiver.start();
    const got = await receiver.waitFor((e) => e.type === 'userCreated' && e.data.user === 'carol', 'userCreated for carol after the restart', 90_000);
    t.true(got.signed);
    const d = (await image.admin.request<WebhookDelivery[]>('GET', `/v1/webhooks/${ep.id}/deliveries`, who)).find((x) => x.id === waiting.id);
    t.is(d?.status, 'delivered');
    t.true((d?.attempts ?? 0) >= 2);
  } finally {
    await receiver.stop();
    await image.destroy();
  }
});
