// Sign-in with a real OpenID provider, end to end, behind each reverse proxy of advanced/proxy/ (nginx, Caddy,
// Traefik, Nginx Proxy Manager as nginx) in proxy mode: the official Tailscale client's `tailscale up` prints the
// link, Chromium (playwright-core, Debian's chromium) follows it and signs in at the provider, and the client comes up
// as that person's device; someone not allowed is shown why and the device keeps waiting; operators sign in to the
// console through the provider and get the role of their group, and the auditor's changes are refused.
//
// One provider and one image serve all four proxies: each proxy in turn takes the same port, so the public URL (and
// the redirect URI registered at the provider) stays https://127.0.0.1:<port> throughout. One tailscaled per proxy,
// one browser. With nginx, the device's key is then expired and `tailscale up` goes through the provider again.
import fs from 'node:fs';
import path from 'node:path';
import test from 'ava';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { launchChromium } from '../harness/browser.ts';
import { AdminClient } from '../../shared/admin-client.ts';
import { parseConfig } from '../../shared/config.ts';
import { adminSocket } from '../../shared/paths.ts';
import { PASSWORD } from '../harness/console-client.ts';
import { createTestCA, TEST_DOMAIN, type TestCA } from '../harness/ca.ts';
import { startImage, type Image } from '../harness/image.ts';
import type { IdpUser } from '../harness/oidc-idp-server.ts';
import { oidcEnv, startIdp, type TestIdp, USERS } from '../harness/oidc-idp.ts';
import { freePort, ROOT } from '../harness/process.ts';
import { missingProxy, PROXY_KINDS, startProxy, type RunningProxy } from '../harness/proxies.ts';
import { haveTailscale, TsNode, type TsStatus } from '../harness/tailscale.ts';

interface StatusWithUsers extends TsStatus {
  Self: TsStatus['Self'] & { UserID: number };
  User: Record<string, { LoginName: string; DisplayName: string }> | null;
}

if (!haveTailscale()) {
  test('official Tailscale client is installed', (t) => t.fail('tailscaled/tailscale not found; run .ci/run or go install them (see README)'));
} else {
  let ca: TestCA;
  let idp: TestIdp;
  let image: Image;
  let browser: Browser;
  let admin: AdminClient;
  let ports: { https: number; http: number };
  let publicUrl: string;
  const started = Date.now();
  /** Screenshots of the pages a person sees, for review (from the nginx run). */
  const ARTIFACTS = path.join(ROOT, 'test-artifacts/oidc');
  const shot = async (kind: string, page: Page, name: string) => {
    if (kind === 'nginx') await page.screenshot({ path: path.join(ARTIFACTS, `${name}.png`), fullPage: true });
  };

  test.before(async () => {
    fs.mkdirSync(ARTIFACTS, { recursive: true });
    ca = await createTestCA();
    ports = { https: await freePort(), http: await freePort() };
    publicUrl = `https://${TEST_DOMAIN}:${ports.https}`;
    idp = await startIdp({ ca, redirectUris: [`${publicUrl}/console/oidc/callback`] });
    image = await startImage({
      publicUrl,
      env: { HSE_TLS: 'off', HSE_TRUSTED_PROXIES: '127.0.0.1/32', HSE_CONSOLE_PASSWORD: PASSWORD, ...oidcEnv(idp) },
    });
    await image.procs.console!.waitFor(/identity provider ready/, 60_000);
    admin = new AdminClient(adminSocket(parseConfig(image.env)));
    browser = await launchChromium();
  });

  test.after.always(async (t) => {
    await browser?.close();
    await image?.stop();
    await idp?.stop();
    ca?.remove();
    t.log(`whole file: ${((Date.now() - started) / 1000).toFixed(1)} s`);
  });

  /**
   * A browser profile of its own per person. The browser does not check certificates here (the test CA is not in
   * its store); what is under test is hse, the proxies and the provider, and the console and tailscaled do verify
   * every certificate against the test CA.
   */
  async function person(): Promise<{ context: BrowserContext; page: Page }> {
    const context = await browser.newContext({ ignoreHTTPSErrors: true });
    return { context, page: await context.newPage() };
  }

  /**
   * page.goto, again when Chromium reports ERR_NETWORK_CHANGED: other work on this shared machine adds and removes
   * network interfaces, and Chromium aborts navigations under way when it notices.
   */
  async function goto(page: Page, url: string): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        await page.goto(url);
        return;
      } catch (e) {
        if (attempt >= 3 || !/ERR_NETWORK_CHANGED/.test((e as Error).message)) throw e;
      }
    }
  }

  /** At the provider's login form (or already signed in there): signs in as `user`, then waits for `landing` on hse. */
  async function throughProvider(page: Page, user: IdpUser, landing: string): Promise<void> {
    await page.locator(`#login, ${landing}`).first().waitFor({ timeout: 60_000 });
    if (page.url().startsWith(idp.issuer)) {
      await page.fill('#login', user.login);
      await page.fill('#password', user.password);
      await page.click('#submit');
    }
    await page.locator(landing).waitFor({ timeout: 60_000 });
  }

  async function addDevice(page: Page, link: string, user: IdpUser, landing: string, kind = ''): Promise<void> {
    await goto(page, link);
    await page.locator('#device-signin-page').waitFor();
    await shot(kind, page, 'device-page');
    await page.click('#device-signin');
    await throughProvider(page, user, landing);
  }

  const loginNameOf = (s: StatusWithUsers) => s.User?.[String(s.Self.UserID)]?.LoginName;

  async function consoleSignIn(page: Page, user: IdpUser, kind = ''): Promise<void> {
    await goto(page, `${publicUrl}/console`);
    await page.locator('#oidc-signin').waitFor();
    await shot(kind, page, 'console-signin');
    await page.click('#oidc-signin');
    await throughProvider(page, user, '.account .role');
  }

  for (const kind of PROXY_KINDS) {
    const missing = missingProxy(kind);
    if (missing) {
      test(`${kind} is installed`, (t) => t.fail(missing));
      continue;
    }
    test.serial(
      `${kind}: tailscale up, sign in at the provider in Chromium, Running as alice's device; mallory refused, device kept waiting; console roles from groups`,
      async (t) => {
        const t0 = Date.now();
        let proxy: RunningProxy | null = null;
        const node = new TsNode({ name: `${kind}-dev`, env: { SSL_CERT_FILE: ca.caFile } });
        const contexts: BrowserContext[] = [];
        t.teardown(async () => {
          for (const c of contexts) await c.close().catch(() => {});
          await node.destroy();
          await proxy?.stop();
        });
        const logs = () => `${image.logs()}\n----- ${kind} -----\n${proxy?.output() ?? ''}\n----- provider -----\n${idp.proc.output()}`;
        proxy = await startProxy(kind, { domain: TEST_DOMAIN, upstream: { host: '127.0.0.1', port: image.port }, ca, ports });
        await node.start();
        const up = await node.upInteractive(publicUrl);
        t.true(up.url.startsWith(`${publicUrl}/console/register/`), up.url);
        const authId = up.url.split('/').pop()!;

        // Mallory's address is outside the allowed domain: a page says so, and the device keeps waiting.
        const alice = await person();
        contexts.push(alice.context);
        await addDevice(alice.page, up.url, USERS.mallory, '#device-refused-page', kind);
        t.regex((await alice.page.textContent('#refused-reason')) ?? '', /mallory@elsewhere\.example is not in a domain allowed to add devices/);
        await shot(kind, alice.page, 'device-refused');
        t.is((await admin.getPending({ actor: 'test', ip: '' }, authId)).status, 'pending');
        t.is((await node.status()).BackendState, 'NeedsLogin');

        // Alice, at the same computer, signs in to the provider as herself from that page: the device is hers.
        await alice.page.click('#another-account');
        await alice.page.locator('#login').waitFor();
        await throughProvider(alice.page, USERS.alice, '#device-added-page');
        t.is(await alice.page.textContent('#added-user'), 'alice@example.com');
        await shot(kind, alice.page, 'device-added');
        const s = (await node.waitFor((x) => x.BackendState === 'Running', 'Running after alice signed in')) as StatusWithUsers;
        t.is(loginNameOf(s), 'alice@example.com', logs());
        t.is(await up.done, 0, 'tailscale up finished by itself');

        // Olivia (hse-admins) gets the administrator role and sees alice's device; Carol (hse-auditors) the auditor's.
        const olivia = await person();
        contexts.push(olivia.context);
        await consoleSignIn(olivia.page, USERS.olivia, kind);
        t.is(await olivia.page.textContent('.account .role'), 'admin');
        t.is(await olivia.page.textContent('.account .name'), 'olivia@example.com');
        await goto(olivia.page, `${publicUrl}/console/machines`);
        await olivia.page.locator(`text=${kind}-dev`).first().waitFor();
        await goto(olivia.page, `${publicUrl}/console/users`);
        // Alice's row: her picture from the provider, her e-mail and groups.
        const row = olivia.page.locator('tr[data-name="alice@example.com"]');
        t.is(await row.locator('img.avatar').getAttribute('src'), `${idp.issuer}/__test/picture/alice.svg`);
        t.regex((await row.locator('.user-groups').textContent()) ?? '', /groups: eng/);
        t.true(
          await row
            .locator('img.avatar')
            .evaluate(
              (img) =>
                (img as unknown as { complete: boolean; naturalWidth: number }).complete && (img as unknown as { naturalWidth: number }).naturalWidth > 0,
            ),
          'the picture loads under the CSP',
        );
        await shot(kind, olivia.page, 'users');

        const carol = await person();
        contexts.push(carol.context);
        await consoleSignIn(carol.page, USERS.carol);
        t.is(await carol.page.textContent('.account .role'), 'auditor');
        // The page offers her no button; a change sent anyway, with her session's token, is refused.
        await goto(carol.page, `${publicUrl}/console/users`);
        t.is(await carol.page.locator('form[action="/console/users"]').count(), 0);
        const csrf = await carol.page.getAttribute('form.signout input[name="csrf"]', 'value');
        const refused = await carol.page.request.post(`${publicUrl}/console/users`, { form: { csrf: csrf ?? '', name: `carol-${kind}` }, maxRedirects: 0 });
        t.is(refused.status(), 403);
        t.regex(await refused.text(), /auditor account/);

        if (kind === 'nginx') {
          // The key expires; `tailscale up` goes through the provider again (alice's session there is still open).
          const nodeId = (await admin.getPending({ actor: 'test', ip: '' }, authId)).nodeId!;
          await admin.expireNode({ actor: 'test', ip: '' }, nodeId);
          await node.waitFor((x) => x.BackendState === 'NeedsLogin', 'NeedsLogin after the key expired');
          const again = await node.upInteractive(publicUrl);
          t.not(again.url, up.url);
          await addDevice(alice.page, again.url, USERS.alice, '#device-added-page');
          const back = (await node.waitFor((x) => x.BackendState === 'Running', 'Running after signing in again')) as StatusWithUsers;
          t.is(loginNameOf(back), 'alice@example.com');
          t.is(await again.done, 0);
          t.false((await admin.getNode({ actor: 'test', ip: '' }, nodeId)).expired);
        }
        t.log(`${kind}: ${((Date.now() - t0) / 1000).toFixed(1)} s`);
      },
    );
  }
}
