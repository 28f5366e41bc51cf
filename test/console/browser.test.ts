// The console in a real browser (Debian's Chromium driven by playwright-core) through the real router: sign in with
// the form, land on Logs, see your own sign-in with the address the router saw, then watch a sign-in from another
// loopback address (127.0.0.2) appear in the live tail without reloading. Also checks that the pages run without a
// single CSP violation or script error, and saves screenshots (desktop and phone) to test-artifacts/console/.
import fs from 'node:fs';
import path from 'node:path';
import test from 'ava';
import type { Browser, Page } from 'playwright-core';
import { launchChromium } from '../harness/browser.ts';
import type { Image } from '../harness/image.ts';
import { ROOT } from '../harness/process.ts';
import { Client, PASSWORD, startConsole } from '../harness/console-client.ts';

const ARTIFACTS = path.join(ROOT, 'test-artifacts/console');

let image: Image;
let browser: Browser;
test.before(async () => {
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  image = await startConsole();
  browser = await launchChromium();
});
test.after.always(async () => {
  await browser?.close();
  await image?.stop();
});

/** Collects what would show up red in the developer console: CSP refusals, script errors, failed loads. */
function watchErrors(page: Page): string[] {
  const errors: string[] = [];
  page.on('console', (m) => {
    if (m.type() === 'error') errors.push(m.text());
  });
  page.on('pageerror', (e) => errors.push(e.message));
  return errors;
}

async function signIn(page: Page): Promise<void> {
  // Straight to Logs: this image runs the console alone, without the coordination service Machines needs.
  await page.goto(`${image.url}/console/logs`);
  await page.waitForURL(/\/console\/login\?next=/);
  await page.fill('input[name="username"]', 'admin');
  await page.fill('input[name="password"]', PASSWORD);
  await Promise.all([page.waitForURL(/\/console\/logs$/), page.click('button[type="submit"]')]);
}

test.serial('sign in, see your own sign-in in Logs, and watch a sign-in from 127.0.0.2 arrive live', async (t) => {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const page = await context.newPage();
  const errors = watchErrors(page);

  await page.goto(`${image.url}/console`);
  await page.waitForURL(/\/console\/login$/);
  await page.screenshot({ path: path.join(ARTIFACTS, 'login.png') });
  t.is(await page.getAttribute('input[name="username"]', 'autocomplete'), 'username');
  await signIn(page);
  t.is(await page.title(), 'Logs · hse console');

  const own = page.locator('#log-table tbody tr', { hasText: 'console.signin' }).first();
  await own.waitFor();
  t.is((await own.locator('td.addr').textContent())?.trim(), '127.0.0.1');
  t.is((await own.locator('td.actor').textContent())?.trim(), 'admin');

  await page.locator('#live-status[data-state="live"]').waitFor();
  const before = await page.locator('#log-table tbody tr').count();
  await page.screenshot({ path: path.join(ARTIFACTS, 'logs.png'), fullPage: true });

  // Someone else signs in from another loopback address; the row must appear without a reload.
  const navigations: string[] = [];
  page.on('framenavigated', (f) => navigations.push(f.url()));
  const other = new Client(image.url, '127.0.0.2');
  t.is((await other.signIn('admin', PASSWORD)).status, 303);
  const arrived = page.locator('#log-table tbody tr.new', { hasText: '127.0.0.2' });
  await arrived.waitFor();
  t.regex((await arrived.locator('td').nth(1).textContent()) ?? '', /console\.signin/);
  t.is(await page.locator('#log-table tbody tr').count(), before + 1);
  t.deepEqual(navigations, [], 'no reload');
  await page.screenshot({ path: path.join(ARTIFACTS, 'logs-live.png'), fullPage: true });

  // Pause holds new rows back and counts them; resume shows them.
  await page.click('#live-toggle');
  await new Client(image.url, '127.0.0.3').signIn('nobody', 'wrong');
  await page.locator('#live-status', { hasText: 'Paused · 1 new' }).waitFor();
  t.is(await page.locator('#log-table tbody tr', { hasText: '127.0.0.3' }).count(), 0);
  await page.click('#live-toggle');
  await page.locator('#log-table tbody tr', { hasText: '127.0.0.3' }).waitFor();

  // Filters keep working through the form.
  await page.fill('input[name="address"]', '127.0.0.2');
  await Promise.all([page.waitForURL(/address=127\.0\.0\.2/), page.click('form.filters button[type="submit"]')]);
  t.is(await page.locator('#log-table tbody tr').count(), 1);
  await page.screenshot({ path: path.join(ARTIFACTS, 'logs-filtered.png') });

  t.deepEqual(errors, [], 'no CSP violations or script errors');
  await context.close();
});

test.serial('on a phone the log reads as cards, and sign-out returns to the sign-in page', async (t) => {
  const context = await browser.newContext({ viewport: { width: 390, height: 844 }, deviceScaleFactor: 2, isMobile: true, hasTouch: true });
  const page = await context.newPage();
  const errors = watchErrors(page);
  await page.goto(`${image.url}/console/login`);
  await page.screenshot({ path: path.join(ARTIFACTS, 'phone-login.png') });
  await signIn(page);
  await page.locator('#live-status[data-state="live"]').waitFor();
  const header = page.locator('#log-table thead');
  t.false(await header.isVisible(), 'table header folds away on a phone');
  const width = (await page.evaluate('document.documentElement.scrollWidth')) as number;
  t.true(width <= 390, `no sideways scrolling (page is ${width}px wide)`);
  await page.screenshot({ path: path.join(ARTIFACTS, 'phone-logs.png'), fullPage: true });

  await Promise.all([page.waitForURL(/\/console\/login\?signed_out=1$/), page.click('form.signout button')]);
  t.regex((await page.locator('.notice').textContent()) ?? '', /signed out/);
  await page.goto(`${image.url}/console/logs`);
  await page.waitForURL(/\/console\/login\?next=/);
  t.deepEqual(errors, []);
  await context.close();
});

test.serial('error pages look like the console: a missing page, and the rate-limit page', async (t) => {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const page = await context.newPage();
  await signIn(page);
  const r = await page.goto(`${image.url}/console/no-such-page`);
  t.is(r?.status(), 404);
  t.true(await page.locator('nav.nav').isVisible(), 'navigation stays');
  await page.screenshot({ path: path.join(ARTIFACTS, 'not-found.png') });
  await context.close();

  // Ten failures from this browser's address (127.0.0.1 through the router), then the eleventh attempt.
  const anon = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const p2 = await anon.newPage();
  for (let i = 0; i < 11; i++) {
    await p2.goto(`${image.url}/console/login`);
    await p2.fill('input[name="username"]', 'admin');
    await p2.fill('input[name="password"]', `wrong-${i}`);
    await Promise.all([p2.waitForLoadState('load'), p2.click('button[type="submit"]')]);
  }
  t.regex((await p2.locator('.alert').textContent()) ?? '', /Too many failed sign-ins from your address \(127\.0\.0\.1\)/);
  t.true(await p2.locator('button[type="submit"]').isDisabled());
  await p2.screenshot({ path: path.join(ARTIFACTS, 'rate-limited.png') });
  await anon.close();
});
