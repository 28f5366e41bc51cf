// Access controls, tags and routes in a real browser (Debian's Chromium, playwright-core) against the whole image, with
// the official Tailscale client (pinned v1.102.3, userspace networking, through the router) as the devices:
//  - the policy is typed into the editor and saved; a broken one is refused with its line marked in the editor's line
//    numbers, and the error's link puts the caret on that line;
//  - an administrator tags a machine on its page and the clients follow: the policy admits alice only to tag:server,
//    so before the tag her laptop cannot open a connection to the server, after it the server's packet filter admits
//    her and the connection goes through (a TCP echo on the host's loopback, which userspace tailscaled exposes on the
//    server's tailnet address); removing the tag closes it again;
//  - a real client advertises a route (`tailscale set --advertise-routes`): the open Routes view shows it waiting
//    without a reload, approving it there gives it to the client the policy admits (its status lists the route as the
//    server's primary route), unapproving it on the machine page takes it away;
//  - screenshots of the new pages (desktop and phone) under test-artifacts/console/ for review.
import fs from 'node:fs';
import path from 'node:path';
import test from 'ava';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { launchChromium } from '../harness/browser.ts';
import { AdminClient } from '../../shared/admin-client.ts';
import { parseConfig } from '../../shared/config.ts';
import { adminSocket } from '../../shared/paths.ts';
import { PASSWORD } from '../harness/console-client.ts';
import { type EchoServer, startEchoServer } from '../harness/echo-server.ts';
import { startImage, type Image } from '../harness/image.ts';
import { ROOT } from '../harness/process.ts';
import { haveTailscale, TsNode, type TsStatus } from '../harness/tailscale.ts';

const ARTIFACTS = path.join(ROOT, 'test-artifacts/console');
const DESKTOP = { viewport: { width: 1360, height: 860 } };
const PHONE = { viewport: { width: 390, height: 844 }, deviceScaleFactor: 2, isMobile: true, hasTouch: true };
const ROUTE = '10.201.0.0/24';

if (!haveTailscale()) {
  test('official Tailscale client is installed', (t) => t.fail('tailscaled/tailscale not found; run .ci/run or go install them (see README)'));
} else {
  let image: Image;
  let api: AdminClient;
  let browser: Browser;
  let echo: EchoServer;
  const cli = { actor: 'test', ip: '' };
  const nodes: TsNode[] = [];
  const contexts: BrowserContext[] = [];
  const ips: Record<string, string> = {};
  let laptop: TsNode;
  let server: TsNode;
  let serverId: number;

  const policy = () => `{
  // alice may reach machines tagged tag:server on the echo port, and the test subnet through its router.
  "tagOwners": { "tag:server": ["alice@"] },
  "acls": [
    { "action": "accept", "src": ["alice@"], "dst": ["tag:server:${echo.port}"] },
    { "action": "accept", "src": ["alice@"], "dst": ["${ROUTE}:*"] },
  ],
  "tests": [
    { "src": "alice@", "accept": ["tag:server:${echo.port}"], "deny": ["tag:server:22"] },
  ],
}
`;

  async function join(name: string, user: string): Promise<TsNode> {
    const key = await api.createPreAuthKey(cli, { user, reusable: true, expiresInSeconds: 3600 });
    // An http:// login server means an http DERP node; the client needs this knob for that (real deployments are https).
    const n = new TsNode({ name, env: { TS_DEBUG_USE_DERP_HTTP: '1' } });
    nodes.push(n);
    await n.start();
    await n.up(image.url, [`--auth-key=${key.key}`]);
    const s = await n.waitFor((x) => x.BackendState === 'Running', `${name} running`);
    ips[name] = s.Self.TailscaleIPs[0];
    return n;
  }

  test.before(async () => {
    fs.mkdirSync(ARTIFACTS, { recursive: true });
    image = await startImage({ env: { HSE_CONSOLE_PASSWORD: PASSWORD } });
    api = new AdminClient(adminSocket(parseConfig(image.env)));
    echo = await startEchoServer();
    await api.createUser(cli, 'alice');
    await api.createUser(cli, 'bob');
    browser = await launchChromium();
    laptop = await join('laptop', 'alice');
    server = await join('server', 'bob');
    serverId = (await api.listNodes(cli)).find((n) => n.givenName === 'server')!.id;
  });

  test.after.always(async () => {
    for (const c of contexts) await c.close().catch(() => {});
    await browser?.close();
    for (const n of nodes) await n.destroy();
    await echo?.close();
    await image?.stop();
  });

  async function newPage(opts: typeof DESKTOP | typeof PHONE = DESKTOP): Promise<{ page: Page; errors: string[] }> {
    const context = await browser.newContext(opts);
    contexts.push(context);
    const page = await context.newPage();
    const errors: string[] = [];
    page.on('console', (m) => {
      if (m.type() === 'error') errors.push(m.text());
    });
    page.on('pageerror', (e) => errors.push(e.message));
    return { page, errors };
  }

  async function signIn(page: Page): Promise<void> {
    await page.goto(`${image.url}/console`);
    await page.waitForURL(/\/console\/login/);
    await page.fill('input[name="username"]', 'admin');
    await page.fill('input[name="password"]', PASSWORD);
    await Promise.all([page.waitForURL(/\/console\/machines$/), page.click('button[type="submit"]')]);
  }

  // From the top: a page scrolled to a line or a disclosure would otherwise show its sticky header mid-picture.
  const shot = async (page: Page, name: string) => {
    await page.evaluate('window.scrollTo(0, 0)');
    await page.screenshot({ path: path.join(ARTIFACTS, `${name}.png`), fullPage: true });
  };
  const widthOf = async (page: Page) => (await page.evaluate('document.documentElement.scrollWidth')) as number;
  const peerOf = (s: TsStatus, name: string) =>
    Object.values(s.Peer ?? {}).find((p) => p.HostName === name) as (TsStatus['Self'] & { PrimaryRoutes?: string[] }) | undefined;

  /** Tries a few times: a new filter reaches the client within a second, a loaded machine takes longer. */
  async function eventually(cond: () => Promise<boolean>, tries = 6): Promise<boolean> {
    for (let i = 0; i < tries; i++) if (await cond()) return true;
    return false;
  }

  let admin: Page;
  let adminErrors: string[];

  test.serial('the policy is typed into the editor and saved; a broken one is refused with its line marked and the caret taken there', async (t) => {
    ({ page: admin, errors: adminErrors } = await newPage());
    await signIn(admin);
    await admin.click('nav a:text("Access controls")');
    await admin.waitForURL(/\/console\/acls$/);
    t.regex((await admin.locator('#no-policy').textContent()) ?? '', /No policy: every device can reach every other \(Tailscale's default\)\./);
    t.true(await admin.locator('.editor .gutter').isVisible(), 'the script shows the line numbers');
    await shot(admin, 'acls-no-policy');

    await admin.fill('#policy-text', policy());
    await Promise.all([admin.waitForURL(/\/console\/acls$/), admin.click('#save-button')]);
    await admin.locator('.notice.ok', { hasText: 'Saved as version 1' }).waitFor();
    t.is(await admin.locator('#policy-state').getAttribute('data-version'), '1');
    t.is(await admin.locator('ul.tests li[data-state="passed"]').count(), 1);
    t.is((await api.getPolicy(cli)).text, policy(), 'exactly the text typed');
    await shot(admin, 'acls');

    // A group nobody defined, on line 5: Check refuses it, marks line 5, and its link puts the caret there.
    const broken = policy().replace('"src": ["alice@"], "dst": ["tag:server', '"src": ["group:ops"], "dst": ["tag:server');
    await admin.fill('#policy-text', broken);
    await Promise.all([admin.waitForURL(/\/console\/acls\/check$/), admin.click('#check-button')]);
    await admin.locator('#check-failed').waitFor();
    const problem = admin.locator('.problems.errors li').first();
    t.regex((await problem.textContent()) ?? '', /Line 5, column 35: group:ops is not defined in groups/);
    t.deepEqual(await admin.locator('.editor .gutter .bad').allTextContents(), ['5']);
    t.is(await admin.locator('#policy-text').inputValue(), broken, 'the text as typed is still in the editor');
    await problem.locator('a.at').click();
    const caret = (await admin.evaluate(`(() => {
      const a = document.getElementById('policy-text');
      return { focused: document.activeElement === a, line: a.value.slice(0, a.selectionStart).split('\\n').length, column: a.selectionStart - a.value.lastIndexOf('\\n', a.selectionStart - 1) };
    })()`)) as { focused: boolean; line: number; column: number };
    t.deepEqual(caret, { focused: true, line: 5, column: 35 });
    await shot(admin, 'acls-refused');
    // Save refuses it the same way, and version 1 stays in force.
    await Promise.all([admin.waitForLoadState('load'), admin.click('#save-button')]);
    await admin.locator('#check-failed', { hasText: 'the policy was not saved; the policy in force stays' }).waitFor();
    t.is((await api.getPolicy(cli)).version, 1);
    // The refusal is a 400 page, which the browser reports as a failed load: expected here, and only here.
    t.deepEqual(adminErrors.splice(0), ['Failed to load resource: the server responded with a status of 400 (Bad Request)']);

    const { page: phone, errors } = await newPage(PHONE);
    await signIn(phone);
    await phone.goto(`${image.url}/console/acls`);
    await phone.locator('details.changes summary').first().click();
    t.true((await widthOf(phone)) <= 390, `no sideways scrolling on a phone (${await widthOf(phone)}px)`);
    await shot(phone, 'phone-acls');
    t.deepEqual(errors, []);
    t.deepEqual(adminErrors, []);
  });

  test.serial("an administrator tags a machine on its page and the clients follow: the server's filter admits alice only while it is tagged", async (t) => {
    t.false(await laptop.canConnect(ips.server, echo.port, 4000), "no rule admits alice to bob's untagged server");
    await admin.goto(`${image.url}/console/machines/${serverId}`);
    await admin.locator('#live-status[data-state="live"]').waitFor();
    t.regex((await admin.locator('#access').textContent()) ?? '', /Nobody\./);
    await admin.check('#tags-form input[value="tag:server"]');
    await Promise.all([admin.waitForLoadState('load'), admin.click('#tags-form button[type="submit"]')]);
    await admin.locator('.notice.ok', { hasText: 'Tagged server tag:server' }).waitFor();
    t.deepEqual((await api.getNode(cli, serverId)).tags, ['tag:server']);
    // The live part of the page follows the policy: alice may reach it now, on the echo port only.
    await admin.locator('#reachers li', { hasText: `alice@ → tcp/udp ${echo.port}` }).waitFor();

    await laptop.waitFor((s) => peerOf(s, 'server') !== undefined, 'the laptop to see the tagged server');
    t.true(await eventually(() => laptop.canConnect(ips.server, echo.port, 4000)), "the server's filter admits alice now");
    const netmap = JSON.parse((await server.cli(['debug', 'netmap'])).stdout) as { PacketFilter?: { Srcs?: string[]; SrcIPs?: string[] }[] };
    const sources = JSON.stringify(netmap.PacketFilter ?? []);
    t.true(sources.includes(ips.laptop), `the server's PacketFilter names the laptop (${sources.slice(0, 500)})`);
    await shot(admin, 'machine-tagged');

    const { page: phone, errors } = await newPage(PHONE);
    await signIn(phone);
    await phone.goto(`${image.url}/console/machines/${serverId}`);
    await phone.locator('#reachers').waitFor();
    t.true((await widthOf(phone)) <= 390, `machine page fits a phone (${await widthOf(phone)}px)`);
    await shot(phone, 'phone-machine-tagged');
    t.deepEqual(errors, []);

    await admin.uncheck('#tags-form input[value="tag:server"]');
    await Promise.all([admin.waitForLoadState('load'), admin.click('#tags-form button[type="submit"]')]);
    await admin.locator('.notice.ok', { hasText: 'Removed the tags of server' }).waitFor();
    t.true(await eventually(async () => !(await laptop.canConnect(ips.server, echo.port, 4000))), 'and closes again without the tag');
    t.deepEqual(adminErrors, []);
  });

  test.serial(
    'a route a real client advertises waits on the open Routes view; approving it there gives it to alice, unapproving it on the machine page takes it away',
    async (t) => {
      await admin.goto(`${image.url}/console/routes`);
      await admin.locator('#live-status[data-state="live"]').waitFor();
      await admin.locator('.empty-state', { hasText: 'No routes yet' }).waitFor();
      await shot(admin, 'routes-empty');

      await server.cli(['set', `--advertise-routes=${ROUTE}`]);
      const row = admin.locator(`#routes-table tr[data-node="server"][data-prefix="${ROUTE}"]`);
      await admin.locator(`#routes-table tr[data-prefix="${ROUTE}"][data-state="waiting"]`).waitFor({ timeout: 30_000 });
      t.regex((await admin.locator('#routes-summary').textContent()) ?? '', /1 route · 1 waiting for approval/);
      await shot(admin, 'routes-waiting');

      const { page: list, errors } = await newPage();
      await signIn(list);
      await list.selectOption('select[name="routes"]', 'pending');
      await Promise.all([list.waitForURL(/routes=pending/), list.click('.filters button[type="submit"]')]);
      await list.locator('#machines-table tr[data-name="server"] [data-badge="routes-waiting"]').waitFor();
      t.is(await list.locator('#machines-table tbody tr[data-id]').count(), 1, 'only the machine with a pending route');
      await shot(list, 'machines-routes-pending');

      await Promise.all([admin.waitForURL(/\/console\/routes$/), row.locator('button:text("Approve")').click()]);
      await admin.locator('.notice.ok', { hasText: `Approved ${ROUTE} of server` }).waitFor();
      await admin.locator(`#routes-table tr[data-prefix="${ROUTE}"][data-state="primary"]`).waitFor();
      const given = await laptop.waitFor((s) => (peerOf(s, 'server')?.PrimaryRoutes ?? []).includes(ROUTE), "alice's laptop to get the route", 30_000);
      t.deepEqual(peerOf(given, 'server')?.PrimaryRoutes, [ROUTE]);
      await shot(admin, 'routes');
      await list.goto(`${image.url}/console/machines`);
      await list.locator('#machines-table tr[data-name="server"] [data-badge="subnet-router"]').waitFor();
      await shot(list, 'machines-routes');

      await admin.goto(`${image.url}/console/machines/${serverId}`);
      await admin.locator(`#machine-routes tr[data-prefix="${ROUTE}"][data-approved="true"]`).waitFor();
      await shot(admin, 'machine-routes');
      const { page: phone, errors: phoneErrors } = await newPage(PHONE);
      await signIn(phone);
      await phone.goto(`${image.url}/console/routes`);
      await phone.locator('#routes-table').waitFor();
      t.true((await widthOf(phone)) <= 390, `Routes fits a phone (${await widthOf(phone)}px)`);
      await shot(phone, 'phone-routes');
      await phone.goto(`${image.url}/console/machines/${serverId}`);
      await phone.locator('#machine-routes').waitFor();
      await shot(phone, 'phone-machine-routes');

      await Promise.all([
        admin.waitForURL(new RegExp(`/console/machines/${serverId}$`)),
        admin.locator(`#machine-routes tr[data-prefix="${ROUTE}"] button:text("Unapprove")`).click(),
      ]);
      await admin.locator('.notice.ok', { hasText: `Unapproved ${ROUTE} of server` }).waitFor();
      await laptop.waitFor((s) => !(peerOf(s, 'server')?.PrimaryRoutes ?? []).includes(ROUTE), "the route to leave alice's laptop", 30_000);
      t.like(
        (await api.nodeRoutes(cli, serverId)).find((r) => r.prefix === ROUTE),
        { advertised: true, approved: false },
      );
      t.deepEqual([...errors, ...phoneErrors, ...adminErrors], []);
    },
  );
}
