// Taildrop with the official Tailscale client (v1.102.3) through the router: `tailscale file cp` between two devices
// of one user arrives byte-identical at the other's `tailscale file get`; a device of another user is refused until
// the policy grants file sharing between them (hse's grant capability tailscale.com/cap/file-sharing, see README
// "Client features"), and that grant taken away refuses it again on the running clients.
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import test from 'ava';
import { haveTailscale } from '../harness/tailscale.ts';
import { startTailnet, type Tailnet, tryCli, until } from '../harness/tailnet.ts';

// Everyone reaches everyone: what is tested here is the capability, not the network.
const OPEN = { tagOwners: { 'tag:nas': ['alice@'] }, acls: [{ action: 'accept', src: ['*'], dst: ['*:*'] }] };
const BOB_SENDS_TO_ALICE = {
  ...OPEN,
  grants: [{ src: ['bob@'], dst: ['alice@'], app: { 'tailscale.com/cap/file-sharing': [{}] } }],
};

if (!haveTailscale()) {
  test('official Tailscale client is installed', (t) => t.fail('tailscaled/tailscale not found; run .ci/run or go install them (see README)'));
} else {
  let net: Tailnet;
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hse-taildrop-'));

  /** A file of `size` random bytes and its SHA-256. */
  function randomFile(name: string, size: number): { file: string; sha: string } {
    const bytes = crypto.randomBytes(size);
    const file = path.join(tmp, name);
    fs.writeFileSync(file, bytes);
    return { file, sha: crypto.createHash('sha256').update(bytes).digest('hex') };
  }

  /** Moves the files waiting in the device's Taildrop inbox into a fresh directory; name → SHA-256. */
  async function receive(host: string): Promise<Map<string, string>> {
    const dir = fs.mkdtempSync(path.join(tmp, `${host}-inbox-`));
    const r = await tryCli(net.node(host), ['file', 'get', '--wait', dir], 60_000);
    if (r.code !== 0) throw new Error(`tailscale file get on ${host} failed: ${r.stderr}`);
    return new Map(
      fs.readdirSync(dir).map((f) => [
        f,
        crypto
          .createHash('sha256')
          .update(fs.readFileSync(path.join(dir, f)))
          .digest('hex'),
      ]),
    );
  }

  test.before(async () => {
    net = await startTailnet({
      users: { alice: ['laptop', 'phone'], bob: ['desk'] },
      tagged: { nas: { owner: 'alice', tags: ['tag:nas'] } },
      policy: JSON.stringify(OPEN),
    });
  });

  test.after.always(async () => {
    await net?.stop();
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  test.serial('a file sent with tailscale file cp to the same user’s other device arrives byte-identical', async (t) => {
    // With no policy at all (Tailscale's default, everyone reaches everyone): Taildrop needs nothing written.
    const none = await net.hse(['policy', 'set', '-'], '// no policy\n');
    t.is(none.code, 0, none.stderr);
    const { file, sha } = randomFile('report.bin', 300 * 1024);
    const sent = await tryCli(net.node('laptop'), ['file', 'cp', file, 'phone:'], 120_000);
    t.is(sent.code, 0, `file cp failed: ${sent.stderr}\n${net.logs().slice(-8000)}`);
    const got = await receive('phone');
    t.deepEqual([...got.keys()], ['report.bin']);
    t.is(got.get('report.bin'), sha);
    await net.setPolicy(JSON.stringify(OPEN));
  });

  test.serial('a device of another user is not a target until the policy grants file sharing', async (t) => {
    const { file } = randomFile('to-bob.bin', 1024);
    const refused = await tryCli(net.node('laptop'), ['file', 'cp', file, 'desk:']);
    t.not(refused.code, 0);
    t.regex(refused.stderr, /owned by a different user/);
    const targets = await tryCli(net.node('laptop'), ['file', 'cp', '--targets']);
    t.regex(targets.stdout, /phone/);
    t.notRegex(targets.stdout, /desk/);
  });

  test.serial('a grant lets bob send to alice (and not the other way); taking it away refuses bob again', async (t) => {
    await net.setPolicy(JSON.stringify(BOB_SENDS_TO_ALICE));
    const desk = net.node('desk');
    await until(
      'laptop among desk’s Taildrop targets',
      async () => (await tryCli(desk, ['file', 'cp', '--targets'])).stdout,
      (s) => /laptop/.test(s),
    );
    const { file, sha } = randomFile('from-bob.bin', 200 * 1024);
    const sent = await tryCli(desk, ['file', 'cp', file, 'laptop:'], 120_000);
    t.is(sent.code, 0, `file cp failed: ${sent.stderr}`);
    const got = await receive('laptop');
    t.is(got.get('from-bob.bin'), sha);
    // The grant goes one way: alice's devices still may not send to bob.
    const back = await tryCli(net.node('laptop'), ['file', 'cp', file, 'desk:']);
    t.not(back.code, 0);
    t.regex(back.stderr, /owned by a different user/);

    // Taken away while every client keeps running.
    await net.setPolicy(JSON.stringify(OPEN));
    await until(
      'laptop gone from desk’s Taildrop targets',
      async () => (await tryCli(desk, ['file', 'cp', '--targets'])).stdout,
      (s) => !/laptop/.test(s),
    );
    const again = await tryCli(desk, ['file', 'cp', file, 'laptop:']);
    t.not(again.code, 0);
    t.regex(again.stderr, /owned by a different user/);
  });

  test.serial('a device owned by a tag is nobody’s: its owner sends to it only when a grant names the tag', async (t) => {
    const laptop = net.node('laptop');
    const { file, sha } = randomFile('backup.bin', 100 * 1024);
    const refused = await tryCli(laptop, ['file', 'cp', file, 'nas:']);
    t.not(refused.code, 0);
    t.regex(refused.stderr, /owned by a different user/);
    await net.setPolicy(JSON.stringify({ ...OPEN, grants: [{ src: ['alice@'], dst: ['tag:nas'], app: { 'tailscale.com/cap/file-sharing': [{}] } }] }));
    await until(
      'nas among the laptop’s Taildrop targets',
      async () => (await tryCli(laptop, ['file', 'cp', '--targets'])).stdout,
      (s) => /nas/.test(s),
    );
    const sent = await tryCli(laptop, ['file', 'cp', file, 'nas:'], 120_000);
    t.is(sent.code, 0, `file cp failed: ${sent.stderr}`);
    t.is((await receive('nas')).get('backup.bin'), sha);
  });
}
