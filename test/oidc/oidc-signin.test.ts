// Sign-in with a real OpenID provider (oidc-provider over HTTPS from the test CA, test/harness/oidc-idp.ts), driven
// at the HTTP level through the real router, coordination service and console: devices added by signing in, people
// refused with a page that says why, console roles from provider groups, and every way an answer from the provider
// can be wrong or replayed. The provider is started only after the image, so the first test also shows that a
// provider that does not answer at start is logged, retried, and does not stop passwords from working meanwhile.
// (The same flows in Chromium with the official client, behind the four reverse proxies: oidc-behind-proxies.test.ts.)
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import test from 'ava';
import { AdminClient, type UserView } from '../../shared/admin-client.ts';
import { parseConfig } from '../../shared/config.ts';
import type { PendingAuth } from '../../shared/model.ts';
import { adminSocket } from '../../shared/paths.ts';
import { Client, PASSWORD } from '../harness/console-client.ts';
import { ControlClient, serverKey } from '../harness/control-client.ts';
import { createTestCA, type TestCA } from '../harness/ca.ts';
import { startImage, type Image } from '../harness/image.ts';
import { IDP_CLIENT, OTHER_CLIENT, oidcEnv, startIdp, type TestIdp, USERS } from '../harness/oidc-idp.ts';
import { freePort, runProcess } from '../harness/process.ts';
import { ProviderBrowser, withParam } from './provider-flow.ts';

let ca: TestCA;
let image: Image;
let idp: TestIdp | null = null;
let idpPort: number;
let admin: AdminClient;
const who = { actor: 'test', ip: '' };

test.before(async () => {
  ca = await createTestCA();
  idpPort = await freePort();
  const issuer = `https://localhost:${idpPort}`;
  image = await startImage({
    services: ['coordination', 'console'],
    env: {
      HSE_CONSOLE_PASSWORD: PASSWORD,
      HSE_DERP_MODE: 'public',
      ...oidcEnv({ issuer, caFile: ca.caFile } as TestIdp),
    },
  });
  admin = new AdminClient(adminSocket(parseConfig(image.env)));
});

test.after.always(async () => {
  await idp?.stop();
  await image?.stop();
  ca?.remove();
});

const consoleLog = () => image.procs.console!.output();
const browser = (localAddress?: string) => new ProviderBrowser(image.url, idp!.issuer, ca.caPem, localAddress);

/** A device (the project's test control client) that ran `tailscale up` without a key: its login link. */
async function waitingDevice(hostname: string): Promise<{ device: ControlClient; authUrl: string; authId: string }> {
  const device = await ControlClient.connect(image.port, await serverKey(image.url));
  const r = await device.register({ Hostinfo: { Hostname: hostname, OS: 'linux' } });
  if (!r.AuthURL) throw new Error(`expected a login link, got ${JSON.stringify(r)}`);
  return { device, authUrl: r.AuthURL, authId: r.AuthURL.split('/').pop()! };
}

async function pending(authId: string): Promise<PendingAuth> {
  return admin.getPending(who, authId);
}

async function userNamed(name: string): Promise<UserView | undefined> {
  return (await admin.listUsers(who)).find((u) => u.name === name);
}

async function logEntries(action: string): Promise<{ action: string; actor: string; ip: string; target: string; details: Record<string, unknown> }[]> {
  const c = new Client(image.url);
  await c.signIn('admin', PASSWORD);
  const r = await c.request(`/console/api/logs?action=${action}&limit=100`);
  return (JSON.parse(r.body) as { entries: { action: string; actor: string; ip: string; target: string; details: Record<string, unknown> }[] }).entries;
}

test.serial(
  'a provider that does not answer at start is logged and retried; passwords work meanwhile, then the provider is used once it answers',
  async (t) => {
    const line = await image.procs.console!.waitFor(/identity provider unreachable or refused.*retryInSeconds/, 30_000);
    t.regex(line[0], new RegExp(`issuer=https://localhost:${idpPort}/`));
    const c = new Client(image.url);
    t.is((await c.signIn('admin', PASSWORD)).status, 303, 'a console password still signs in');
    const meanwhile = new Client(image.url);
    const csrf = await meanwhile.loginForm();
    const r = await meanwhile.request('/console/oidc/login', { form: { csrf } });
    t.is(r.status, 503);
    t.regex(r.body, /Sign-in with Test IdP is not available right now: the identity provider https:\/\/localhost:\d+\/ could not be used/);

    idp = await startIdp({ ca, port: idpPort, redirectUris: [`${image.url}/console/oidc/callback`] });
    await image.procs.console!.waitFor(/identity provider ready/, 120_000);
    const start = await browser().startConsole();
    t.true(start.startsWith(`${idp.issuer}/auth?`), start);
    const q = new URL(start).searchParams;
    t.is(q.get('client_id'), IDP_CLIENT.id);
    t.is(q.get('redirect_uri'), `${image.url}/console/oidc/callback`);
    t.is(q.get('code_challenge_method'), 'S256');
    t.truthy(q.get('state'));
    t.truthy(q.get('nonce'));
    t.is(q.get('scope'), 'openid profile email groups');
  },
);

test.serial("alice adds a waiting device by signing in: it is hers, her user made from the provider's profile and groups", async (t) => {
  const { device, authUrl, authId } = await waitingDevice('alice-laptop');
  t.teardown(() => device.close());
  const b = browser('127.0.0.2');
  const page = await b.hse.request(new URL(authUrl).pathname);
  t.is(page.status, 200);
  t.regex(page.body, /Add this device to the tailnet/);
  t.regex(page.body, /alice-laptop/);
  t.regex(page.body, /Sign in with Test IdP to add it/);
  const callback = await b.signInAtProvider(await b.startDevice(authUrl), USERS.alice);
  t.true(callback.startsWith(`${image.url}/console/oidc/callback?`), callback);
  const done = await b.callback(callback);
  t.is(done.status, 200, done.body.slice(0, 2000));
  t.regex(done.body, /Device added/);
  t.regex(done.body, /<strong id="added-user">alice@example\.com<\/strong>/);

  const p = await pending(authId);
  t.is(p.status, 'approved');
  const node = await admin.getNode(who, p.nodeId!);
  t.is(node.user, 'alice@example.com');
  t.is(node.registeredBy, 'identity-provider');
  // The device's own follow-up now learns it is logged in.
  const follow = await device.register({ Followup: authUrl, Hostinfo: { Hostname: 'alice-laptop', OS: 'linux' } });
  t.true(follow.MachineAuthorized, JSON.stringify(follow));
  t.is(follow.Login?.LoginName, 'alice@example.com');

  const u = await userNamed('alice@example.com');
  t.truthy(u);
  t.is(u!.displayName, 'Alice Example');
  t.is(u!.email, 'alice@example.com');
  t.is(u!.picture, `${idp!.issuer}/__test/picture/alice.svg`);
  t.deepEqual(u!.idpGroups, ['eng']);
  t.deepEqual(u!.idp, { issuer: idp!.issuer, subject: USERS.alice.sub });

  const [reg] = await logEntries('node.register');
  t.is(reg.actor, 'alice@example.com');
  t.is(reg.ip, '127.0.0.2', 'the activity log has the address of the browser that signed in');
  t.is(reg.details.method, 'identity provider');
});

test.serial(
  'the same person is the same user at the next sign-in (matched by subject), with groups refreshed; an existing user of the same e-mail is not taken over',
  async (t) => {
    // Someone created a local user with bob's address before bob ever signed in.
    await admin.createUser(who, 'bob@example.com');
    const first = await waitingDevice('bob-phone');
    t.teardown(() => first.device.close());
    const b = browser();
    t.is((await b.callback(await b.signInAtProvider(await b.startDevice(first.authUrl), USERS.bob))).status, 200);
    const bobNode = await admin.getNode(who, (await pending(first.authId)).nodeId!);
    t.is(bobNode.user, 'bob@example.com-2', "the provider's bob is not the local user who happens to have that name");
    const local = await userNamed('bob@example.com');
    t.is(local!.idp, undefined);

    const second = await waitingDevice('alice-desktop');
    t.teardown(() => second.device.close());
    const again = browser();
    t.is((await again.callback(await again.signInAtProvider(await again.startDevice(second.authUrl), USERS.alice))).status, 200);
    const node = await admin.getNode(who, (await pending(second.authId)).nodeId!);
    t.is(node.user, 'alice@example.com');
    const alices = (await admin.listUsers(who)).filter((u) => u.idp?.subject === USERS.alice.sub);
    t.is(alices.length, 1);
    t.is(alices[0].machines, 2);
  },
);

for (const [name, user, reason] of [
  ['outside the allowed domain', USERS.mallory, /Your e-mail address mallory@elsewhere\.example is not in a domain allowed to add devices \(example\.com\)/],
  ['in no allowed group', USERS.erin, /You are not in any of the identity provider groups allowed to add devices/],
  ['whose e-mail is not verified', USERS.dave, /does not mark your e-mail address dave@example\.com as verified/],
] as const) {
  test.serial(`someone ${name} is told why, and the device stays waiting for someone who may add it`, async (t) => {
    const { device, authUrl, authId } = await waitingDevice(`${user.login}-box`);
    t.teardown(() => device.close());
    const b = browser();
    const r = await b.callback(await b.signInAtProvider(await b.startDevice(authUrl), user));
    t.is(r.status, 403);
    t.regex(r.body, /This device was not added/);
    t.regex(r.body, reason);
    t.is((await pending(authId)).status, 'pending');
    t.true((await admin.listPending(who)).some((p) => p.authId === authId));
    const [entry] = await logEntries('node.signin_refused');
    t.is(entry.actor, user.email);
    t.is(entry.target, `${user.login}-box`);
    // The link still works for someone allowed: here, in the same browser, by signing in to the provider again as
    // another account (the provider is asked to show its sign-in form although someone is signed in there).
    const again = await b.hse.request(`/console/oidc/device/${authId}`, { form: { csrf: Client.csrfOf(r.body), another: '1' } });
    t.is(again.status, 303);
    t.is(new URL(String(again.headers.location)).searchParams.get('prompt'), 'login');
    const added = await b.callback(await b.signInAtProvider(String(again.headers.location), USERS.alice));
    t.is(added.status, 200);
    t.regex(added.body, /<strong id="added-user">alice@example\.com<\/strong>/);
    t.is((await pending(authId)).status, 'approved');
  });
}

test.serial(
  'console: the admin group signs in as administrator, the auditor group as auditor who cannot change anything, anyone else gets no access',
  async (t) => {
    const olivia = browser('127.0.0.2');
    const r = await olivia.callback(await olivia.signInAtProvider(await olivia.startConsole('/console/users'), USERS.olivia));
    t.is(r.status, 303, r.body.slice(0, 1000));
    t.is(r.headers.location, `${image.url}/console/users`);
    const users = await olivia.hse.request('/console/users');
    t.is(users.status, 200);
    t.regex(users.body, /class="name">olivia@example\.com<\/span><span class="role">admin/);
    t.is((await olivia.hse.post('/console/users', { name: 'made-by-olivia' })).status, 303);

    const carol = browser('127.0.0.3');
    t.is((await carol.callback(await carol.signInAtProvider(await carol.startConsole(), USERS.carol))).status, 303);
    const page = await carol.hse.request('/console/users');
    t.regex(page.body, /class="role">auditor/);
    const refused = await carol.hse.post('/console/users', { name: 'made-by-carol' });
    t.is(refused.status, 403);
    t.regex(refused.body, /auditor account/);
    t.is(await userNamed('made-by-carol'), undefined);

    const bob = browser('127.0.0.4');
    const denied = await bob.callback(await bob.signInAtProvider(await bob.startConsole(), USERS.bob));
    t.is(denied.status, 403);
    t.regex(denied.body, /No console access/);
    t.regex(denied.body, /bob@example\.com/);
    t.is((await bob.hse.request('/console/machines')).status, 302, 'no session was made');

    const signins = await logEntries('console.signin');
    const byActor = new Map(signins.map((e) => [e.actor, e]));
    t.is(byActor.get('olivia@example.com')?.ip, '127.0.0.2');
    t.is(byActor.get('olivia@example.com')?.details.method, 'identity provider');
    t.is(byActor.get('carol@example.com')?.ip, '127.0.0.3');
    t.is(byActor.get('carol@example.com')?.details.role, 'auditor');
    const failed = (await logEntries('console.signin_failed')).find((e) => e.actor === 'bob@example.com');
    t.is(failed?.ip, '127.0.0.4');
    t.is(failed?.details.reason, 'in no console group');
  },
);

test.serial('console roles follow the groups at each sign-in: someone taken out of the admin group loses the console, their open session too', async (t) => {
  const first = browser();
  t.is((await first.callback(await first.signInAtProvider(await first.startConsole(), USERS.olivia))).status, 303);
  t.is((await first.hse.request('/console/machines')).status, 200);
  await idp!.setGroups(USERS.olivia, []);
  t.teardown(() => idp!.setGroups(USERS.olivia, USERS.olivia.groups));
  const second = browser();
  const denied = await second.callback(await second.signInAtProvider(await second.startConsole(), USERS.olivia));
  t.is(denied.status, 403);
  t.regex(denied.body, /No console access/);
  t.is((await first.hse.request('/console/machines')).status, 302, 'the session signed in before is over');
});

test.serial('an account an administrator disabled under Accounts stays out, whatever its groups say', async (t) => {
  const admin1 = new Client(image.url);
  await admin1.signIn('admin', PASSWORD);
  t.is((await admin1.post(`/console/accounts/${encodeURIComponent('carol@example.com')}/disable`)).status, 303);
  const carol = browser();
  const r = await carol.callback(await carol.signInAtProvider(await carol.startConsole(), USERS.carol));
  t.is(r.status, 403);
  t.regex(r.body, /Your console account &quot;carol@example\.com&quot; was disabled by an administrator/);
  t.is((await admin1.post(`/console/accounts/${encodeURIComponent('carol@example.com')}/enable`)).status, 303);
  const again = browser();
  t.is((await again.callback(await again.signInAtProvider(await again.startConsole(), USERS.carol))).status, 303);
});

test.serial('approving by hand is refused while the provider is how devices join (HSE_OIDC_OPERATOR_APPROVAL off)', async (t) => {
  const { device, authId } = await waitingDevice('hand-approved');
  t.teardown(() => device.close());
  await admin.createUser(who, 'hand-owner');
  const err = await admin.approve(who, authId, 'hand-owner').catch((e: Error) => e);
  t.true(err instanceof Error);
  t.regex((err as Error).message, /devices join by their owner signing in with Test IdP, so approving by hand is switched off.*HSE_OIDC_OPERATOR_APPROVAL=on/);
  t.is((await pending(authId)).status, 'pending');
});

// ---- answers that must be refused ----------------------------------------------------------------------------

/** Starts a console sign-in as olivia and returns the provider's genuine answer, not yet delivered. */
async function genuineAnswer(): Promise<{ b: ProviderBrowser; callback: string; authorization: string }> {
  const b = browser();
  const authorization = await b.startConsole();
  return { b, callback: await b.signInAtProvider(authorization, USERS.olivia), authorization };
}

async function refusedAnswer(t: import('ava').ExecutionContext, b: ProviderBrowser, callback: string, reason: RegExp): Promise<void> {
  const r = await b.callback(callback);
  t.is(r.status, 400, r.body.slice(0, 1500));
  t.regex(r.body, /Sign-in not completed/);
  t.log(/<h1>[^<]*<\/h1>\s*<p>([^<]*)<\/p>/.exec(r.body)?.[1] ?? r.body);
  t.regex(r.body, reason);
  t.is((await b.hse.request('/console/machines')).status, 302, 'no console session');
}

test.serial('a tampered state is refused', async (t) => {
  const { b, callback } = await genuineAnswer();
  await refusedAnswer(t, b, withParam(callback, 'state', 'A'.repeat(43)), /does not belong to a sign-in under way in this browser: no sign-in with this state/);
});

test.serial('an answer delivered to another browser than the one that started the sign-in is refused (no login CSRF)', async (t) => {
  const { callback } = await genuineAnswer();
  // The attacker's genuine answer, carried to a victim's browser (which has no binding cookie of that sign-in).
  const victim = new ProviderBrowser(image.url, idp!.issuer, ca.caPem);
  await victim.hse.request('/console/login');
  await refusedAnswer(t, victim, callback, /the sign-in was started in another browser/);
});

test.serial('the provider saying no (the person cancelled) is shown in its words', async (t) => {
  const b = browser();
  const authorization = new URL(await b.startConsole());
  const state = authorization.searchParams.get('state')!;
  const answer = `${image.url}/console/oidc/callback?error=access_denied&error_description=${encodeURIComponent('the user cancelled')}&state=${state}&iss=${encodeURIComponent(idp!.issuer)}`;
  await refusedAnswer(t, b, answer, /Test IdP did not sign you in: the user cancelled/);
});

test.serial('a replayed answer is refused: the code was used once', async (t) => {
  const { b, callback } = await genuineAnswer();
  t.is((await b.callback(callback)).status, 303, 'the genuine answer signs in');
  const again = new ProviderBrowser(image.url, idp!.issuer, ca.caPem);
  for (const [k, v] of b.hse.jar) if (!k.includes('session')) again.hse.jar.set(k, v);
  await refusedAnswer(t, again, callback, /no sign-in with this state is under way: it was already used/);
});

test.serial('a code from another sign-in is refused by the provider (it was issued for another PKCE challenge)', async (t) => {
  const first = await genuineAnswer();
  const second = await genuineAnswer();
  // The second sign-in's state, so hse accepts the answer as its own, with the first sign-in's code.
  const swapped = withParam(second.callback, 'code', new URL(first.callback).searchParams.get('code'));
  await refusedAnswer(t, second.b, swapped, /invalid_grant: grant request is invalid/);
});

test.serial('a code the provider issued to another application is refused', async (t) => {
  const b = browser();
  const ours = await b.startConsole();
  // The same request, but as the other application registered at the provider: its code, sent back to our callback.
  const forOther = withParam(ours, 'client_id', OTHER_CLIENT.id);
  const callback = await b.signInAtProvider(forOther, USERS.olivia);
  await refusedAnswer(t, b, callback, /invalid_grant: grant request is invalid/);
});

test.serial('an ID token with another nonce is refused', async (t) => {
  const b = browser();
  const ours = await b.startConsole();
  // An authorization request whose nonce was swapped on the way: the provider signs what it was asked for.
  const callback = await b.signInAtProvider(withParam(ours, 'nonce', 'nonce-an-attacker-chose'), USERS.olivia);
  await refusedAnswer(t, b, callback, /unexpected ID Token &quot;nonce&quot; claim value/);
});

test.serial('an answer claiming another issuer (mix-up) is refused', async (t) => {
  const { b, callback } = await genuineAnswer();
  t.is(new URL(callback).searchParams.get('iss'), idp!.issuer, 'the provider names itself in its answer (RFC 9207)');
  await refusedAnswer(t, b, withParam(callback, 'iss', 'https://evil.example'), /unexpected &quot;iss&quot; \(issuer\) response parameter value/);
});

for (const [claim, value, reason] of [
  ['iss', 'https://evil.example', /unexpected JWT &quot;iss&quot; \(issuer\) claim value/],
  ['aud', 'other-app', /unexpected JWT &quot;aud&quot; \(audience\) claim value/],
  ['nonce', 'replayed-nonce', /unexpected ID Token &quot;nonce&quot; claim value/],
] as const) {
  test.serial(`an ID token with a wrong "${claim}", validly signed by the provider, is refused`, async (t) => {
    const { b, callback } = await genuineAnswer();
    await idp!.tamperNextIdToken(claim, value);
    await refusedAnswer(t, b, callback, reason);
    const failed = (await logEntries('console.signin_failed')).find(
      (e) => e.details.method === 'identity provider' && String(e.details.reason).includes(claim),
    );
    t.truthy(failed, `activity entry for the refused ${claim}`);
  });
}

test('a provider whose metadata names another issuer is refused at start, with the reason in the log', async (t) => {
  if (!idp) return t.fail('the provider did not start');
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'hse-oidc-iss-'));
  t.teardown(() => fs.rmSync(dataDir, { recursive: true, force: true }));
  // The same provider reached as 127.0.0.1: its metadata says https://localhost:<port>, so it is not this issuer.
  const proc = runProcess('services/console/src/main.ts', {
    ...image.env,
    HSE_DATA_DIR: dataDir,
    HSE_RUN_DIR: path.join(dataDir, 'run'),
    ...oidcEnv(idp, { HSE_OIDC_ISSUER: `https://127.0.0.1:${idp.port}` }),
  });
  t.teardown(() => proc.stop());
  const line = await proc.waitFor(/identity provider unreachable or refused.*/, 30_000);
  t.regex(line[0], /issuer/i);
  t.regex(line[0], /retryInSeconds=2/);
});

test.serial('the device page of an unknown link says to run tailscale up again', async (t) => {
  const r = await new Client(image.url).request('/console/register/not-a-real-link');
  t.is(r.status, 404);
  t.regex(r.body, /This login link is unknown or has expired/);
  t.regex(consoleLog(), /identity provider ready/);
});
