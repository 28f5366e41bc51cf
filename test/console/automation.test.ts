// The console's automation pages through the real router: API keys (made with a form, shown once, usable at once
// against /api/v2, their last use shown, revoked) and webhooks (an endpoint added with its secret shown once, a test
// event delivered and shown with its state, resent). Auditors see both pages and change nothing.
import http from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import test from 'ava';
import { Client, PASSWORD } from '../harness/console-client.ts';
import { startImage, type Image } from '../harness/image.ts';

let image: Image;
let admin: Client;

const text = (body: string) =>
  body
    .replace(/<[^>]+>/g, ' ')
    .replace(/\s+/g, ' ')
    .replace(/&quot;/g, '"');

test.before(async () => {
  image = await startImage({ env: { HSE_CONSOLE_PASSWORD: PASSWORD } });
  admin = new Client(image.url);
  const r = await admin.signIn('admin', PASSWORD);
  if (r.status !== 303) throw new Error(`admin sign-in answered ${r.status}`);
});

test.after.always(async () => {
  await image?.stop();
});

const devices = (key: string) => fetch(`${image.url}/api/v2/tailnet/-/devices`, { headers: { authorization: `Bearer ${key}` } });

test.serial('an API key made in the console is shown once, works at once, shows its last use, and stops working when revoked', async (t) => {
  const made = await admin.post('/console/apikeys', { description: 'grafana', days: '30' });
  t.is(made.status, 200);
  const key = /<code id="new-key">([^<]+)</.exec(made.body)?.[1] ?? '';
  t.regex(key, /^hse-api-[0-9a-f]{12}-/);
  t.regex(text(made.body), /only time the whole key is shown/);
  t.is((await devices(key)).status, 200);
  const list = await admin.request('/console/apikeys');
  t.false(list.body.includes(key), 'the list never shows the whole key');
  t.regex(text(list.body), /grafana full active/);
  t.regex(text(list.body), /from 127\.0\.0\.1/);
  const id = /data-id="(\d+)" data-prefix="[^"]+" data-state="active"/.exec(list.body)![1];
  t.is((await admin.post(`/console/apikeys/${id}/revoke`)).status, 303);
  t.is((await devices(key)).status, 401);
  t.regex(text((await admin.request('/console/apikeys')).body), /grafana full revoked/);
});

test.serial('a read-only API key from the console reads but cannot change', async (t) => {
  const made = await admin.post('/console/apikeys', { description: 'dashboard', days: '7', readonly: '1' });
  const key = /<code id="new-key">([^<]+)</.exec(made.body)![1];
  t.is((await devices(key)).status, 200);
  const change = await fetch(`${image.url}/api/v2/tailnet/-/dns/nameservers`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ dns: ['9.9.9.9'] }),
  });
  t.is(change.status, 403);
});

test.serial('a webhook endpoint added in the console gets a test event, its delivery is shown, and it can be resent', async (t) => {
  const got: string[] = [];
  const receiver = http.createServer((req, res) => {
    let b = '';
    req.on('data', (c: Buffer) => (b += c.toString()));
    req.on('end', () => {
      got.push(b);
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(receiver.address() as { port: number }).port}/hook`;
  try {
    const made = await admin.request('/console/webhooks', {
      form: { csrf: admin.csrf ?? (await admin.sessionCsrf()), url, events: 'nodeCreated' },
    });
    t.is(made.status, 200);
    t.regex(/<code id="new-secret">([^<]+)</.exec(made.body)?.[1] ?? '', /^hse-webhook-/);
    const id = /data-endpoint="(\d+)"/.exec(made.body)![1];
    t.is((await admin.post(`/console/webhooks/${id}/test`)).status, 303);
    for (let i = 0; i < 100 && got.length === 0; i++) await sleep(100);
    t.is(JSON.parse(got[0])[0].type, 'test');
    let page = '';
    for (let i = 0; i < 50; i++) {
      page = (await admin.request('/console/webhooks')).body;
      if (/data-type="test" data-status="delivered"/.test(page)) break;
      await sleep(100);
    }
    t.regex(page, /data-type="test" data-status="delivered"/);
    const delivery = /data-delivery="(\d+)" data-type="test"/.exec(page)![1];
    t.is((await admin.post(`/console/webhooks/deliveries/${delivery}/resend`)).status, 303);
    for (let i = 0; i < 100 && got.length < 2; i++) await sleep(100);
    t.is(got.length, 2);
    t.is(got[1], got[0], 'the same event, sent again');
  } finally {
    receiver.close();
  }
});

test.serial('an auditor sees the API keys and webhooks pages but cannot make, revoke or test anything', async (t) => {
  t.is((await admin.post('/console/accounts', { username: 'audra', role: 'auditor', password: 'audra reads only here' })).status, 303);
  const auditor = new Client(image.url, '127.0.0.21');
  t.is((await auditor.signIn('audra', 'audra reads only here')).status, 303);
  t.regex(text((await auditor.request('/console/apikeys')).body), /read-only Your auditor account can see API keys/);
  t.regex(text((await auditor.request('/console/webhooks')).body), /read-only Your auditor account can see webhooks/);
  t.is((await auditor.post('/console/apikeys', { description: 'sneaky', days: '7' })).status, 403);
  t.is((await auditor.post('/console/webhooks', { url: 'http://127.0.0.1:9/x', events: 'nodeCreated' })).status, 403);
  t.is((await auditor.post('/console/webhooks/1/test')).status, 403);
});
