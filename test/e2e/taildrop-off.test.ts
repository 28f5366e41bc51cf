// HSE_TAILDROP=off turns Taildrop off tailnet-wide: with the official client (v1.102.3), `tailscale file cp` between
// two devices of one user is refused by the sending client itself, and a policy grant of file sharing does not bring it
// back (the switch is above the policy).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import test from 'ava';
import { haveTailscale } from '../harness/tailscale.ts';
import { startTailnet, type Tailnet, tryCli } from '../harness/tailnet.ts';

if (!haveTailscale()) {
  test('official Tailscale client is installed', (t) => t.fail('tailscaled/tailscale not found; run .ci/run or go install them (see README)'));
} else {
  let net: Tailnet;
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hse-taildrop-off-'));

  test.before(async () => {
    net = await startTailnet({ users: { alice: ['laptop', 'phone'] }, env: { HSE_TAILDROP: 'off' } });
  });

  test.after.always(async () => {
    await net?.stop();
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  test.serial('with HSE_TAILDROP=off a device cannot send files even to its own user’s devices', async (t) => {
    const file = path.join(tmp, 'note.txt');
    fs.writeFileSync(file, 'hello');
    const refused = await tryCli(net.node('laptop'), ['file', 'cp', file, 'phone:']);
    t.not(refused.code, 0);
    t.regex(refused.stderr, /cannot send files: missing required Taildrop capability/);
  });

  test.serial('a policy granting file sharing does not turn it back on', async (t) => {
    await net.setPolicy(
      JSON.stringify({
        acls: [{ action: 'accept', src: ['*'], dst: ['*:*'] }],
        grants: [{ src: ['alice@'], dst: ['alice@'], app: { 'tailscale.com/cap/file-sharing': [{}] } }],
      }),
    );
    const file = path.join(tmp, 'note.txt');
    const refused = await tryCli(net.node('laptop'), ['file', 'cp', file, 'phone:']);
    t.not(refused.code, 0);
    t.regex(refused.stderr, /cannot send files: missing required Taildrop capability/);
  });
}
