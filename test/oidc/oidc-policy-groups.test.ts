// Provider groups in the policy: a group defined as "idp:eng" holds whoever the identity provider puts in eng at their
// last sign-in. A rule on that group admits alice's device (provider group eng) to a server and not bob's (sales);
// when the provider moves bob into eng and he signs in again, the server's filter admits him too. The devices are the
// project's control client signing in through the real provider (oidc-provider) as a person does from the login link;
// the filter checked is the server's PacketFilter, which the official client enforces (test/e2e/policy.test.ts).
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import test from 'ava';
import ipaddr from 'ipaddr.js';
import { createTestCA, type TestCA } from '../harness/ca.ts';
import { PASSWORD } from '../harness/console-client.ts';
import { ControlClient, type MapStream, serverKey } from '../harness/control-client.ts';
import { startImage, type Image } from '../harness/image.ts';
import { oidcEnv, startIdp, type TestIdp, USERS } from '../harness/oidc-idp.ts';
import { freePort, NODE, ROOT } from '../harness/process.ts';
import { ProviderBrowser } from './provider-flow.ts';

const exec = promisify(execFile);
let ca: TestCA;
let image: Image;
let idp: TestIdp;
let tmp: string;

async function hse(...args: string[]): Promise<string> {
  const { stdout } = await exec(NODE, [path.join(ROOT, 'bin/hse.ts'), ...args], { env: { ...image.env, PATH: process.env.PATH } });
  return stdout;
}

test.before(async () => {
  ca = await createTestCA();
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hse-idp-groups-'));
  // The image first (its public URL is the redirect URI to register), the provider on the port it was told.
  const port = await freePort();
  const issuer = `https://localhost:${port}`;
  image = await startImage({
    services: ['coordination', 'console'],
    env: { HSE_CONSOLE_PASSWORD: PASSWORD, HSE_DERP_MODE: 'public', ...oidcEnv({ issuer, caFile: ca.caFile } as TestIdp) },
  });
  idp = await startIdp({ ca, port, redirectUris: [`${image.url}/console/oidc/callback`] });
  await image.procs.console!.waitFor(/identity provider ready/, 120_000);
});

test.after.always(async () => {
  await image?.stop();
  await idp?.stop();
  ca?.remove();
  fs.rmSync(tmp, { recursive: true, force: true });
});

/** A device that signs in with the provider as `user` from its login link; returns it registered. */
async function signedInDevice(hostname: string, user: (typeof USERS)[keyof typeof USERS]): Promise<{ device: ControlClient; ip: string }> {
  const device = await ControlClient.connect(image.port, await serverKey(image.url));
  const hostinfo = { Hostname: hostname, OS: 'linux' };
  const link = (await device.register({ Hostinfo: hostinfo })).AuthURL!;
  const b = new ProviderBrowser(image.url, idp.issuer, ca.caPem);
  const done = await b.callback(await b.signInAtProvider(await b.startDevice(link), user));
  if (done.status !== 200) throw new Error(`sign-in as ${user.login} answered ${done.status}: ${done.body.slice(0, 500)}`);
  const r = await device.register({ Followup: link, Hostinfo: hostinfo });
  if (!r.MachineAuthorized) throw new Error(`${hostname} not authorized: ${JSON.stringify(r)}`);
  const first = await device.stream().waitFor((m) => m.Node !== undefined, 'a full map');
  return { device, ip: first.Node!.Addresses[0].split('/')[0] };
}

/** Whether a SrcIPs entry (an address, a CIDR, a range "a-b" or "*") holds the IPv4 address `ip`. */
function holds(entry: string, ip: string): boolean {
  if (entry === '*') return true;
  const n = (a: string) =>
    ipaddr.IPv4.parse(a)
      .toByteArray()
      .reduce((x, b) => x * 256 + b, 0);
  if (entry.includes('-')) {
    const [lo, hi] = entry.split('-');
    return ipaddr.IPv4.isValid(lo) && n(lo) <= n(ip) && n(ip) <= n(hi);
  }
  if (entry.includes('/')) return !entry.includes(':') && ipaddr.IPv4.parse(ip).match(ipaddr.IPv4.parseCIDR(entry));
  return entry === ip;
}

/** Whether the server's latest filter admits `ip` on port 22. */
function admits(stream: MapStream, ip: string): boolean {
  const filters = stream.messages.filter((m) => m.PacketFilter !== undefined);
  const last = filters[filters.length - 1]?.PacketFilter ?? [];
  return last.some((r) => (r.DstPorts ?? []).some((d) => d.Ports.First <= 22 && d.Ports.Last >= 22) && r.SrcIPs.some((e) => holds(e, ip)));
}

test.serial("a rule on a provider group admits alice's device and not bob's, and follows bob's groups when he signs in again", async (t) => {
  const file = path.join(tmp, 'policy.hujson');
  fs.writeFileSync(
    file,
    `{
      "groups": { "group:eng": ["idp:eng"] },
      "tagOwners": { "tag:server": ["group:eng"] },
      "acls": [{ "action": "accept", "src": ["group:eng"], "dst": ["tag:server:22"] }],
    }`,
  );
  t.regex(await hse('policy', 'set', file), /policy version \d+ is in force/);

  const alice = await signedInDevice('alice-laptop', USERS.alice);
  const bob = await signedInDevice('bob-laptop', USERS.bob);
  t.teardown(() => {
    alice.device.close();
    bob.device.close();
  });

  // The server: a device owned by tag:server (a tagged key of any user; the tag's owners are group:eng).
  await hse('users', 'create', 'infra');
  const key = JSON.parse(await hse('keys', 'create', '--user', 'infra', '--tags', 'tag:server', '--json')).key as string;
  const server = await ControlClient.connect(image.port, await serverKey(image.url));
  t.teardown(() => server.close());
  t.true((await server.register({ Auth: { AuthKey: key }, Hostinfo: { Hostname: 'server', OS: 'linux' } })).MachineAuthorized);
  const stream = server.stream();
  await stream.waitFor((m) => m.Node !== undefined, "the server's full map");
  await stream.waitFor((m) => admits({ messages: [m] } as MapStream, alice.ip), "alice's device admitted on port 22");
  t.true(admits(stream, alice.ip), 'alice (provider group eng) may reach the server');
  t.false(admits(stream, bob.ip), 'bob (provider group sales) may not');

  // The provider moves bob into eng; his groups are refreshed when he signs in again (a new device of his).
  await idp.setGroups(USERS.bob, ['sales', 'eng']);
  const bob2 = await signedInDevice('bob-desktop', USERS.bob);
  t.teardown(() => bob2.device.close());
  await stream.waitFor((m) => admits({ messages: [m] } as MapStream, bob.ip), "bob's first device admitted after his groups changed", 15_000);
  await stream.waitFor((m) => admits({ messages: [m] } as MapStream, bob2.ip), 'his new device admitted too', 15_000);
  t.true(admits(stream, bob2.ip) && admits(stream, bob.ip) && admits(stream, alice.ip));
});
