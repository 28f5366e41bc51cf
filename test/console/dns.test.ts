// The console's DNS page and the per-machine key-expiry switch, through the real router with the coordination
// service and Redis running: an administrator saves settings with the form (and sees them in force), a refused form
// shows the reason with what was typed and leaves the previous settings in force, every change is in the activity log
// with the console account and address; an auditor reads and changes nothing. Machines joined with our own control
// client show their key expiry (disabled, expired) in the list and on their page.
import test from 'ava';
import { AdminClient } from '../../shared/admin-client.ts';
import { parseConfig } from '../../shared/config.ts';
import { adminSocket } from '../../shared/paths.ts';
import { ControlClient, serverKey } from '../harness/control-client.ts';
import { startImage, type Image } from '../harness/image.ts';
import { Client, PASSWORD } from '../harness/console-client.ts';

let image: Image;
let admin: Client;
let api: AdminClient;
const cli = { actor: 'test', ip: '' };
const controls: ControlClient[] = [];

test.before(async () => {
  image = await startImage({ services: ['coordination', 'console'], env: { HSE_CONSOLE_PASSWORD: PASSWORD } });
  api = new AdminClient(adminSocket(parseConfig(image.env)));
  admin = new Client(image.url);
  if ((await admin.signIn('admin', PASSWORD)).status !== 303) throw new Error('admin sign-in failed');
});
test.after.always(async () => {
  for (const c of controls) c.close();
  await image?.stop();
});

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

async function activity(action: string): Promise<{ actor: string; ip: string; target: string; details: Record<string, unknown> }[]> {
  const r = await admin.request(`/console/api/logs?action=${encodeURIComponent(action)}&limit=50`);
  return (JSON.parse(r.body) as { entries: { actor: string; ip: string; target: string; details: Record<string, unknown> }[] }).entries;
}

const FORM = {
  magicDNS: '1',
  overrideLocalDNS: '1',
  nameservers: '1.1.1.1\nhttps://dns.google/dns-query',
  splitDNS: 'corp.example.com 10.0.0.53 10.0.0.54',
  searchDomains: 'corp.example.com',
  extraRecords: 'grafana.hse.internal A 100.64.0.7\nv6.example.com AAAA fd00::7',
};

test.serial('the DNS page shows MagicDNS on and nothing else until an administrator changes it', async (t) => {
  const r = await admin.request('/console/dns');
  t.is(r.status, 200);
  const body = text(r.body);
  t.regex(body, /MagicDNS on devices reach each other as <name>\.hse\.internal/);
  t.regex(body, /Global nameservers none — devices keep their own resolvers/);
  t.regex(r.body, /<form method="post" action="\/console\/dns"/);
  t.regex(r.body, /<input type="checkbox" name="magicDNS" value="1" checked>/);
  t.regex(r.body, /<a href="\/console\/dns" aria-current="page">DNS<\/a>/);
});

test.serial('saving the form puts the settings in force, shows them, and logs who changed what from where', async (t) => {
  const saved = await admin.post('/console/dns', FORM);
  t.is(saved.status, 303);
  t.is(saved.headers.location, `${image.env.HSE_PUBLIC_URL}/console/dns`);
  t.deepEqual(await api.getDns(cli), {
    magicDNS: true,
    overrideLocalDNS: true,
    nameservers: ['1.1.1.1', 'https://dns.google/dns-query'],
    splitDNS: { 'corp.example.com': ['10.0.0.53', '10.0.0.54'] },
    searchDomains: ['corp.example.com'],
    extraRecords: [
      { name: 'grafana.hse.internal', type: 'A', value: '100.64.0.7' },
      { name: 'v6.example.com', type: 'AAAA', value: 'fd00::7' },
    ],
  });
  const page = await admin.request('/console/dns');
  const body = text(page.body);
  t.regex(body, /DNS settings saved/);
  t.regex(body, /1\.1\.1\.1 , https:\/\/dns\.google\/dns-query override local DNS: every query goes to these/);
  t.regex(body, /corp\.example\.com → 10\.0\.0\.53 , 10\.0\.0\.54/);
  t.regex(body, /grafana\.hse\.internal A 100\.64\.0\.7/);
  t.regex(page.body, /<textarea name="splitDNS"[^>]*>corp\.example\.com 10\.0\.0\.53 10\.0\.0\.54<\/textarea>/, 'the form shows what is in force');
  const entry = (await activity('dns.change'))[0];
  t.like(entry, { actor: 'admin', ip: '127.0.0.1', target: 'dns' });
  t.deepEqual(entry.details.nameservers, { from: [], to: ['1.1.1.1', 'https://dns.google/dns-query'] });
  t.deepEqual(Object.keys(entry.details).sort(), ['extraRecords', 'nameservers', 'overrideLocalDNS', 'searchDomains', 'splitDNS']);
});

test.serial('a refused form shows the reason with what was typed, and the previous settings stay in force', async (t) => {
  const before = await api.getDns(cli);
  const logged = (await activity('dns.change')).length;
  const cases: [Record<string, string>, RegExp][] = [
    [
      { ...FORM, splitDNS: 'printers.hse.internal 10.0.0.1' },
      /SplitDNS: "printers\.hse\.internal" is the tailnet's own domain \(HSE_BASE_DOMAIN hse\.internal\)/,
    ],
    [
      { ...FORM, nameservers: 'https://doh.example.net/dns-query' },
      /Nameservers: "https:\/\/doh\.example\.net\/dns-query" is a DNS-over-HTTPS URL the Tailscale client cannot use/,
    ],
    [{ ...FORM, extraRecords: 'mail.example.com MX 10.0.0.5' }, /type "MX" is not supported/],
    [{ ...FORM, splitDNS: 'corp.example.com' }, /Split DNS, entry 1 \("corp\.example\.com"\): write the domain followed by its nameservers/],
    [{ ...FORM, overrideLocalDNS: '1', nameservers: '' }, /OverrideLocalDNS: needs at least one global nameserver/],
  ];
  for (const [form, message] of cases) {
    const r = await admin.post('/console/dns', form);
    t.is(r.status, 400, JSON.stringify(form));
    t.regex(text(r.body), message);
    t.true(r.body.includes(`>${form.splitDNS}</textarea>`), 'what was typed is still there');
  }
  t.deepEqual(await api.getDns(cli), before);
  t.is((await activity('dns.change')).length, logged, 'nothing logged');
});

test.serial('an auditor reads the DNS settings and cannot change them', async (t) => {
  t.is((await admin.post('/console/accounts', { username: 'audra', role: 'auditor', password: 'audra only reads' })).status, 303);
  const auditor = new Client(image.url, '127.0.0.30');
  t.is((await auditor.signIn('audra', 'audra only reads')).status, 303);
  const r = await auditor.request('/console/dns');
  t.is(r.status, 200);
  t.regex(text(r.body), /corp\.example\.com → 10\.0\.0\.53/);
  t.notRegex(r.body, /action="\/console\/dns"/);
  t.regex(text(r.body), /read-only Your auditor account can see the DNS settings but not change it/);
  const before = await api.getDns(cli);
  const refused = await auditor.post('/console/dns', { ...FORM, nameservers: '10.6.6.6' });
  t.is(refused.status, 403);
  t.regex(text(refused.body), /Read-only account/);
  const noToken = await admin.request('/console/dns', { form: FORM });
  t.is(noToken.status, 403, 'a form without the CSRF token');
  t.deepEqual(await api.getDns(cli), before);
});

test.serial('key expiry per machine: disabled shows as never, enabled again as a date, expired as expired', async (t) => {
  const user = await api.createUser(cli, 'kim');
  const key = (await api.createPreAuthKey(cli, { user: user.id, reusable: true })).key;
  const c = await ControlClient.connect(image.port, await serverKey(image.url));
  controls.push(c);
  t.true((await c.register({ Auth: { AuthKey: key }, Hostinfo: { Hostname: 'nas', OS: 'linux' } })).MachineAuthorized);
  const node = (await api.listNodes(cli)).find((n) => n.givenName === 'nas')!;
  t.truthy(node.expiry, 'the default lifetime applies');
  const row = async () => new RegExp(`<tr data-id="${node.id}"[\\s\\S]*?</tr>`).exec((await admin.request('/console/machines')).body)![0];
  t.regex(text(await row()), /in 6 months/);

  const page = await admin.request(`/console/machines/${node.id}`);
  t.regex(page.body, /<input type="hidden" name="disabled" value="1">/);
  t.regex(text(page.body), /Disable key expiry/);
  t.is((await admin.post(`/console/machines/${node.id}/key-expiry`, { disabled: '1' })).status, 303);
  t.regex(text((await admin.request(`/console/machines/${node.id}`)).body), /Key expiry disabled: the key of nas no longer expires/);
  t.regex(text(await row()), /Never \(disabled\)/);
  t.like((await activity('node.key_expiry_disable'))[0], { actor: 'admin', ip: '127.0.0.1', target: 'nas' });

  t.is((await admin.post(`/console/machines/${node.id}/key-expiry`, { disabled: '0' })).status, 303);
  const enabled = await api.getNode(cli, node.id);
  t.false(enabled.keyExpiryDisabled);
  t.true(Date.parse(enabled.expiry!) > Date.now() + 170 * 86_400_000);
  t.like((await activity('node.key_expiry_enable'))[0], { actor: 'admin', target: 'nas' });
  t.is((await admin.post(`/console/machines/${node.id}/key-expiry`, { disabled: 'maybe' })).status, 400);

  await api.expireNode(cli, node.id);
  const expiredRow = await row();
  t.regex(expiredRow, /data-expired="true"/);
  t.regex(text(expiredRow), /Key expired needs tailscale up to rejoin/);
  t.regex(text(expiredRow), /Expired/);
});
