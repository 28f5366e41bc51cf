// The activity log through the real router: filters, paging, CSV (with formula cells neutralised) and JSON exports,
// the JSON API, and the live tail (Server-Sent Events): headers that keep proxies from buffering, a new entry
// delivered as it happens with the client's address, filters applied to the tail, resuming with Last-Event-ID, and the
// tail ending when the session does. Entries other services would write are added with shared/activity.ts ActivityLog.record(),
// exactly as those services do.
import test from 'ava';
import { ActivityLog } from '../../shared/activity.ts';
import type { Image } from '../harness/image.ts';
import { Client, entryOf, PASSWORD, startConsole } from '../harness/console-client.ts';

interface Entry {
  id: string;
  time: string;
  action: string;
  actor: string;
  ip: string;
  target: string;
  details: Record<string, unknown>;
}
interface ApiPage {
  entries: Entry[];
  older: string | null;
  newer: string | null;
  partial: boolean;
}

let image: Image;
let admin: Client;
const limits = { maxEntries: 100_000, retentionDays: 90 };

test.before(async () => {
  image = await startConsole();
  admin = new Client(image.url);
  const r = await admin.signIn('admin', PASSWORD);
  if (r.status !== 303) throw new Error(`sign-in failed: ${r.status}`);
  const redis = image.redis!.client();
  for (let i = 0; i < 120; i++) {
    await new ActivityLog(redis, limits).record({ action: 'test.paging', actor: 'cli', ip: '', target: `item-${i}`, details: { i } });
  }
  await new ActivityLog(redis, limits).record({
    action: 'node.rename',
    actor: 'alice',
    ip: '10.1.2.3',
    target: 'laptop',
    details: { from: 'laptop', to: 'workstation' },
  });
  await new ActivityLog(redis, limits).record({ action: 'node.delete', actor: 'bob', ip: '2001:db8::7', target: 'phone', details: {} });
});
test.after.always(async () => {
  await image?.stop();
});

async function api(query: string): Promise<ApiPage> {
  const r = await admin.request(`/console/api/logs${query}`);
  if (r.status !== 200) throw new Error(`API ${query}: ${r.status} ${r.body}`);
  return JSON.parse(r.body) as ApiPage;
}

test('pages: newest first, older and newer cursors walk the whole filtered log', async (t) => {
  const p1 = await api('?action=test.paging');
  t.is(p1.entries.length, 50);
  t.is(p1.entries[0].target, 'item-119');
  t.is(p1.newer, null);
  const p2 = await api(`?action=test.paging&before=${p1.older}`);
  const p3 = await api(`?action=test.paging&before=${p2.older}`);
  t.is(p2.entries[0].target, 'item-69');
  t.is(p3.entries.length, 20);
  t.is(p3.entries.at(-1)!.target, 'item-0');
  t.is(p3.older, null);
  const back = await api(`?action=test.paging&after=${p3.newer}`);
  t.deepEqual(
    back.entries.map((e) => e.target),
    p2.entries.map((e) => e.target),
  );
  const small = await api('?action=test.paging&limit=5');
  t.is(small.entries.length, 5);
  t.is((await admin.request('/console/api/logs?limit=100000')).status, 400);
});

test('filters: action prefix, actor, address or CIDR, text, time range', async (t) => {
  t.deepEqual((await api('?action=node.*')).entries.map((e) => e.action).sort(), ['node.delete', 'node.rename']);
  t.deepEqual(
    (await api('?actor=ALICE')).entries.map((e) => e.target),
    ['laptop'],
  );
  t.deepEqual(
    (await api('?address=10.0.0.0/8')).entries.map((e) => e.actor),
    ['alice'],
  );
  t.deepEqual(
    (await api('?address=2001:db8::7')).entries.map((e) => e.actor),
    ['bob'],
  );
  t.deepEqual(
    (await api('?text=workstation')).entries.map((e) => e.actor),
    ['alice'],
  );
  const all = await api('?action=test.paging&limit=500');
  const mid = all.entries[60];
  const ranged = await api(`?action=test.paging&from=${encodeURIComponent(mid.time)}&to=${encodeURIComponent(all.entries[10].time)}&limit=500`);
  t.true(ranged.entries.length >= 51, `${ranged.entries.length} entries in range`);
  t.true(ranged.entries.every((e) => e.time >= mid.time && e.time <= all.entries[10].time));
  const bad = await admin.request('/console/api/logs?address=not-an-ip');
  t.is(bad.status, 400);
  t.regex(JSON.parse(bad.body).error, /not an IP address or CIDR/);
});

test('the Logs page renders entries escaped, with filters kept in the form and export links', async (t) => {
  const redis = image.redis!.client();
  await new ActivityLog(redis, limits).record({
    action: 'test.escape',
    actor: '<img src=x onerror=alert(1)>',
    ip: '192.0.2.1',
    target: '"><script>alert(1)</script>',
  });
  const r = await admin.request('/console/logs?action=test.escape');
  t.is(r.status, 200);
  t.false(r.body.includes('<img src=x'));
  t.false(r.body.includes('<script>alert(1)'));
  t.true(r.body.includes('&lt;img src=x onerror=alert(1)&gt;'));
  t.regex(r.body, /name="action" value="test.escape"/);
  t.regex(r.body, /href="\/console\/logs\/export.csv\?action=test.escape"/);
  t.regex(r.body, /href="\/console\/logs\/export.json\?action=test.escape"/);
  t.regex(r.body, /data-stream="\/console\/logs\/stream\?action=test.escape&amp;after=\d+-\d+"/);
});

test('CSV export neutralises cells that a spreadsheet would run as a formula', async (t) => {
  const redis = image.redis!.client();
  for (const name of ['=HYPERLINK("http://evil.example","x")', '+1+1', '-2+3', '@SUM(A1)', '\t=1', '\r=1', 'plain, "quoted"'])
    await new ActivityLog(redis, limits).record({ action: 'test.csv', actor: name, ip: '192.0.2.9', target: name });
  // A failed sign-in with a formula as user name: the way an attacker would plant one without any account.
  await new Client(image.url, '127.0.0.8').signIn('=cmd|x', 'whatever');
  const planted = await admin.request('/console/logs/export.csv?action=console.signin_failed&address=127.0.0.8');
  t.true(planted.body.includes(",'=cmd|x,127.0.0.8,'=cmd|x,"), planted.body);
  const r = await admin.request('/console/logs/export.csv?action=test.csv');
  t.is(r.status, 200);
  t.regex(String(r.headers['content-type']), /^text\/csv/);
  t.regex(String(r.headers['content-disposition']), /^attachment; filename="hse-activity-.*\.csv"$/);
  const lines = r.body.split('\r\n');
  t.is(lines[0], 'id,time,action,actor,address,target,details');
  t.true(r.body.includes(`,"'=HYPERLINK(""http://evil.example"",""x"")",`));
  t.true(r.body.includes(",'+1+1,"));
  t.true(r.body.includes(",'-2+3,"));
  t.true(r.body.includes(",'@SUM(A1),"));
  t.true(r.body.includes(",'\t=1,"));
  t.true(r.body.includes(`,"'\r=1",`));
  t.true(r.body.includes(`,"plain, ""quoted""",`));
  for (const line of lines.slice(1).filter((l) => l.startsWith('1'))) {
    const actorCell = line.split(',')[3];
    t.notRegex(actorCell, /^"?[=+\-@]/, line);
  }
});

test('JSON export holds every matching entry', async (t) => {
  const r = await admin.request('/console/logs/export.json?action=test.paging');
  t.is(r.status, 200);
  t.regex(String(r.headers['content-disposition']), /\.json"$/);
  const all = JSON.parse(r.body) as Entry[];
  t.is(all.length, 120);
  t.is(all[0].target, 'item-119');
});

test('the live tail streams through the router unbuffered and delivers a new entry with the client address', async (t) => {
  const s = await admin.stream();
  t.teardown(() => s.close());
  t.is(s.res.statusCode, 200);
  t.regex(String(s.res.headers['content-type']), /^text\/event-stream/);
  t.is(s.res.headers['x-accel-buffering'], 'no');
  t.is(s.res.headers['cache-control'], 'no-cache');
  const other = new Client(image.url, '127.0.0.7');
  await other.signIn('tail-probe', 'wrong');
  const ev = await s.waitFor((e) => e.event === 'entry' && entryOf(e).actor === 'tail-probe', 'failed sign-in from 127.0.0.7');
  const entry = entryOf(ev);
  t.is(entry.action, 'console.signin_failed');
  t.is(entry.ip, '127.0.0.7');
  t.is(ev.id, entry.id);
  t.true(s.raw.startsWith('retry: '), 'the stream opens at once with a retry hint');
});

test('the live tail applies the filters, and resumes after Last-Event-ID', async (t) => {
  const redis = image.redis!.client();
  const s = await admin.stream('?action=test.tail');
  t.teardown(() => s.close());
  await new ActivityLog(redis, limits).record({ action: 'test.other', actor: 'cli', ip: '', target: 'skip-me' });
  await new ActivityLog(redis, limits).record({ action: 'test.tail', actor: 'cli', ip: '', target: 'one' });
  const one = await s.waitFor((e) => e.event === 'entry', 'test.tail entry');
  t.is(entryOf(one).target, 'one');
  t.false(s.raw.includes('skip-me'));
  s.close();
  await new ActivityLog(redis, limits).record({ action: 'test.tail', actor: 'cli', ip: '', target: 'two' });
  await new ActivityLog(redis, limits).record({ action: 'test.tail', actor: 'cli', ip: '', target: 'three' });
  // As EventSource does when it reconnects:
  const again = await admin.stream('?action=test.tail', { 'last-event-id': one.id });
  t.teardown(() => again.close());
  await again.waitFor((e) => e.event === 'entry' && entryOf(e).target === 'three', 'catch-up to "three"');
  t.deepEqual(
    again.events.filter((e) => e.event === 'entry').map((e) => entryOf(e).target),
    ['two', 'three'],
  );
});

test('the live tail needs a session, and ends when the session does', async (t) => {
  const anon = await new Client(image.url).stream();
  t.is(anon.res.statusCode, 401);
  anon.close();

  const c = new Client(image.url);
  await c.signIn('admin', PASSWORD);
  const s = await c.stream();
  t.teardown(() => s.close());
  t.is(s.res.statusCode, 200);
  const csrf = await c.sessionCsrf();
  await c.request('/console/logout', { form: { csrf } });
  // The tail checks its session with every heartbeat (at most 15 s apart).
  const end = await s.waitFor((e) => e.event === 'end', '"end" event after sign-out', 40_000);
  t.regex(end.data, /signed-out/);
});
