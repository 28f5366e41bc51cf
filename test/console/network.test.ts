// The console's network management through the real router, with the coordination service and Redis running, and
// machines joining with our own control client (test/harness/control-client.ts) so every case is quick and
// exact: users, pre-auth keys, machines (filters, detail, rename, move, expire, delete), device approval, console
// accounts and roles. The official Tailscale client and the browser are in network-browser.test.ts.
// Checked here: every change is refused for an auditor with 403 and a page saying why (including every form an
// administrator sees), every form carries the CSRF token, admin API refusals are shown in their own words, and every
// change lands in the activity log with actor, client address, target and what changed.
import test from 'ava';
import { AdminClient } from '../../shared/admin-client.ts';
import { parseConfig } from '../../shared/config.ts';
import { adminSocket } from '../../shared/paths.ts';
import { K } from '../../shared/redis-keys.ts';
import { ControlClient, serverKey, type MapStream } from '../harness/control-client.ts';
import { startImage, type Image } from '../harness/image.ts';
import { Client, PASSWORD } from '../harness/console-client.ts';

let image: Image;
let admin: Client;
let api: AdminClient;
const cli = { actor: 'test', ip: '' };
const controls: ControlClient[] = [];

test.before(async () => {
  image = await startImage({ env: { HSE_CONSOLE_PASSWORD: PASSWORD } });
  api = new AdminClient(adminSocket(parseConfig(image.env)));
  admin = new Client(image.url);
  const r = await admin.signIn('admin', PASSWORD);
  if (r.status !== 303) throw new Error(`admin sign-in answered ${r.status}`);
});

test.after.always(async () => {
  for (const c of controls) c.close();
  await image?.stop();
});

interface Join {
  client: ControlClient;
  stream: MapStream;
}

/** A machine joins with a pre-auth key (our own control client) and keeps its map stream open, so it is online. */
async function join(hostname: string, key: string, extra: Record<string, unknown> = {}): Promise<Join> {
  const client = await ControlClient.connect(image.port, await serverKey(image.url));
  controls.push(client);
  const hostinfo = { Hostname: hostname, OS: 'linux', Distro: 'debian', DistroVersion: '12', IPNVersion: '1.102.3-tabc-gdef' };
  const r = await client.register({ Auth: { AuthKey: key }, Hostinfo: hostinfo, ...extra });
  if (!r.MachineAuthorized) throw new Error(`${hostname} not authorized: ${JSON.stringify(r)}`);
  const stream = client.stream({ Hostinfo: hostinfo });
  await stream.waitFor(() => true, 'first map');
  return { client, stream };
}

/** A device asking to join without a key: returns its auth id (the end of the AuthURL). */
async function ask(hostname: string): Promise<string> {
  const client = await ControlClient.connect(image.port, await serverKey(image.url));
  controls.push(client);
  const r = await client.register({ Hostinfo: { Hostname: hostname, OS: 'windows', OSVersion: '10.0.22631', IPNVersion: '1.102.3' } });
  if (!r.AuthURL) throw new Error(`no AuthURL: ${JSON.stringify(r)}`);
  return r.AuthURL.split('/').pop()!;
}

async function keyFor(user: string, opts: Record<string, string> = {}): Promise<string> {
  const r = await admin.post('/console/keys', { newUser: user, lifetime: '86400', reusable: '1', ...opts });
  const m = /id="new-key">(hse-auth-[0-9a-f]{12}-[A-Za-z0-9_-]{32})</.exec(r.body);
  if (r.status !== 200 || !m) throw new Error(`key not created (${r.status}): ${text(r.body).slice(0, 500)}`);
  return m[1];
}

/** Polls the admin API until `cond` holds (state changes travel through Redis pub/sub). */
async function until(what: string, cond: () => Promise<boolean>, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The visible text of a page, for messages. */
function text(body: string): string {
  return body
    .replace(/<[^>]+>/g, ' ')
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&amp;/g, '&')
    .replace(/\s+/g, ' ')
    .replace(/ ([),.;:])/g, '$1')
    .replace(/\( /g, '(');
}

/** Actions of every state-changing form on a page. */
function postForms(body: string): string[] {
  return [...body.matchAll(/<form method="post" action="([^"]+)"/g)].map((m) => m[1]);
}

async function activity(action: string): Promise<{ actor: string; ip: string; target: string; details: Record<string, unknown> }[]> {
  const r = await admin.request(`/console/api/logs?action=${encodeURIComponent(action)}&limit=50`);
  return (JSON.parse(r.body) as { entries: { actor: string; ip: string; target: string; details: Record<string, unknown> }[] }).entries;
}

test.serial('with nothing in the tailnet, the console opens on Machines with the next step spelled out', async (t) => {
  const home = await admin.request('/console');
  t.is(home.headers.location, `${image.env.HSE_PUBLIC_URL}/console/machines`);
  const r = await admin.request('/console/machines');
  t.is(r.status, 200);
  t.regex(text(r.body), /No machines yet/);
  t.true(r.body.includes(`tailscale up --login-server=${image.env.HSE_PUBLIC_URL} --auth-key=&lt;key&gt;`), 'the command to run');
  t.regex(r.body, /href="\/console\/keys#create">Create a pre-auth key</);
  const nav = /<nav class="nav"[\s\S]*?<\/nav>/.exec(r.body)![0];
  t.deepEqual(
    [...nav.matchAll(/>([A-Za-z ]+)<\/a>/g)].map((m) => m[1]),
    ['Machines', 'Routes', 'Users', 'Keys', 'Access controls', 'DNS', 'API keys', 'Webhooks', 'Logs', 'Accounts'],
  );
  t.regex(text((await admin.request('/console/users')).body), /No users yet/);
  t.regex(text((await admin.request('/console/keys')).body), /No keys yet/);
});

test.serial("users: create, rename, and delete refused while the user owns machines, in the admin API's words", async (t) => {
  const created = await admin.post('/console/users', { name: 'Alice', displayName: 'Alice Example' });
  t.is(created.status, 303);
  const list = await admin.request('/console/users');
  t.regex(text(list.body), /Created user alice/);
  t.regex(list.body, /data-name="alice"/);
  t.regex(text(list.body), /Alice Example/);

  const dup = await admin.post('/console/users', { name: 'alice' });
  t.is(dup.status, 409);
  t.regex(text(dup.body), /User "alice" already exists/);
  t.regex(dup.body, /value="alice"/, 'the form keeps what was typed');
  const bad = await admin.post('/console/users', { name: 'no spaces please' });
  t.is(bad.status, 400);
  t.regex(text(bad.body), /A user name is 1 to 63 characters/);

  const alice = (await api.listUsers(cli)).find((u) => u.name === 'alice')!;
  t.is((await admin.post(`/console/users/${alice.id}/rename`, { name: 'alice2' })).status, 303);
  t.is((await admin.post(`/console/users/${alice.id}/rename`, { name: 'alice' })).status, 303);
  const renames = await activity('user.rename');
  t.like(renames[0], { actor: 'admin', ip: '127.0.0.1', target: 'alice', details: { from: 'alice2', to: 'alice' } });

  const key = await keyFor('alice');
  await join('owned', key);
  const refused = await admin.post(`/console/users/${alice.id}/delete`);
  t.is(refused.status, 409);
  t.regex(text(refused.body), /User "alice" still owns 1 machine\(s\); delete them or move them to another user first/);
  t.regex(text(refused.body), /1 machine/, 'the list shows the machine count');
  t.true((await api.listUsers(cli)).some((u) => u.name === 'alice'));

  await admin.post('/console/users', { name: 'temp' });
  const temp = (await api.listUsers(cli)).find((u) => u.name === 'temp')!;
  t.is((await admin.post(`/console/users/${temp.id}/delete`)).status, 303);
  t.like((await activity('user.delete'))[0], { actor: 'admin', ip: '127.0.0.1', target: 'temp' });
  t.like((await activity('user.create'))[0], { actor: 'admin', ip: '127.0.0.1', target: 'temp' });
});

test.serial('pre-auth keys: shown once with the ready command, listed by prefix only, expired on request', async (t) => {
  const r = await admin.post('/console/keys', { user: 'alice', lifetime: '604800', ephemeral: '1' });
  t.is(r.status, 200);
  t.is(r.headers['cache-control'], 'no-store');
  const key = /id="new-key">([^<]+)</.exec(r.body)![1];
  t.regex(key, /^hse-auth-[0-9a-f]{12}-[A-Za-z0-9_-]{32}$/);
  t.true(r.body.includes(`id="new-command">tailscale up --login-server=${image.env.HSE_PUBLIC_URL} --auth-key=${key}<`));
  t.regex(r.body, /data-copy="new-command"/);
  t.regex(text(r.body), /only time the whole key is shown/);

  const prefix = key.split('-').slice(0, 3).join('-');
  const list = await admin.request('/console/keys');
  t.false(list.body.includes(key), 'the list never shows the whole key');
  t.regex(list.body, new RegExp(`data-prefix="${prefix}" data-state="active"`));
  t.regex(text(list.body), /single-use ephemeral active/);

  const entry = (await activity('authkey.create'))[0];
  t.like(entry, { actor: 'admin', ip: '127.0.0.1', target: prefix, details: { user: 'alice', reusable: false, ephemeral: true } });
  t.false(JSON.stringify(entry).includes(key), 'the log never holds the key');

  const id = (await api.listPreAuthKeys(cli)).find((k) => k.prefix === prefix)!.id;
  t.is((await admin.post(`/console/keys/${id}/expire`)).status, 303);
  const after = await admin.request('/console/keys');
  t.regex(after.body, new RegExp(`data-prefix="${prefix}" data-state="expired"`));
  t.regex(text(after.body), new RegExp(`Expired ${prefix}; no new device can use it`));
  t.like((await activity('authkey.expire'))[0], { actor: 'admin', ip: '127.0.0.1', target: prefix });

  const noUser = await admin.post('/console/keys', { user: 'nobody', lifetime: '3600' });
  t.is(noUser.status, 404);
  t.regex(text(noUser.body), /No user "nobody"/);
  const badLifetime = await admin.post('/console/keys', { user: 'alice', lifetime: '5' });
  t.is(badLifetime.status, 400);
});

test.serial('machines: list with owner, addresses, state, OS and version, expiry; search and filters; detail', async (t) => {
  const bobKey = await keyFor('bob');
  const soon = new Date(Date.now() + 3 * 86_400_000).toISOString();
  const later = new Date(Date.now() + 90 * 86_400_000).toISOString();
  await join('web-1', bobKey, { Expiry: soon });
  const db = await join('db-1', bobKey, { Expiry: later });
  db.client.close(); // goes offline

  const nodes = await api.listNodes(cli);
  const web = nodes.find((n) => n.givenName === 'web-1')!;
  const dbId = nodes.find((n) => n.givenName === 'db-1')!.id;
  await until('db-1 offline', async () => !(await api.getNode(cli, dbId)).online);

  const r = await admin.request('/console/machines');
  t.is(r.status, 200);
  const row = new RegExp(`<tr data-id="${web.id}" data-name="web-1" data-online="true">[\\s\\S]*?</tr>`).exec(r.body)![0];
  const cells = text(row);
  t.regex(cells, /web-1/);
  t.regex(cells, /web-1\.hse\.internal/);
  t.regex(cells, /bob/);
  t.true(cells.includes(web.ipv4) && cells.includes(web.ipv6));
  t.regex(cells, /Online/);
  t.regex(cells, /Linux · Debian 12/);
  t.regex(cells, /Tailscale 1\.102\.3/);
  t.regex(cells, /in 3 days/);
  t.regex(r.body, /data-name="db-1" data-online="false"/);
  t.regex(text(r.body), /3 machines · 2 online/);

  const names = async (q: string) =>
    [...(await admin.request(`/console/machines?${q}`)).body.matchAll(/<tr data-id="\d+" data-name="([^"]+)"/g)].map((m) => m[1]);
  t.deepEqual(await names('owner=bob'), ['db-1', 'web-1']);
  t.deepEqual(await names('status=online'), ['owned', 'web-1']);
  t.deepEqual(await names('status=offline'), ['db-1']);
  t.deepEqual(await names('expiry=soon'), ['web-1']);
  t.deepEqual(await names('q=debian+db'), ['db-1']);
  t.deepEqual(await names(`q=${web.ipv4}`), ['web-1']);
  t.deepEqual(await names('expiry=expired'), []);

  const detail = await admin.request(`/console/machines/${web.id}`);
  t.is(detail.status, 200);
  const facts = text(detail.body);
  for (const s of ['web-1.hse.internal', web.ipv4, web.ipv6, 'Linux · Debian 12', '1.102.3-tabc-gdef', 'pre-auth key #']) t.true(facts.includes(s), s);
  t.deepEqual(postForms(detail.body), [
    '/console/logout',
    `/console/machines/${web.id}/rename`,
    `/console/machines/${web.id}/move`,
    `/console/machines/${web.id}/tags`,
    `/console/machines/${web.id}/key-expiry`,
    `/console/machines/${web.id}/expire`,
    `/console/machines/${web.id}/delete`,
  ]);
  t.is((await admin.request('/console/machines/99999')).status, 404);
  t.is((await admin.request('/console/machines/nope')).status, 404);
});

test.serial('machines: rename, move, expire and delete, each logged by the coordination service with the console account', async (t) => {
  const web = (await api.listNodes(cli)).find((n) => n.givenName === 'web-1')!;
  const renamed = await admin.post(`/console/machines/${web.id}/rename`, { name: 'Frontend' });
  t.is(renamed.status, 303);
  t.is(renamed.headers.location, `${image.env.HSE_PUBLIC_URL}/console/machines/${web.id}`);
  t.regex(text((await admin.request(`/console/machines/${web.id}`)).body), /Renamed\. Clients now reach it as frontend\.hse\.internal/);
  t.like((await activity('node.rename'))[0], { actor: 'admin', ip: '127.0.0.1', target: 'frontend', details: { from: 'web-1', to: 'frontend' } });

  const taken = await admin.post(`/console/machines/${web.id}/rename`, { name: 'db-1' });
  t.is(taken.status, 409);
  t.regex(text(taken.body), /The name "db-1" is taken by another machine/);
  const invalid = await admin.post(`/console/machines/${web.id}/rename`, { name: 'no_underscores!' });
  t.is(invalid.status, 400);

  const alice = (await api.listUsers(cli)).find((u) => u.name === 'alice')!;
  t.is((await admin.post(`/console/machines/${web.id}/move`, { user: String(alice.id) })).status, 303);
  t.is((await api.getNode(cli, web.id)).user, 'alice');
  t.like((await activity('node.move'))[0], { actor: 'admin', target: 'frontend', details: { from: 'bob', to: 'alice' } });

  t.is((await admin.post(`/console/machines/${web.id}/expire`)).status, 303);
  t.true((await api.getNode(cli, web.id)).expired);
  const expiredList = await admin.request('/console/machines?expiry=expired');
  t.regex(expiredList.body, /data-name="frontend"/);
  t.regex(text(expiredList.body), /Expired/);
  t.like((await activity('node.expire'))[0], { actor: 'admin', ip: '127.0.0.1', target: 'frontend' });

  const deleted = await admin.post(`/console/machines/${web.id}/delete`);
  t.is(deleted.status, 303);
  t.is(deleted.headers.location, `${image.env.HSE_PUBLIC_URL}/console/machines`);
  const list = await admin.request('/console/machines');
  t.notRegex(list.body, /data-name="frontend"/);
  t.regex(text(list.body), new RegExp(`Deleted frontend; its addresses ${web.ipv4.replace(/\./g, '\\.')}`));
  t.like((await activity('node.delete'))[0], { actor: 'admin', ip: '127.0.0.1', target: 'frontend' });
  t.is((await admin.post(`/console/machines/${web.id}/delete`)).status, 404, 'a machine that is gone');
});

test.serial('device approval: the page shows the device, approves it for a new user, and says so afterwards', async (t) => {
  const authId = await ask('laptop-7');
  // Not signed in: to the sign-in page and, after it, back here.
  const anon = new Client(image.url, '127.0.0.5');
  const redirect = await anon.request(`/console/register/${authId}`);
  t.is(redirect.status, 302);
  t.is(redirect.headers.location, `${image.env.HSE_PUBLIC_URL}/console/login?next=${encodeURIComponent(`/console/register/${authId}`)}`);
  const signedIn = await anon.signIn('admin', PASSWORD, `/console/register/${authId}`);
  t.is(signedIn.headers.location, `${image.env.HSE_PUBLIC_URL}/console/register/${authId}`);

  const r = await anon.request(`/console/register/${authId}`);
  t.is(r.status, 200);
  const body = text(r.body);
  t.regex(body, /A device wants to join the tailnet/);
  t.regex(body, /laptop-7/);
  t.regex(body, /Windows 10\.0\.22631/);
  t.regex(body, /Asked from 127\.0\.0\.1/);
  t.regex(body, /1\.102\.3/);

  const list = await admin.request('/console/machines');
  t.regex(list.body, new RegExp(`data-auth-id="${authId}"`), 'waiting devices are listed on Machines');
  t.true(list.body.indexOf('Waiting for approval') < list.body.indexOf('id="machines-table"'), 'and come first');

  const approved = await anon.post(`/console/register/${authId}/approve`, { newUser: 'carol' });
  t.is(approved.status, 303);
  t.is(approved.headers.location, `${image.env.HSE_PUBLIC_URL}/console/register/${authId}`);
  const after = await anon.request(`/console/register/${authId}`);
  t.regex(after.body, /data-status="approved"/);
  t.regex(text(after.body), /It joined as laptop-7 \(100\.\d+\.\d+\.\d+\) for user carol, approved by admin/);
  const node = (await api.listNodes(cli)).find((n) => n.givenName === 'laptop-7')!;
  t.is(node.user, 'carol');
  t.like((await activity('node.approve'))[0], { actor: 'admin', ip: '127.0.0.5', target: 'laptop-7', details: { user: 'carol' } });
  t.like((await activity('user.create'))[0], { actor: 'admin', ip: '127.0.0.5', target: 'carol' });

  const again = await anon.post(`/console/register/${authId}/approve`, { user: 'carol' });
  t.is(again.status, 409);
  t.regex(text(again.body), /This login request was already approved/);

  const other = await ask('intruder');
  t.is((await admin.post(`/console/register/${other}/reject`, { from: 'machines' })).headers.location, `${image.env.HSE_PUBLIC_URL}/console/machines`);
  t.regex((await admin.request(`/console/register/${other}`)).body, /data-status="rejected"/);
  t.like((await activity('node.reject'))[0], { actor: 'admin', ip: '127.0.0.1', target: 'intruder' });

  const unknown = await admin.request('/console/register/doesnotexist123');
  t.is(unknown.status, 404);
  t.regex(text(unknown.body), /This login link is unknown or has expired/);
  t.true(unknown.body.includes(`tailscale up --login-server=${image.env.HSE_PUBLIC_URL}`));
  t.is((await admin.request('/console/register/bad%20id!')).status, 404);
});

test.serial('the live machine view sends a new rendering when a machine joins, changes or leaves', async (t) => {
  const events = await admin.streamAt('/console/machines/stream');
  t.teardown(() => events.close());
  t.is(events.res.headers['content-type'], 'text/event-stream; charset=utf-8');
  t.is(events.res.headers['x-accel-buffering'], 'no');
  await events.waitFor((e) => e.event === 'html', 'the first rendering');
  const key = await keyFor('dave');
  const live = await join('live-one', key);
  await events.waitFor((e) => e.event === 'html' && /data-name="live-one" data-online="true"/.test(JSON.parse(e.data).html), 'live-one online');
  const id = (await api.listNodes(cli)).find((n) => n.givenName === 'live-one')!.id;

  const detail = await admin.streamAt(`/console/machines/stream?id=${id}`);
  t.teardown(() => detail.close());
  await detail.waitFor((e) => e.event === 'html' && /data-online="true"/.test(JSON.parse(e.data).html), 'detail online');
  live.client.close();
  await events.waitFor((e) => e.event === 'html' && /data-name="live-one" data-online="false"/.test(JSON.parse(e.data).html), 'live-one offline');
  await detail.waitFor((e) => e.event === 'html' && /data-online="false"/.test(JSON.parse(e.data).html), 'detail offline');
  await api.deleteNode(cli, id);
  await events.waitFor((e) => e.event === 'html' && !/data-name="live-one"/.test(JSON.parse(e.data).html), 'live-one gone');
  await detail.waitFor((e) => e.event === 'html' && /This machine was deleted/.test(JSON.parse(e.data).html), 'detail says deleted');
});

test.serial('console accounts: create, disable (sessions end), enable, reset password, delete; no self-lockout', async (t) => {
  const created = await admin.post('/console/accounts', { username: 'erin', role: 'auditor', password: '' });
  t.is(created.status, 200);
  const generated = /id="generated-password">([^<]+)</.exec(created.body)![1];
  t.true(generated.length >= 20);
  t.regex(text(created.body), /shown only this once/);
  t.like((await activity('console.account_create'))[0], {
    actor: 'admin',
    ip: '127.0.0.1',
    target: 'erin',
    details: { role: 'auditor', password: 'generated' },
  });
  t.false(JSON.stringify(await activity('console.*')).includes(generated), 'the password never reaches the log');

  const short = await admin.post('/console/accounts', { username: 'frank', role: 'admin', password: 'short' });
  t.is(short.status, 400);
  t.regex(text(short.body), /at least 12 characters/);
  t.is((await admin.post('/console/accounts', { username: 'ERIN', role: 'admin', password: '' })).status, 409);

  const erin = new Client(image.url, '127.0.0.7');
  t.is((await erin.signIn('erin', generated)).status, 303);
  t.is((await erin.request('/console/machines')).status, 200);

  t.is((await admin.post('/console/accounts/erin/disable')).status, 303);
  const ended = await erin.request('/console/machines');
  t.is(ended.status, 302, "a disabled account's session ends at once");
  t.is((await erin.signIn('erin', generated)).status, 401);
  t.like((await activity('console.account_disable'))[0], { actor: 'admin', ip: '127.0.0.1', target: 'erin', details: { sessionsEnded: true } });

  t.is((await admin.post('/console/accounts/erin/enable')).status, 303);
  t.is((await erin.signIn('erin', generated)).status, 303);
  const reset = await admin.post('/console/accounts/erin/reset-password');
  t.is(reset.status, 200);
  const fresh = /id="generated-password">([^<]+)</.exec(reset.body)![1];
  t.not(fresh, generated);
  t.is((await erin.request('/console/machines')).status, 302, 'a reset ends the sessions');
  t.is((await erin.signIn('erin', generated)).status, 401);
  t.is((await erin.signIn('erin', fresh)).status, 303);
  t.like((await activity('console.password_reset'))[0], { actor: 'admin', target: 'erin' });

  t.is((await admin.post('/console/accounts/erin/delete')).status, 303);
  t.is((await erin.request('/console/machines')).status, 302);
  t.like((await activity('console.account_delete'))[0], { actor: 'admin', target: 'erin' });
  t.notRegex((await admin.request('/console/accounts')).body, /data-name="erin"/);

  for (const what of ['disable', 'delete', 'reset-password']) {
    const self = await admin.post(`/console/accounts/admin/${what}`);
    t.is(self.status, 409, what);
    t.regex(text(self.body), /You cannot do this to your own account here/);
  }
  // Another administrator can disable this one (and that ends its sessions too), and enable it again.
  await admin.post('/console/accounts', { username: 'grace', role: 'admin', password: 'grace has a long password' });
  const grace = new Client(image.url, '127.0.0.8');
  t.is((await grace.signIn('grace', 'grace has a long password')).status, 303);
  t.is((await grace.post('/console/accounts/admin/disable')).status, 303);
  t.is((await admin.request('/console/machines')).status, 302);
  t.is((await grace.post('/console/accounts/admin/enable')).status, 303);
  t.is((await admin.signIn('admin', PASSWORD)).status, 303);
  admin.csrf = undefined;
  t.is((await admin.post('/console/accounts/grace/delete')).status, 303);
  t.is((await grace.request('/console/machines')).status, 302);
});

test.serial('everyone changes their own password; other sessions end, this one stays', async (t) => {
  await admin.post('/console/accounts', { username: 'ivy', role: 'auditor', password: 'ivy first password' });
  const ivy = new Client(image.url, '127.0.0.10');
  const ivy2 = new Client(image.url, '127.0.0.11');
  await ivy.signIn('ivy', 'ivy first password');
  await ivy2.signIn('ivy', 'ivy first password');
  const page = await ivy.request('/console/account');
  t.is(page.status, 200);
  t.deepEqual(postForms(page.body), ['/console/logout', '/console/account/password']);

  const wrong = await ivy.post('/console/account/password', { current: 'not it', password: 'ivy second password', confirm: 'ivy second password' });
  t.is(wrong.status, 401);
  t.regex(text(wrong.body), /current password is not right/);
  const differ = await ivy.post('/console/account/password', { current: 'ivy first password', password: 'ivy second password', confirm: 'ivy other password' });
  t.is(differ.status, 400);
  const ok = await ivy.post('/console/account/password', { current: 'ivy first password', password: 'ivy second password', confirm: 'ivy second password' });
  t.is(ok.status, 303);
  ivy.csrf = undefined;
  const mine = await ivy.request('/console/account');
  t.is(mine.status, 200, 'this session continues');
  t.regex(text(mine.body), /Password changed\. Your other sessions have ended\./);
  t.is((await ivy2.request('/console/account')).status, 302, 'the other session ended');
  t.is((await new Client(image.url, '127.0.0.12').signIn('ivy', 'ivy second password')).status, 303);
  t.like((await activity('console.password_change'))[0], { actor: 'ivy', ip: '127.0.0.10', target: 'ivy' });
});

test.serial('every form an administrator sees carries the CSRF token, and a change without it is refused', async (t) => {
  const authId = await ask('csrf-check');
  const someMachine = (await api.listNodes(cli))[0];
  const pages = [
    '/console/machines',
    `/console/machines/${someMachine.id}`,
    '/console/users',
    '/console/keys',
    '/console/dns',
    '/console/accounts',
    '/console/account',
    `/console/register/${authId}`,
  ];
  let forms = 0;
  for (const p of pages) {
    const body = (await admin.request(p)).body;
    for (const m of body.matchAll(/<form method="post"[\s\S]*?<\/form>/g)) {
      forms++;
      t.regex(m[0], /<input type="hidden" name="csrf" value="[A-Za-z0-9_-]{43}">/, `${p}: ${m[0].slice(0, 120)}`);
    }
  }
  t.true(forms > 15, `${forms} forms checked`);
  const users = await admin.request('/console/users', { form: { name: 'sneaky' } });
  t.is(users.status, 403);
  t.regex(text(users.body), /security token/);
  const wrong = await admin.request(`/console/machines/${someMachine.id}/delete`, { form: { csrf: 'x'.repeat(43) } });
  t.is(wrong.status, 403);
  t.truthy(await api.getNode(cli, someMachine.id));
  t.false((await api.listUsers(cli)).some((u) => u.name === 'sneaky'));
});

test.serial('an auditor sees every page and changes nothing: each change is 403 with a page saying why', async (t) => {
  t.is((await admin.post('/console/accounts', { username: 'audrey', role: 'auditor', password: 'audrey reads only' })).status, 303);
  const auditor = new Client(image.url, '127.0.0.20');
  t.is((await auditor.signIn('audrey', 'audrey reads only')).status, 303);
  const authId = await ask('waiting-box');
  const node = (await api.listNodes(cli))[0];
  const user = (await api.listUsers(cli))[0];
  const key = (await api.listPreAuthKeys(cli)).find((k) => !k.expired)!;

  // Reading: every page, with the data and without a single change button (only sign-out, and the own password).
  const pages = [
    '/console/machines',
    `/console/machines/${node.id}`,
    '/console/users',
    '/console/keys',
    '/console/dns',
    '/console/accounts',
    '/console/logs',
    `/console/register/${authId}`,
  ];
  for (const p of pages) {
    const r = await auditor.request(p);
    t.is(r.status, 200, p);
    t.deepEqual(postForms(r.body), ['/console/logout'], `${p} has no change buttons`);
  }
  t.regex((await auditor.request('/console/machines')).body, new RegExp(`data-name="${node.givenName}"`));
  t.regex(text((await auditor.request('/console/machines')).body), /waiting for an administrator/);
  t.regex(text((await auditor.request('/console/users')).body), /read-only Your auditor account can see users but not change it/);
  t.regex((await auditor.request('/console/accounts')).body, /data-name="admin"/);

  // Every form an administrator sees on those pages, posted by the auditor, plus the routes behind forms the auditor
  // cannot see at all.
  const actions = new Set<string>();
  for (const p of pages) for (const a of postForms((await admin.request(p)).body)) actions.add(a);
  for (const a of [
    '/console/users',
    `/console/users/${user.id}/rename`,
    `/console/users/${user.id}/delete`,
    '/console/keys',
    `/console/keys/${key.id}/expire`,
    `/console/machines/${node.id}/rename`,
    `/console/machines/${node.id}/move`,
    `/console/machines/${node.id}/key-expiry`,
    `/console/machines/${node.id}/expire`,
    `/console/machines/${node.id}/delete`,
    '/console/dns',
    `/console/register/${authId}/approve`,
    `/console/register/${authId}/reject`,
    '/console/accounts',
    '/console/accounts/admin/disable',
    '/console/accounts/admin/enable',
    '/console/accounts/admin/reset-password',
    '/console/accounts/admin/delete',
  ]) {
    actions.add(a);
  }
  actions.delete('/console/logout');
  actions.delete('/console/account/password');
  const before = JSON.stringify(
    [await api.listNodes(cli), await api.listUsers(cli), await api.listPreAuthKeys(cli), await api.listPending(cli)].map((x) => x.length),
  );
  const form = {
    name: 'x-renamed',
    user: String(user.id),
    newUser: 'mallory',
    lifetime: '3600',
    username: 'mallory',
    role: 'admin',
    password: 'mallory password!',
    disabled: '1',
    nameservers: '10.6.6.6',
  };
  for (const a of actions) {
    const r = await auditor.post(a, form);
    t.is(r.status, 403, a);
    t.regex(text(r.body), /Read-only account/, a);
    t.regex(text(r.body), /Your account "audrey" is an auditor account: it can see everything in the console but cannot change anything/, a);
  }
  t.true(actions.size >= 18, `${actions.size} change routes refused`);
  const after = JSON.stringify(
    [await api.listNodes(cli), await api.listUsers(cli), await api.listPreAuthKeys(cli), await api.listPending(cli)].map((x) => x.length),
  );
  t.is(after, before, 'nothing changed');
  t.deepEqual((await api.getDns(cli)).nameservers, [], 'DNS settings unchanged');
  t.is((await api.getNode(cli, node.id)).givenName, node.givenName);
  t.false((await api.listUsers(cli)).some((u) => u.name === 'mallory'));
  t.regex((await admin.request('/console/accounts')).body, /data-name="admin" data-disabled="false"/);

  // The one change an auditor makes: their own password.
  t.is(
    (await auditor.post('/console/account/password', { current: 'audrey reads only', password: 'audrey still reads only', confirm: 'audrey still reads only' }))
      .status,
    303,
  );
});

// Last: it stops the coordination service.
test.serial('with the coordination service down, pages say so (503) and the live view reports it instead of failing', async (t) => {
  const events = await admin.streamAt('/console/machines/stream');
  t.teardown(() => events.close());
  await events.waitFor((e) => e.event === 'html', 'the first rendering');
  await image.procs.coordination!.stop();
  const r = await admin.request('/console/machines');
  t.is(r.status, 503);
  t.is(r.headers['retry-after'], '5');
  t.regex(text(r.body), /Coordination service unavailable/);
  t.regex(text(r.body), /The coordination service is not running\. Machines, users and keys are managed by the coordination service/);
  t.notRegex(r.body, /at .*\.ts:\d+/, 'no stack trace');
  t.is((await admin.post('/console/users', { name: 'later' })).status, 503);
  // Console accounts live in the console itself and keep working.
  t.is((await admin.request('/console/accounts')).status, 200);
  // A change announced now (Redis still runs) makes the live view try, fail, and say why.
  await image.redis!.client().publish(K.changes, JSON.stringify({ kind: 'user.change', userId: 1 }));
  const e = await events.waitFor((x) => x.event === 'unavailable', 'an unavailable event');
  t.regex(JSON.parse(e.data).message, /coordination service is not running/);
});
