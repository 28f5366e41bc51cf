// The console's network management in a real browser (Debian's Chromium, playwright-core) against the whole image,
// with the official Tailscale client (pinned v1.102.3) as the devices:
//  - create a pre-auth key in the console, run the command the console shows, and watch the machine appear online on
//    an open Machines page without reloading; rename it and see the new name in the client's own status; delete it
//    and watch it disappear;
//  - the interactive flow: `tailscale up` prints /console/register/<id>; a browser that is not signed in goes through
//    sign-in and back, sees the device and approves it; the client comes up;
//  - an auditor account sees every page and no button, and its changes are refused;
//  - screenshots of the main pages (desktop and phone) under test-artifacts/console/ for review.
import fs from 'node:fs';
import path from 'node:path';
import test from 'ava';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { launchChromium } from '../harness/browser.ts';
import { startImage, type Image } from '../harness/image.ts';
import { ROOT } from '../harness/process.ts';
import { haveTailscale, TsNode, type TsStatus } from '../harness/tailscale.ts';
import { PASSWORD } from '../harness/console-client.ts';

const ARTIFACTS = path.join(ROOT, 'test-artifacts/console');
const DESKTOP = { viewport: { width: 1360, height: 860 } };
const PHONE = { viewport: { width: 390, height: 844 }, deviceScaleFactor: 2, isMobile: true, hasTouch: true };

if (!haveTailscale()) {
  test('official Tailscale client is installed', (t) => t.fail('tailscaled/tailscale not found; run .ci/run or go install them (see README)'));
} else {
  let image: Image;
  let browser: Browser;
  const nodes: TsNode[] = [];
  const contexts: BrowserContext[] = [];

  test.before(async () => {
    fs.mkdirSync(ARTIFACTS, { recursive: true });
    image = await startImage({ env: { HSE_CONSOLE_PASSWORD: PASSWORD } });
    browser = await launchChromium();
  });

  test.after.always(async () => {
    for (const c of contexts) await c.close().catch(() => {});
    await browser?.close();
    for (const n of nodes) await n.destroy();
    await image?.stop();
  });

  // A failure shows the image's own logs too (the client's log alone cannot tell a change that never left the
  // server from one the client did not apply).
  test.afterEach.always((t) => {
    if (!t.passed && image) t.log(`--- image logs ---\n${image.logs().slice(-12_000)}`);
  });

  async function newNode(name: string): Promise<TsNode> {
    // An http:// login server means an http DERP node; the client needs this knob for that (real deployments are https).
    const n = new TsNode({ name, env: { TS_DEBUG_USE_DERP_HTTP: '1' } });
    nodes.push(n);
    await n.start();
    return n;
  }

  async function newPage(opts: typeof DESKTOP | typeof PHONE = DESKTOP): Promise<{ page: Page; errors: string[] }> {
    // The clipboard permission lets the copy buttons use the clipboard API, as a person's browser does.
    const context = await browser.newContext({ ...opts, permissions: ['clipboard-read', 'clipboard-write'] });
    contexts.push(context);
    const page = await context.newPage();
    const errors: string[] = [];
    page.on('console', (m) => {
      if (m.type() === 'error') errors.push(m.text());
    });
    page.on('pageerror', (e) => errors.push(e.message));
    return { page, errors };
  }

  async function signIn(page: Page, user = 'admin', password = PASSWORD): Promise<void> {
    await page.goto(`${image.url}/console`);
    await page.waitForURL(/\/console\/login/);
    await page.fill('input[name="username"]', user);
    await page.fill('input[name="password"]', password);
    await Promise.all([page.waitForURL(/\/console\/machines$/), page.click('button[type="submit"]')]);
  }

  /** Every URL the page navigates to from now on: a live view must get along without any. */
  function navigations(page: Page): string[] {
    const seen: string[] = [];
    page.on('framenavigated', (f) => {
      if (f === page.mainFrame()) seen.push(f.url());
    });
    return seen;
  }

  const shot = (page: Page, name: string, fullPage = true) => page.screenshot({ path: path.join(ARTIFACTS, `${name}.png`), fullPage });
  const running = (s: TsStatus) => s.BackendState === 'Running';

  let admin: Page;
  let adminErrors: string[];
  let watcher: Page;
  let watcherErrors: string[];
  let watcherNavigations: string[];

  test.serial('a new console opens on an empty Machines page that says how to add the first machine', async (t) => {
    ({ page: admin, errors: adminErrors } = await newPage());
    await signIn(admin);
    await admin.locator('.empty-state', { hasText: 'No machines yet' }).waitFor();
    t.is((await admin.locator('#cmd-join').textContent())?.trim(), `tailscale up --login-server=${image.env.HSE_PUBLIC_URL} --auth-key=<key>`);
    t.true(await admin.locator('button[data-copy="cmd-join"]').isVisible(), 'copy button shown once the script runs');
    await admin.locator('#live-status[data-state="live"]').waitFor();
    await shot(admin, 'machines-empty');
    t.deepEqual(adminErrors, []);
  });

  test.serial('create a key, join with the command shown, watch the machine come online, rename it, delete it', async (t) => {
    // A second tab keeps Machines open the whole time; it must follow everything without reloading.
    ({ page: watcher, errors: watcherErrors } = await newPage());
    await signIn(watcher);
    await watcher.locator('#live-status[data-state="live"]').waitFor();
    watcherNavigations = navigations(watcher);

    await admin.click('a[href="/console/keys#create"]');
    await admin.waitForURL(/\/console\/keys/);
    await admin.fill('input[name="newUser"]', 'alice');
    await admin.check('input[name="reusable"]');
    await Promise.all([admin.waitForLoadState('load'), admin.click('#create button[type="submit"]')]);
    await admin.locator('#created-key').waitFor();
    const command = (await admin.locator('#new-command').textContent())!.trim();
    const m = /^tailscale up --login-server=(\S+) --auth-key=(hse-auth-\S+)$/.exec(command);
    t.truthy(m, command);
    t.is(m![1], image.env.HSE_PUBLIC_URL);
    t.is((await admin.locator('#new-key').textContent())?.trim(), m![2]);
    await admin.click('button[data-copy="new-command"]');
    await admin.locator('button[data-copy="new-command"]', { hasText: 'Copied' }).waitFor();
    // What the button put on the clipboard is what an operator pastes: it must be the whole command, unaltered.
    const pasted = String(await admin.evaluate('navigator.clipboard.readText()'));
    t.is(pasted, command, 'the copy button put exactly the shown command on the clipboard');
    await shot(admin, 'keys-created');

    // Exactly the command the operator pasted (its arguments), plus what keeps a test client off the host's network.
    const laptop = await newNode('laptop');
    const args = pasted.split(' ').slice(1);
    await laptop.cli([...args, '--hostname=laptop', '--accept-dns=false', '--accept-routes=false'], 90_000);
    await laptop.waitFor(running, 'laptop running');

    const row = watcher.locator('#machines-table tr[data-name="laptop"]');
    await watcher.locator('#machines-table tr[data-name="laptop"][data-online="true"]').waitFor();
    t.regex((await row.locator('td.owner').textContent()) ?? '', /alice/);
    t.regex((await row.locator('td.os').textContent()) ?? '', /Linux/);
    t.regex((await row.locator('td.os').textContent()) ?? '', /Tailscale 1\.102\.3/);
    t.regex((await row.locator('td.addr').textContent()) ?? '', /100\.\d+\.\d+\.\d+/);
    t.deepEqual(watcherNavigations, [], 'the machine appeared without a reload');
    await shot(watcher, 'machines');

    // Rename on the detail page; the client's own MagicDNS name follows.
    await admin.goto(`${image.url}/console/machines`);
    await Promise.all([admin.waitForURL(/\/console\/machines\/\d+$/), admin.click('#machines-table a.machine-name:text("laptop")')]);
    await admin.locator('#live-status[data-state="live"]').waitFor();
    await shot(admin, 'machine');
    await admin.fill('#rename-form input[name="name"]', 'workstation');
    await Promise.all([admin.waitForLoadState('load'), admin.click('#rename-form button[type="submit"]')]);
    await admin.locator('.notice.ok', { hasText: 'workstation.hse.internal' }).waitFor();
    const renamed = await laptop.waitFor((s) => s.Self.DNSName === 'workstation.hse.internal.', 'the client to see its new name', 30_000);
    t.is(renamed.Self.DNSName, 'workstation.hse.internal.');
    // And in the plain `tailscale status` a person reads: its own line carries the new name, the old one is gone.
    const plain = (await laptop.cli(['status'])).stdout;
    t.regex(plain, /^100\.\d+\.\d+\.\d+\s+workstation\s/m, plain);
    t.notRegex(plain, /\blaptop\b/, plain);
    await watcher.locator('#machines-table tr[data-name="workstation"][data-online="true"]').waitFor();
    t.is(await watcher.locator('#machines-table tr[data-name="laptop"]').count(), 0);

    // Delete it; the open list drops it without a reload.
    await admin.click('.danger-zone summary:text("Delete…")');
    await Promise.all([admin.waitForURL(/\/console\/machines$/), admin.click('.danger-zone button:text("Delete machine")')]);
    await admin.locator('.notice.ok', { hasText: 'Deleted workstation' }).waitFor();
    await watcher.locator('#machines-table tr[data-name="workstation"]').waitFor({ state: 'detached' });
    await watcher.locator('.empty-state', { hasText: 'No machines yet' }).waitFor();
    t.deepEqual(watcherNavigations, [], 'rename and delete also arrived without a reload');
    t.deepEqual(adminErrors, []);
    t.deepEqual(watcherErrors, []);
  });

  test.serial('interactive login: the printed link leads through sign-in to the device, and approving it brings the client up', async (t) => {
    const phone = await newNode('pixel');
    const { url, done } = await phone.upInteractive(image.url);
    t.true(url.startsWith(`${image.env.HSE_PUBLIC_URL}/console/register/`), url);

    // The open Machines tab shows the waiting device first, live.
    const waiting = watcher.locator('.pending-item', { hasText: 'pixel' });
    await waiting.waitFor();
    t.true(await watcher.locator('.pending').isVisible());
    await shot(watcher, 'machines-pending');

    // Someone not signed in opens the link: sign-in first, then straight back to the device.
    const { page, errors } = await newPage();
    await page.goto(url);
    await page.waitForURL(/\/console\/login\?next=%2Fconsole%2Fregister%2F/);
    await page.fill('input[name="username"]', 'admin');
    await page.fill('input[name="password"]', PASSWORD);
    await Promise.all([page.waitForURL(url), page.click('button[type="submit"]')]);
    t.is((await page.locator('#device-name').textContent())?.trim(), 'pixel');
    t.is((await page.locator('#device-ip').textContent())?.trim(), '127.0.0.1');
    await shot(page, 'register');
    await page.selectOption('#approve-user', { label: 'alice' });
    await Promise.all([page.waitForURL(url), page.click('#approve-form button[type="submit"]')]);
    await page.locator('#outcome[data-status="approved"]').waitFor();
    t.regex((await page.locator('#outcome').textContent()) ?? '', /joined as pixel .* for user alice, approved by admin/s);
    await shot(page, 'register-approved');

    t.is(await done, 0, 'tailscale up finished');
    const s = await phone.waitFor(running, 'pixel running');
    t.is(s.Self.DNSName, 'pixel.hse.internal.');
    await watcher.locator('#machines-table tr[data-name="pixel"][data-online="true"]').waitFor();
    t.is(await watcher.locator('.pending-item').count(), 0, 'no longer waiting');

    // A second device is rejected from the list itself.
    const tablet = await newNode('tablet');
    const second = await tablet.upInteractive(image.url);
    const item = watcher.locator('.pending-item', { hasText: 'tablet' });
    await item.waitFor();
    watcherNavigations.length = 0;
    await Promise.all([watcher.waitForURL(/\/console\/machines$/), item.locator('button:text("Reject")').click()]);
    await watcher.locator('.notice.ok', { hasText: 'Rejected the login of tablet' }).waitFor();
    t.is(await watcher.locator('.pending-item').count(), 0);
    await tablet.stop();
    void second.done;
    // The list page navigated for the reject; from here it is live again.
    await watcher.locator('#live-status[data-state="live"]').waitFor();
    watcherNavigations.length = 0;
    t.deepEqual(errors, []);
  });

  test.serial('users, keys and accounts pages; deleting a user who owns machines shows the refusal', async (t) => {
    await admin.goto(`${image.url}/console/users`);
    await admin.fill('#create input[name="name"]', 'bob');
    await admin.fill('#create input[name="displayName"]', 'Bob Builder');
    await Promise.all([admin.waitForLoadState('load'), admin.click('#create button[type="submit"]')]);
    await admin.locator('#users-table tr[data-name="bob"]').waitFor();
    const alice = admin.locator('#users-table tr[data-name="alice"]');
    t.regex((await alice.locator('td.count-cell').textContent()) ?? '', /1 machine/);
    await shot(admin, 'users');
    await alice.locator('summary:text("Delete…")').click();
    await Promise.all([admin.waitForLoadState('load'), alice.locator('button:text("Delete user")').click()]);
    t.regex((await admin.locator('.alert').textContent()) ?? '', /User "alice" still owns 1 machine\(s\); delete them or move them to another user first/);
    await shot(admin, 'users-refused');

    await admin.goto(`${image.url}/console/keys`);
    await admin.locator('#keys-table').waitFor();
    await shot(admin, 'keys');

    await admin.goto(`${image.url}/console/accounts`);
    await admin.fill('#create input[name="username"]', 'audrey');
    await admin.selectOption('#create select[name="role"]', 'auditor');
    await Promise.all([admin.waitForLoadState('load'), admin.click('#create button[type="submit"]')]);
    const password = (await admin.locator('#generated-password').textContent())!.trim();
    t.true(password.length >= 20);
    await shot(admin, 'accounts-created');
    await admin.goto(`${image.url}/console/accounts`);
    await admin.locator('#accounts-table tr[data-name="audrey"]').waitFor();
    await shot(admin, 'accounts');

    // The auditor, in a browser of their own: every page, no change buttons.
    const { page, errors } = await newPage();
    await signIn(page, 'audrey', password);
    await page.locator('#machines-table tr[data-name="pixel"]').waitFor();
    await shot(page, 'auditor-machines');
    for (const p of ['/console/machines', '/console/users', '/console/keys', '/console/dns', '/console/accounts', '/console/logs']) {
      await page.goto(`${image.url}${p}`);
      t.is(await page.locator('main form[method="post"]').count(), 0, `${p}: no change forms for an auditor`);
    }
    await page.goto(`${image.url}/console/machines`);
    await Promise.all([page.waitForURL(/\/console\/machines\/\d+$/), page.click('#machines-table a.machine-name:text("pixel")')]);
    t.is(await page.locator('main form[method="post"]').count(), 0);
    t.true(await page.locator('.readonly-note').isVisible());
    await shot(page, 'auditor-machine');

    // A change sent anyway (a crafted form with the auditor's own valid token) is refused with a page that says why.
    const csrf = await page.locator('form.signout input[name="csrf"]').getAttribute('value');
    const id = /\/console\/machines\/(\d+)$/.exec(page.url())![1];
    const refused = await page.request.post(`${image.url}/console/machines/${id}/delete`, { form: { csrf: csrf! } });
    t.is(refused.status(), 403);
    t.regex(await refused.text(), /Read-only account/);
    await page.goto(`${image.url}/console/machines`);
    t.is(await page.locator('#machines-table tr[data-name="pixel"]').count(), 1, 'still there');
    t.deepEqual(errors, []);
  });

  test.serial('on a phone, Machines reads as cards without sideways scrolling', async (t) => {
    const { page, errors } = await newPage(PHONE);
    await signIn(page);
    await page.locator('#machines-table tr[data-name="pixel"]').waitFor();
    t.false(await page.locator('#machines-table thead').isVisible());
    const width = (await page.evaluate('document.documentElement.scrollWidth')) as number;
    t.true(width <= 390, `no sideways scrolling (page is ${width}px wide)`);
    await shot(page, 'phone-machines');
    await page.click('#machines-table a.machine-name:text("pixel")');
    await page.waitForURL(/\/console\/machines\/\d+$/);
    const width2 = (await page.evaluate('document.documentElement.scrollWidth')) as number;
    t.true(width2 <= 390, `machine page fits (${width2}px)`);
    await shot(page, 'phone-machine');
    t.deepEqual(errors, []);
  });
}
