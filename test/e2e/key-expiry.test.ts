// Key expiry with the official Tailscale client (v1.102.3) through the router: a key gets the tailnet's lifetime
// (HSE_NODE_KEY_EXPIRY) at registration, an operator expiring it takes the client to "needs login", and `tailscale up`
// again brings the same machine back with the same addresses and a fresh lifetime: with a pre-auth key, and
// interactively, where the client regenerates its node key and sends the expired one as OldNodeKey (tailscale
// control/controlclient/direct.go doLogin). Disabling expiry for one machine
// takes the expiry off the client's own node at once.
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import test from 'ava';
import type { NodeView } from '../../shared/model.ts';
import { startImage, type Image } from '../harness/image.ts';
import { NODE, ROOT } from '../harness/process.ts';
import { haveTailscale, TsNode, type TsStatus } from '../harness/tailscale.ts';

const exec = promisify(execFile);
const DAY = 86_400_000;

if (!haveTailscale()) {
  test('official Tailscale client is installed', (t) => t.fail('tailscaled/tailscale not found; run .ci/run or go install them (see README)'));
} else {
  let image: Image;
  let node: TsNode;
  let key: string;

  async function hse(...args: string[]): Promise<string> {
    const { stdout } = await exec(NODE, [path.join(ROOT, 'bin/hse.ts'), ...args], { env: { ...image.env, PATH: process.env.PATH } });
    return stdout;
  }

  const me = async (): Promise<NodeView> => (JSON.parse(await hse('nodes', 'list', '--json')) as NodeView[]).find((n) => n.givenName === 'keeper')!;
  const selfExpiry = (s: TsStatus) => (s.Self as unknown as { KeyExpiry?: string }).KeyExpiry;

  test.before(async () => {
    // 30 days, so the assertions can tell it from the 180-day default.
    image = await startImage({ env: { HSE_NODE_KEY_EXPIRY: '30d' } });
    await hse('users', 'create', 'alice');
    key = JSON.parse(await hse('keys', 'create', '--user', 'alice', '--reusable', '--json')).key as string;
    node = new TsNode({ name: 'keeper', env: { TS_DEBUG_USE_DERP_HTTP: '1' } });
    await node.start();
  });

  test.after.always(async () => {
    await node?.destroy();
    await image?.stop();
  });

  test.serial("a new machine's key expires after HSE_NODE_KEY_EXPIRY, and the client knows when", async (t) => {
    const before = Date.now();
    await node.up(image.url, [`--auth-key=${key}`]);
    const s = await node.waitFor((x) => x.BackendState === 'Running' && selfExpiry(x) !== undefined, 'running with a key expiry');
    const n = await me();
    const at = Date.parse(n.expiry!);
    t.true(at >= before + 30 * DAY - 60_000 && at <= Date.now() + 30 * DAY + 60_000, n.expiry!);
    // The client keeps whole seconds.
    t.true(Math.abs(Date.parse(selfExpiry(s)!) - at) < 1000, `the client has the same expiry: ${selfExpiry(s)} vs ${n.expiry}`);
  });

  test.serial('an expired machine is told so, shows as expired, and comes back with the same addresses after tailscale up', async (t) => {
    const before = await me();
    const first = await node.status();
    await hse('nodes', 'expire', String(before.id));
    const expired = await node.waitFor((s) => s.BackendState === 'NeedsLogin', 'the client to need a login', 30_000);
    t.is(expired.BackendState, 'NeedsLogin');
    t.true((await me()).expired);
    t.regex(await hse('nodes', 'list'), /keeper .* true\s*$/m, 'the list says expired');

    await node.up(image.url, [`--auth-key=${key}`]);
    const back = await node.waitFor((s) => s.BackendState === 'Running', 'running again', 60_000);
    t.deepEqual(back.Self.TailscaleIPs, first.Self.TailscaleIPs);
    const after = await me();
    t.is(after.id, before.id, 'the same machine, not a new one');
    t.false(after.expired);
    t.true(Date.parse(after.expiry!) > Date.now() + 29 * DAY, 'a fresh lifetime');
    t.is((JSON.parse(await hse('nodes', 'list', '--json')) as NodeView[]).length, 1);
  });

  test.serial('after expiry, an interactive tailscale up sends a new node key with the expired one as proof; approved, the same machine is back', async (t) => {
    const before = await me();
    const first = await node.status();
    await hse('nodes', 'expire', String(before.id));
    await node.waitFor((s) => s.BackendState === 'NeedsLogin', 'the client to need a login', 30_000);
    // Without a key the client regenerates its node key and asks for a login (an expired key proves nothing).
    const { url, done } = await node.upInteractive(image.url);
    const authId = url.split('/').pop()!;
    const pending = (JSON.parse(await hse('pending', 'list', '--json')) as { authId: string; nodeKey: string; hostname: string }[]).find(
      (p) => p.authId === authId,
    )!;
    t.is(pending.hostname, 'keeper');
    t.not(pending.nodeKey, before.nodeKey, 'a new node key');
    await hse('pending', 'approve', authId, '--user', 'alice');
    t.is(await done, 0);
    const back = await node.waitFor((s) => s.BackendState === 'Running', 'running again', 60_000);
    t.deepEqual(back.Self.TailscaleIPs, first.Self.TailscaleIPs);
    const after = await me();
    t.is(after.id, before.id);
    t.is(after.nodeKey, pending.nodeKey);
    t.false(after.expired);
    t.is((JSON.parse(await hse('nodes', 'list', '--json')) as NodeView[]).length, 1);
  });

  test.serial("disabling key expiry takes the expiry off the client's node at once; enabling gives a fresh one", async (t) => {
    const n = await me();
    const disabled = JSON.parse(await hse('nodes', 'expiry', String(n.id), '--disable', '--json')) as NodeView;
    t.true(disabled.keyExpiryDisabled);
    t.is(disabled.expiry, null);
    await node.waitFor((s) => selfExpiry(s) === undefined || selfExpiry(s)!.startsWith('0001'), 'no key expiry on the client');
    t.regex(await hse('nodes', 'list'), /keeper/);

    const enabled = JSON.parse(await hse('nodes', 'expiry', String(n.id), '--enable', '--json')) as NodeView;
    t.false(enabled.keyExpiryDisabled);
    t.true(Date.parse(enabled.expiry!) > Date.now() + 29 * DAY);
    await node.waitFor((s) => selfExpiry(s) !== undefined && Date.parse(selfExpiry(s)!) > Date.now() + 29 * DAY, 'the new expiry on the client');
    const wrong = await exec(NODE, [path.join(ROOT, 'bin/hse.ts'), 'nodes', 'expiry', String(n.id)], { env: { ...image.env, PATH: process.env.PATH } }).catch(
      (e: { code: number; stderr: string }) => e,
    );
    t.is((wrong as { code: number }).code, 2);
    t.regex((wrong as { stderr: string }).stderr, /exactly one of --disable or --enable/);
  });
}
