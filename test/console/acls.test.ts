// Access controls, tags and routes in the console, through the real router with the coordination service and Redis
// running, machines joining with our own control client (quick and exact). The official client and the browser are in
// policy-browser.test.ts.
// Checked here: a valid policy is saved and in force with its tests passing and who saved it from where; a refused
// policy (syntax, an unknown group, a failing test) shows the line and column and changes nothing; Check changes
// nothing; a save based on an older version is refused; an auditor reads everything and changes nothing; revert;
// HSE_POLICY_FILE is read-only and named; tags on a machine (only defined ones) and who may reach it; routes advertised,
// approved and unapproved from the Routes view and the machine page, the Machines list's badges and filter.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import test from 'ava';
import { AdminClient } from '../../shared/admin-client.ts';
import { parseConfig } from '../../shared/config.ts';
import { adminSocket } from '../../shared/paths.ts';
import { Client, PASSWORD } from '../harness/console-client.ts';
import { ControlClient, serverKey } from '../harness/control-client.ts';
import { startImage, type Image } from '../harness/image.ts';

let image: Image;
let admin: Client;
let api: AdminClient;
const cli = { actor: 'test', ip: '' };
const controls: ControlClient[] = [];
const images: Image[] = [];

test.before(async () => {
  image = await startImage({ env: { HSE_CONSOLE_PASSWORD: PASSWORD } });
  images.push(image);
  api = new AdminClient(adminSocket(parseConfig(image.env)));
  admin = new Client(image.url);
  const r = await admin.signIn('admin', PASSWORD);
  if (r.status !== 303) throw new Error(`admin sign-in answered ${r.status}`);
});

test.after.always(async () => {
  for (const c of controls) c.close();
  for (const i of images) await i.stop();
});

/** The visible text of a page, for messages. */
function text(body: string): string {
  return body
    .replace(/<[^>]+>/g, ' ')
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&amp;/g, '&')
    .replace(/\s+/g, ' ');
}

/** A machine joins with a key of `user` and keeps its map stream open (online), with `hostinfo` extra. */
async function join(hostname: string, user: string, hostinfo: Record<string, unknown> = {}): Promise<number> {
  const key = await api.createPreAuthKey(cli, { user, reusable: true, expiresInSeconds: 3600 });
  const client = await ControlClient.connect(image.port, await serverKey(image.url));
  controls.push(client);
  const hi = { Hostname: hostname, OS: 'linux', IPNVersion: '1.102.3', ...hostinfo };
  const r = await client.register({ Auth: { AuthKey: key.key }, Hostinfo: hi });
  if (!r.MachineAuthorized) throw new Error(`${hostname} not authorized: ${JSON.stringify(r)}`);
  const stream = client.stream({ Hostinfo: hi });
  await stream.waitFor(() => true, 'first map');
  const n = (await api.listNodes(cli)).find((x) => x.hostname === hostname);
  if (!n) throw new Error(`${hostname} not listed`);
  return n.id;
}

async function until(what: string, cond: () => Promise<boolean>, ms = 15_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const POLICY_V1 = `// Who may reach what.
{
  "groups": { "group:eng": ["alice@"] },
  "tagOwners": { "tag:server": ["group:eng"], "tag:db": ["group:eng"] },
  "acls": [
    { "action": "accept", "src": ["group:eng"], "dst": ["tag:server:22,443"] },
    { "action": "accept", "src": ["alice@"], "dst": ["alice@:*"] },
  ],
  "tests": [
    { "src": "alice@", "accept": ["tag:server:22"], "deny": ["tag:server:80"] },
  ],
}
`;

test.serial('with no policy, the page says plainly that every device reaches every other, and the navigation has it', async (t) => {
  await api.createUser(cli, 'alice');
  await api.createUser(cli, 'bob');
  const r = await admin.request('/console/acls');
  t.is(r.status, 200);
  t.regex(text(r.body), /No policy: every device can reach every other \(Tailscale's default\)\./);
  t.regex(r.body, /<textarea name="text" id="policy-text"/);
  const nav = /<nav class="nav"[\s\S]*?<\/nav>/.exec(r.body)![0];
  t.deepEqual(
    [...nav.matchAll(/<a href="([^"]+)"/g)].map((m) => m[1]),
    [
      '/console/machines',
      '/console/routes',
      '/console/users',
      '/console/keys',
      '/console/acls',
      '/console/dns',
      '/console/apikeys',
      '/console/webhooks',
      '/console/logs',
      '/console/accounts',
    ],
  );
  t.regex(nav, /aria-current="page">Access controls</);
});

test.serial('a valid policy is saved: in force, its tests pass, and the history says who saved it from where', async (t) => {
  const r = await admin.post('/console/acls', { text: POLICY_V1.replace(/\n/g, '\r\n'), ifVersion: '0' });
  t.is(r.status, 303, text(r.body).slice(0, 500));
  const inForce = await api.getPolicy(cli);
  t.is(inForce.version, 1);
  t.is(inForce.text, POLICY_V1, "the browser's CRLF line breaks are stored as LF");
  t.deepEqual(inForce.tags, ['tag:db', 'tag:server']);
  const page = await admin.request('/console/acls');
  t.regex(text(page.body), /Saved as version 1\. Devices get the new rules within a second\./);
  t.regex(page.body, /id="policy-state" data-version="1"/);
  t.regex(text(page.body), /version 1 saved by admin from 127\.0\.0\.1/);
  t.regex(text(page.body), /1 test: 1 passed/);
  t.regex(page.body, /class="test passed" data-line="10"/);
  t.regex(page.body, /<li class="version" data-version="1" data-current="true">/);
  t.regex(page.body, /<span class="add">\+ {2}&quot;groups&quot;: \{ &quot;group:eng&quot;: \[&quot;alice@&quot;\] \},<\/span>/, 'the diff of version 1');
  const logged = JSON.parse((await admin.request('/console/api/logs?action=policy.change&limit=5')).body) as {
    entries: { actor: string; ip: string; target: string; details: { diff: string } }[];
  };
  t.like(logged.entries[0], { actor: 'admin', ip: '127.0.0.1', target: 'version 1' });
  t.regex(logged.entries[0].details.diff, /\+.*group:eng/);
});

test.serial('a policy with an unknown group is refused with its line and column, and the one in force stays', async (t) => {
  const bad = POLICY_V1.replace('"src": ["group:eng"], "dst": ["tag:server:22,443"]', '"src": ["group:ops"], "dst": ["tag:server:22,443"]');
  const r = await admin.post('/console/acls', { text: bad, ifVersion: '1' });
  t.is(r.status, 400);
  t.regex(text(r.body), /1 problem\s*: the policy was not saved; the policy in force stays\./);
  t.regex(text(r.body), /Line 6, column 35\s*: group:ops is not defined in groups/);
  t.regex(r.body, /data-error-lines="6"/, 'the line is marked in the editor');
  t.regex(r.body, /<span class="bad">6<\/span>/, "and in the editor's line numbers");
  t.regex(r.body, /<span class="hit"><span class="ln">6<\/span>/, 'the line is printed with the error');
  t.regex(r.body, /<span class="caret"><span class="ln"><\/span> {34}\^<\/span>/, 'a caret under column 35');
  t.true(r.body.includes('group:ops'), 'the text as typed stays in the editor');
  t.is((await api.getPolicy(cli)).version, 1, 'nothing changed');

  const syntax = await admin.post('/console/acls', { text: '{\n  "acls": [\n    { "action": "accept" "src": ["*"] },\n  ],\n}\n', ifVersion: '1' });
  t.is(syntax.status, 400);
  t.regex(text(syntax.body), /Line 3, column 26\s*: expected a comma between the entries/);
  t.regex(text(syntax.body), /The tests cannot be listed until the text reads as HuJSON/);
  t.is((await api.getPolicy(cli)).version, 1);
});

test.serial('a save whose own test fails is refused, and the page shows which test failed', async (t) => {
  const failing = POLICY_V1.replace('"deny": ["tag:server:80"]', '"deny": ["tag:server:443"]');
  const r = await admin.post('/console/acls', { text: failing, ifVersion: '1' });
  t.is(r.status, 400);
  t.regex(text(r.body), /0 passed/);
  t.regex(r.body, /class="test failed" data-line="10" data-state="failed"/);
  t.regex(text(r.body), /test failed: alice@ can reach tag:server:443 .*but the test says deny/);
  t.is((await api.getPolicy(cli)).version, 1);
});

test.serial('Check shows the result of a text without saving it', async (t) => {
  const next = POLICY_V1.replace('tag:server:22,443', 'tag:server:22,443,8080');
  const ok = await admin.post('/console/acls/check', { text: next, ifVersion: '1' });
  t.is(ok.status, 200);
  t.regex(text(ok.body), /The policy compiles and its tests pass\. Nothing is saved until you press Save\./);
  t.true(ok.body.includes('tag:server:22,443,8080'), 'the checked text stays in the editor');
  const bad = await admin.post('/console/acls/check', { text: next.replace('alice@"]', 'nobody@"]'), ifVersion: '1' });
  t.is(bad.status, 200);
  t.regex(text(bad.body), /this text would be refused\. Nothing was saved\./);
  t.regex(text(bad.body), /Line 3, column 29\s*: nobody@ is not a user of this tailnet/);
  t.is((await api.getPolicy(cli)).version, 1, 'a check changes nothing');
  // A policy is larger than the console's other forms: 40 KiB of it still goes through (other forms stop at 16 KiB).
  const large = await admin.post('/console/acls/check', { text: `// ${'x'.repeat(40 * 1024)}\n${next}`, ifVersion: '1' });
  t.is(large.status, 200);
  t.regex(text(large.body), /The policy compiles and its tests pass/);
});

test.serial('a save based on an older version is refused when someone else saved in between', async (t) => {
  await api.setPolicy(cli, POLICY_V1.replace('tag:server:22,443', 'tag:server:22'));
  await until('version 2 in force', async () => (await api.getPolicy(cli)).version === 2);
  const r = await admin.post('/console/acls', { text: POLICY_V1, ifVersion: '1' });
  t.is(r.status, 409);
  t.regex(text(r.body), /The policy changed since version 1 was read; reload it and apply your change again/);
  t.is((await api.getPolicy(cli)).version, 2);
});

test.serial('revert makes an earlier version the policy in force again, as a new version', async (t) => {
  const page = await admin.request('/console/acls');
  t.regex(page.body, /action="\/console\/acls\/revert\/1"/);
  t.notRegex(page.body, /action="\/console\/acls\/revert\/2"/, 'no revert for the version in force');
  const r = await admin.post('/console/acls/revert/1');
  t.is(r.status, 303);
  const p = await api.getPolicy(cli);
  t.is(p.version, 3);
  t.is(p.text, POLICY_V1);
  const after = await admin.request('/console/acls');
  t.regex(text(after.body), /Reverted to version 1: saved as version 3, in force now\./);
  t.regex(text(after.body), /Version 3 in force saved by admin from 127\.0\.0\.1 just now · revert to version 1/);
  t.is((await admin.post('/console/acls/revert/99')).status, 404);
});

test.serial('an auditor reads the policy, its tests and history, and cannot check, save or revert', async (t) => {
  const created = await admin.post('/console/accounts', { username: 'audrey', role: 'auditor', password: 'auditor password 123' });
  t.is(created.status, 303);
  const auditor = new Client(image.url);
  t.is((await auditor.signIn('audrey', 'auditor password 123')).status, 303);
  const page = await auditor.request('/console/acls');
  t.is(page.status, 200);
  t.notRegex(page.body, /<textarea/);
  t.notRegex(page.body, /<main[\s\S]*<form method="post"[\s\S]*<\/main>/, 'no change form');
  t.regex(page.body, /<li id="L6"><code>/, 'the text with numbered lines');
  t.regex(text(page.body), /read-only Your auditor account can see the policy but not change it/);
  t.regex(text(page.body), /1 test: 1 passed/);
  for (const [p, form] of [
    ['/console/acls', { text: '{}', ifVersion: '3' }],
    ['/console/acls/check', { text: '{}' }],
    ['/console/acls/revert/2', {}],
  ] as const) {
    const r = await auditor.post(p, form);
    t.is(r.status, 403, p);
    t.regex(text(r.body), /Read-only account/);
  }
  t.is((await api.getPolicy(cli)).version, 3);
});

test.serial('tags: the machine page offers the tags the policy defines; setting one changes the machine, an undefined one is refused', async (t) => {
  const id = await join('web1', 'alice');
  const page = await admin.request(`/console/machines/${id}`);
  t.regex(page.body, /<input type="checkbox" name="tag" value="tag:db">/);
  t.regex(page.body, /<input type="checkbox" name="tag" value="tag:server">/);
  t.regex(text(page.body), /Who may reach this machine alice@ → .*every port/);

  const r = await admin.post(`/console/machines/${id}/tags`, { tag: 'tag:server' });
  t.is(r.status, 303);
  t.deepEqual((await api.getNode(cli, id)).tags, ['tag:server']);
  const after = await admin.request(`/console/machines/${id}`);
  t.regex(text(after.body), /Tagged web1 tag:server: it is owned by its tags now/);
  t.regex(after.body, /<input type="checkbox" name="tag" value="tag:server" checked>/);
  t.regex(text(after.body), /Owner its tags added by alice Tags tag:server/);
  await until('the policy to take the tag in', async () => text((await admin.request(`/console/machines/${id}`)).body).includes('group:eng → tcp/udp 22, 443'));
  const list = await admin.request('/console/machines');
  t.regex(
    list.body,
    /data-name="web1"[\s\S]*?<td data-label="Owner" class="owner"><span class="tags"><span class="badge tag mono">tag:server<\/span><\/span><span class="sub">added by alice<\/span>/,
  );

  const refused = await admin.post(`/console/machines/${id}/tags`, { tag: 'tag:nope' });
  t.is(refused.status, 400);
  t.regex(text(refused.body), /Tag:nope is not defined in the policy's tagOwners \(defined: tag:db, tag:server\)/);
  t.deepEqual((await api.getNode(cli, id)).tags, ['tag:server'], 'unchanged');

  t.is((await admin.post(`/console/machines/${id}/tags`, {})).status, 303, 'no tag checked: the tags are removed');
  t.deepEqual((await api.getNode(cli, id)).tags, []);
  t.regex(text((await admin.request(`/console/machines/${id}`)).body), /Removed the tags of web1: it belongs to alice again\./);
  const logged = JSON.parse((await admin.request('/console/api/logs?action=node.tags&limit=5')).body) as { entries: { actor: string; details: unknown }[] };
  t.like(logged.entries[0], { actor: 'admin', details: { from: ['tag:server'], to: [] } });
});

test.serial('routes: an advertised route waits, is approved from the Routes view and unapproved from the machine page', async (t) => {
  const id = await join('router1', 'bob', { RoutableIPs: ['10.201.0.0/24', '0.0.0.0/0', '::/0'] });
  await until('the routes to be listed', async () => (await api.nodeRoutes(cli, id)).length === 2);

  const list = await admin.request('/console/machines');
  t.regex(list.body, /data-name="router1"[\s\S]*?<span class="badge warn" data-badge="routes-waiting">2 routes waiting<\/span>/);
  t.regex(list.body, /<option value="pending">Pending<\/option>/);
  const pending = await admin.request('/console/machines?routes=pending');
  t.regex(pending.body, /data-name="router1"/);
  t.notRegex(pending.body, /data-name="web1"/);

  const routes = await admin.request('/console/routes');
  t.is(routes.status, 200);
  t.regex(routes.body, /<tr data-node="router1" data-prefix="10\.201\.0\.0\/24" data-state="waiting" data-approved="false">/);
  t.regex(routes.body, /<tr data-node="router1" data-prefix="exit" data-state="waiting" data-approved="false">/);
  t.regex(text(routes.body), /2 routes · 2 waiting for approval/);

  const approved = await admin.post(`/console/machines/${id}/routes`, { prefix: '10.201.0.0/24', action: 'approve', from: 'routes' });
  t.is(approved.status, 303);
  t.is(approved.headers.location, `${image.env.HSE_PUBLIC_URL}/console/routes`);
  const r1 = (await api.nodeRoutes(cli, id)).find((r) => r.prefix === '10.201.0.0/24')!;
  t.like(r1, { advertised: true, approved: true, active: true, primary: true });
  const after = await admin.request('/console/routes');
  t.regex(text(after.body), /Approved 10\.201\.0\.0\/24 of router1\./);
  t.regex(after.body, /data-prefix="10\.201\.0\.0\/24" data-state="primary" data-approved="true"/);

  const exit = await admin.post(`/console/machines/${id}/routes`, { prefix: 'exit', action: 'approve', from: 'machine' });
  t.is(exit.status, 303);
  t.is(exit.headers.location, `${image.env.HSE_PUBLIC_URL}/console/machines/${id}`);
  const machine = await admin.request(`/console/machines/${id}`);
  t.regex(machine.body, /<tr data-prefix="exit" data-advertised="true" data-approved="true" data-primary="false">/);
  t.regex(machine.body, /data-state="exit"/);
  const badges = await admin.request('/console/machines?routes=serving');
  t.regex(badges.body, /data-badge="exit-node">exit node</);
  t.regex(badges.body, /data-badge="subnet-router" title="10\.201\.0\.0\/24">subnet router</);
  t.notRegex(badges.body, /data-name="web1"/);

  const off = await admin.post(`/console/machines/${id}/routes`, { prefix: '10.201.0.0/24', action: 'unapprove', from: 'machine' });
  t.is(off.status, 303);
  t.like(
    (await api.nodeRoutes(cli, id)).find((r) => r.prefix === '10.201.0.0/24'),
    { advertised: true, approved: false, active: false },
  );
  t.regex(text((await admin.request(`/console/machines/${id}`)).body), /Unapproved 10\.201\.0\.0\/24 of router1; devices stop using it within a second\./);
  const logged = JSON.parse((await admin.request('/console/api/logs?action=route.unapprove&limit=5')).body) as {
    entries: { actor: string; ip: string; target: string }[];
  };
  t.like(logged.entries[0], { actor: 'admin', ip: '127.0.0.1', target: 'router1' });
});

test.serial('the live Routes view sends a new rendering when a route is approved elsewhere', async (t) => {
  const id = (await api.listNodes(cli)).find((n) => n.hostname === 'router1')!.id;
  const s = await admin.streamAt('/console/routes/stream');
  t.teardown(() => s.close());
  await s.waitFor((e) => e.event === 'html' && e.data.includes('data-state=\\"waiting\\"'), 'first rendering with a waiting route');
  await api.setRoutesApproved(cli, id, ['10.201.0.0/24'], true);
  const e = await s.waitFor((e) => e.event === 'html' && !e.data.includes('data-state=\\"waiting\\"'), 'a rendering without waiting routes');
  t.regex(e.data, /data-state=\\"primary\\"/);
});

test('HSE_POLICY_FILE: the page names the file and shows it read-only; a save is refused with the reason', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hse-policy-file-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'policy.hujson');
  fs.writeFileSync(file, '{\n  // from the file\n  "acls": [{ "action": "accept", "src": ["*"], "dst": ["*:22"] }],\n}\n');
  const img = await startImage({ services: ['coordination', 'console'], env: { HSE_CONSOLE_PASSWORD: PASSWORD, HSE_POLICY_FILE: file } });
  images.push(img);
  const c = new Client(img.url);
  t.is((await c.signIn('admin', PASSWORD)).status, 303);
  const page = await c.request('/console/acls');
  t.is(page.status, 200);
  t.regex(
    text(page.body),
    new RegExp(`The policy is the file ${file.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')} \\(\\s*HSE_POLICY_FILE\\s*\\)\\. Edit that file to change it`),
  );
  t.notRegex(page.body, /<textarea/, 'no editor');
  t.regex(page.body, /<li id="L2"><code> {2}\/\/ from the file<\/code><\/li>/);
  t.notRegex(page.body, /<main[\s\S]*<form method="post"[\s\S]*<\/main>/);
  const r = await c.post('/console/acls', { text: '{}', ifVersion: '0' });
  t.is(r.status, 409);
  t.regex(text(r.body), /The policy is the file .*policy\.hujson \(HSE_POLICY_FILE\); edit that file instead/);
});
