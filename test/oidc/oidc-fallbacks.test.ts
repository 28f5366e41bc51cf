// The other ways in, beside the identity provider: with HSE_OIDC_OPERATOR_APPROVAL=on an administrator still
// approves a waiting device by hand — also while the provider does not answer, which the device page then says —
// and with HSE_OIDC_CONSOLE_PASSWORDS=off the console offers only the provider, refuses a posted password and makes no
// password administrator. Without approval by hand, Machines shows waiting devices with no Approve button.
// No provider runs here: its issuer points at a port nobody listens on.
import fs from 'node:fs';
import path from 'node:path';
import test from 'ava';
import { Client, PASSWORD } from '../harness/console-client.ts';
import { ControlClient, serverKey } from '../harness/control-client.ts';
import { startImage, type Image } from '../harness/image.ts';
import { freePort } from '../harness/process.ts';

let absentIssuer: string;
const images: Image[] = [];

test.before(async () => {
  absentIssuer = `https://localhost:${await freePort()}`;
});
test.after.always(async () => {
  for (const i of images) await i.stop();
});

const provider = (extra: Record<string, string>) => ({
  HSE_OIDC_ISSUER: absentIssuer,
  HSE_OIDC_CLIENT_ID: 'hse',
  HSE_OIDC_CLIENT_SECRET: 'secret',
  HSE_OIDC_NAME: 'Company SSO',
  ...extra,
});

test('with operator approval on, an administrator approves a waiting device by hand while the provider is away', async (t) => {
  const image = await startImage({
    services: ['coordination', 'console'],
    env: { HSE_CONSOLE_PASSWORD: PASSWORD, HSE_DERP_MODE: 'public', ...provider({ HSE_OIDC_OPERATOR_APPROVAL: 'on', HSE_OIDC_ADMIN_GROUPS: 'ops' }) },
  });
  images.push(image);
  const device = await ControlClient.connect(image.port, await serverKey(image.url));
  t.teardown(() => device.close());
  const link = (await device.register({ Hostinfo: { Hostname: 'kiosk', OS: 'linux' } })).AuthURL!;
  const path = new URL(link).pathname;

  const visitor = new Client(image.url);
  const page = await visitor.request(path);
  t.is(page.status, 200);
  t.regex(page.body, /Sign-in with Company SSO is not available right now: the identity provider https:\/\/localhost:\d+\/ could not be used/);
  t.regex(page.body, /id="device-signin" disabled/);
  t.regex(page.body, new RegExp(`href="${path}\\?approve"`));

  const operator = new Client(image.url);
  t.is((await operator.signIn('admin', PASSWORD)).status, 303);
  const approval = await operator.request(`${path}?approve`);
  t.is(approval.status, 200);
  t.regex(approval.body, /id="approve-form"/);
  const done = await operator.post(`${path}/approve`, { newUser: 'kiosk-owner' });
  t.is(done.status, 303, done.body.slice(0, 1000));
  const follow = await device.register({ Followup: link, Hostinfo: { Hostname: 'kiosk', OS: 'linux' } });
  t.true(follow.MachineAuthorized, JSON.stringify(follow));
  t.is(follow.Login?.LoginName, 'kiosk-owner');
  // The device page now says it was added, and by whom.
  t.regex((await visitor.request(path)).body, /This device was already added[\s\S]*kiosk joined the tailnet \(added by admin\)/);
});

test('with passwords off, the sign-in page offers only the provider and a posted password is refused', async (t) => {
  const image = await startImage({
    services: ['console'],
    env: { HSE_CONSOLE_PASSWORD: PASSWORD, ...provider({ HSE_OIDC_CONSOLE_PASSWORDS: 'off', HSE_OIDC_ADMIN_GROUPS: 'ops' }) },
  });
  images.push(image);
  const c = new Client(image.url);
  const form = await c.request('/console/login');
  t.is(form.status, 200);
  t.regex(form.body, /Sign in with Company SSO/);
  t.notRegex(form.body, /name="password"/);
  const r = await c.request('/console/login', { form: { username: 'admin', password: PASSWORD, csrf: Client.csrfOf(form.body) } });
  t.is(r.status, 403);
  t.regex(r.body, /signs people in with Company SSO only \(HSE_OIDC_CONSOLE_PASSWORDS=off\)/);
  t.is((await c.request('/console/machines')).status, 302, 'no session was made');
});

test('with a provider and approval by hand off, Machines lists a waiting device without Approve and says how it joins', async (t) => {
  const image = await startImage({
    services: ['coordination', 'console'],
    env: { HSE_CONSOLE_PASSWORD: PASSWORD, HSE_DERP_MODE: 'public', ...provider({ HSE_OIDC_ADMIN_GROUPS: 'ops' }) },
  });
  images.push(image);
  const device = await ControlClient.connect(image.port, await serverKey(image.url));
  t.teardown(() => device.close());
  const link = (await device.register({ Hostinfo: { Hostname: 'kiosk', OS: 'linux' } })).AuthURL!;
  const authId = new URL(link).pathname.split('/').pop()!;
  const operator = new Client(image.url);
  t.is((await operator.signIn('admin', PASSWORD)).status, 303);
  const page = await operator.request('/console/machines');
  t.regex(page.body, new RegExp(`<li class="pending-item" data-auth-id="${authId}">`));
  t.notRegex(page.body, /\/approve"/, 'no approve form');
  t.notRegex(page.body, />Approve</);
  t.regex(page.body, /waiting for its owner to sign in with Company SSO/);
  t.regex(page.body, /Each joins when its owner opens the link the device printed and signs in with Company SSO; approving by hand is off/);
  t.regex(page.body, new RegExp(`action="/console/register/${authId}/reject"`), 'an administrator can still end the login');
});

test('with passwords off and no password configured, no administrator password is generated, and the log says why', async (t) => {
  const image = await startImage({ services: ['console'], env: provider({ HSE_OIDC_CONSOLE_PASSWORDS: 'off', HSE_OIDC_ADMIN_GROUPS: 'ops' }) });
  images.push(image);
  t.false(fs.existsSync(path.join(image.dataDir, 'first-admin-password')));
  t.regex(
    image.logs(),
    /console passwords are off \(HSE_OIDC_CONSOLE_PASSWORDS=off\), so no password administrator "admin" is created; administrators sign in with Company SSO \(HSE_OIDC_ADMIN_GROUPS\)/,
  );
});
