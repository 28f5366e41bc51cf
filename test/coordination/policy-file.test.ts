// HSE_POLICY_FILE: the policy is a file, read at start and again whenever it changes on disk. A new version reaches the
// open map streams as a new PacketFilter; a version that does not validate is refused (logged with its line, in the
// activity log) and the previous one stays; the CLI refuses to set the policy and says which file to edit.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import test from 'ava';
import { ControlClient, serverKey } from '../harness/control-client.ts';
import { startImage, type Image } from '../harness/image.ts';
import { NODE, ROOT } from '../harness/process.ts';

const exec = promisify(execFile);
let image: Image;
let dir: string;
let file: string;

const policy = (port: number) => `{
  // the whole tailnet may reach port ${port}
  "acls": [{ "action": "accept", "src": ["*"], "dst": ["*:${port}"] }],
}
`;

async function hse(...args: string[]): Promise<{ stdout: string; stderr: string; code: number }> {
  try {
    return { ...(await exec(NODE, [path.join(ROOT, 'bin/hse.ts'), ...args], { env: { ...image.env, PATH: process.env.PATH } })), code: 0 };
  } catch (e) {
    const err = e as { stdout: string; stderr: string; code: number };
    return { stdout: err.stdout, stderr: err.stderr, code: err.code };
  }
}

/** Replaces the file the way editors do: a new file renamed over the old one. */
function writePolicy(text: string): void {
  const tmp = `${file}.tmp`;
  fs.writeFileSync(tmp, text);
  fs.renameSync(tmp, file);
}

test.before(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hse-policy-file-'));
  file = path.join(dir, 'policy.hujson');
  fs.writeFileSync(file, policy(1111));
  image = await startImage({ services: ['coordination'], env: { HSE_POLICY_FILE: file } });
});
test.after.always(async () => {
  await image?.stop();
  fs.rmSync(dir, { recursive: true, force: true });
});

const ports = (m: { PacketFilter?: { DstPorts?: { Ports: { First: number } }[] }[] }) =>
  (m.PacketFilter ?? []).flatMap((r) => (r.DstPorts ?? []).map((d) => d.Ports.First));

test.serial('the file is the policy: a change on disk reaches open streams; a broken version is refused and the last good one stays', async (t) => {
  await hse('users', 'create', 'ops');
  const key = JSON.parse((await hse('keys', 'create', '--user', 'ops', '--reusable', '--json')).stdout).key as string;
  const c = await ControlClient.connect(image.port, await serverKey(image.url));
  t.teardown(() => c.close());
  t.true((await c.register({ Auth: { AuthKey: key } })).MachineAuthorized);
  const stream = c.stream();
  const first = await stream.waitFor((m) => m.Node !== undefined, 'the full map');
  t.deepEqual(ports(first), [1111], 'the filter comes from the file');

  writePolicy(policy(2222));
  const changed = await stream.waitFor((m) => ports(m).includes(2222), 'a new PacketFilter from the changed file', 15_000);
  t.is(changed.Node, undefined, 'a delta, not a new stream');
  await image.procs.coordination!.waitFor(/policy in force origin="file .*policy\.hujson"/);

  writePolicy('{\n  "acls": [\n    { "action": "accept", "src": ["group:missing"], "dst": ["*:*"] },\n  ],\n}\n');
  await image.procs.coordination!.waitFor(/policy refused; the policy in force stays .*line 3, column \d+: .*group:missing/, 15_000);
  const inForce = await hse('policy', 'get');
  t.regex(inForce.stdout, /\*:2222/, 'the last good version stays in force');
  const before = stream.messages.length;
  await new Promise((r) => setTimeout(r, 1500));
  t.false(
    stream.messages.slice(before).some((m) => m.PacketFilter !== undefined),
    'the refused version sent no filter',
  );
  const log = await hse('policy', 'history', '--json');
  t.is(log.code, 0);
});

test.serial('the CLI refuses to set the policy and names the file to edit instead', async (t) => {
  const other = path.join(dir, 'other.hujson');
  fs.writeFileSync(other, policy(3333));
  const r = await hse('policy', 'set', other);
  t.is(r.code, 1);
  t.regex(r.stderr, new RegExp(`the policy is the file ${file.replace(/[.]/g, '\\.')} \\(HSE_POLICY_FILE\\); edit that file instead`));
  t.regex((await hse('policy', 'get')).stdout, /\*:2222/);
});
