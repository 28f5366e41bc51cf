// The tailnet policy with official Tailscale clients (v1.102.3, userspace networking, through the router): who may
// reach what is decided by each destination's PacketFilter, and a node in no rule is absent from the others' maps.
// Services are TCP echo listeners on the host's loopback, which userspace tailscaled exposes on every node's tailnet
// address; `tailscale nc` is the client (TsNode.canConnect).
//
//   alice (alpha) may reach bob's devices on one port: a rule from group:eng (alice) to bob@:<port>
//   bob (bravo) is in no rule as a source: he may not open a connection to alice
//   carol (charlie) is in no rule at all: alpha and bravo do not see her, she sees nobody
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import test from 'ava';
import { type EchoServer, startEchoServer } from '../harness/echo-server.ts';
import { startImage, type Image } from '../harness/image.ts';
import { NODE, ROOT } from '../harness/process.ts';
import { haveTailscale, TsNode, type TsStatus } from '../harness/tailscale.ts';

const exec = promisify(execFile);

if (!haveTailscale()) {
  test('official Tailscale client is installed', (t) => t.fail('tailscaled/tailscale not found; run .ci/run or go install them (see README)'));
} else {
  let image: Image;
  let open: EchoServer;
  let closed: EchoServer;
  const nodes: TsNode[] = [];
  const ips: Record<string, string> = {};
  let tmp: string;

  const hse = async (...args: string[]): Promise<{ stdout: string; stderr: string; code: number }> => {
    try {
      const r = await exec(NODE, [path.join(ROOT, 'bin/hse.ts'), ...args], { env: { ...image.env, PATH: process.env.PATH } });
      return { ...r, code: 0 };
    } catch (e) {
      const err = e as { stdout: string; stderr: string; code: number };
      return { stdout: err.stdout, stderr: err.stderr, code: err.code };
    }
  };
  const setPolicy = async (text: string) => {
    const file = path.join(tmp, `policy-${Date.now()}-${Math.random()}.hujson`);
    fs.writeFileSync(file, text);
    return { file, ...(await hse('policy', 'set', file)) };
  };
  const policy = (extraAcls = '', extraTests = '') => `{
    // who may reach what
    "groups": { "group:eng": ["alice@"] },
    "tagOwners": { "tag:server": ["alice@"] },
    "acls": [
      { "action": "accept", "src": ["group:eng"], "dst": ["bob@:${open.port}"] },
      ${extraAcls}
    ],
    "tests": [
      { "src": "alice@", "accept": ["bob@:${open.port}"] },
      ${extraTests}
    ],
  }`;

  async function join(name: string, user: string, extra: string[] = []): Promise<TsNode> {
    const key = JSON.parse((await hse('keys', 'create', '--user', user, '--reusable', '--json')).stdout).key as string;
    // An http:// login server means an http DERP node; the client needs this knob for that (real deployments are https).
    const n = new TsNode({ name, env: { TS_DEBUG_USE_DERP_HTTP: '1' } });
    nodes.push(n);
    await n.start();
    await n.up(image.url, [`--auth-key=${key}`, ...extra]);
    const s = await n.waitFor((x) => x.BackendState === 'Running', `${name} running`);
    ips[name] = s.Self.TailscaleIPs[0];
    return n;
  }

  const peerNames = (s: TsStatus) =>
    Object.values(s.Peer ?? {})
      .map((p) => p.HostName)
      .sort();

  let alpha: TsNode;
  let bravo: TsNode;
  let charlie: TsNode;

  test.before(async () => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hse-policy-e2e-'));
    image = await startImage({});
    open = await startEchoServer();
    closed = await startEchoServer();
    for (const u of ['alice', 'bob', 'carol']) await hse('users', 'create', u);
    const r = await setPolicy(policy());
    if (r.code !== 0) throw new Error(`the test policy was refused: ${r.stderr}`);
    alpha = await join('alpha', 'alice');
    bravo = await join('bravo', 'bob');
    charlie = await join('charlie', 'carol');
  });

  test.after.always(async () => {
    for (const n of nodes) await n.destroy();
    await open?.close();
    await closed?.close();
    await image?.stop();
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  test.serial("alice reaches bob's device on the allowed port and not on another; bob cannot reach alice; carol sees and is seen by nobody", async (t) => {
    await alpha.waitFor((s) => peerNames(s).includes('bravo'), 'alpha to see bravo');
    await bravo.waitFor((s) => peerNames(s).includes('alpha'), 'bravo to see alpha (alpha may reach it)');
    t.true(await alpha.canConnect(ips.bravo, open.port), 'alpha → bravo on the allowed port');
    t.false(await alpha.canConnect(ips.bravo, closed.port), 'alpha → bravo on another port is dropped');
    t.false(await bravo.canConnect(ips.alpha, open.port), 'bravo → alpha: no rule lets bob in');
    t.deepEqual(peerNames(await alpha.status()), ['bravo'], "carol's device is not in alice's map");
    t.deepEqual(peerNames(await bravo.status()), ['alpha'], "carol's device is not in bob's map");
    t.deepEqual(peerNames(await charlie.status()), [], 'carol, in no rule, sees nobody');
    t.false(await charlie.canConnect(ips.bravo, open.port), 'and reaches nobody');
  });

  test.serial('a policy change takes effect on the running clients: a port opens, then closes again', async (t) => {
    const r = await setPolicy(policy(`{ "action": "accept", "src": ["alice@"], "dst": ["bob@:${closed.port}"] },`));
    t.is(r.code, 0, r.stderr);
    t.regex(r.stdout, /policy version \d+ is in force/);
    // The new filter reaches bravo within a second; a few tries cover a loaded machine.
    let opened = false;
    for (let i = 0; i < 5 && !opened; i++) opened = await alpha.canConnect(ips.bravo, closed.port, 4000);
    t.true(opened, 'the second port opened without restarting either client');
    t.is((await setPolicy(policy())).code, 0);
    let shut = false;
    for (let i = 0; i < 5 && !shut; i++) shut = !(await alpha.canConnect(ips.bravo, closed.port, 4000));
    t.true(shut, 'and closed again');
    t.true(await alpha.canConnect(ips.bravo, open.port), 'the first port stayed open throughout');
  });

  test.serial('refused policies keep the one in force and say where the problem is', async (t) => {
    const before = (await hse('policy', 'get')).stdout;
    const syntax = await setPolicy('{\n  "acls": [\n    { "action": "accept", "src": ["*"] "dst": ["*:*"] },\n  ],\n}\n');
    t.is(syntax.code, 1);
    t.regex(syntax.stderr, new RegExp(`${path.basename(syntax.file).replace(/\./g, '\\.')}:3:\\d+: `), 'the syntax error names line 3');
    const unknownGroup = await setPolicy(`{\n  "acls": [\n    { "action": "accept", "src": ["group:nobody"], "dst": ["*:*"] },\n  ],\n}\n`);
    t.is(unknownGroup.code, 1);
    t.regex(unknownGroup.stderr, /:3:\d+: .*group:nobody/);
    const failing = await setPolicy(policy('', `{ "src": "bob@", "accept": ["alice@:${open.port}"] },`));
    t.is(failing.code, 1);
    t.regex(failing.stderr, /:\d+:\d+: .*bob@/, 'the failing test is named with its position');
    t.is((await hse('policy', 'get')).stdout, before, 'the policy in force is unchanged');
    t.true(await alpha.canConnect(ips.bravo, open.port), 'and the clients still get it');
    const check = await hse('policy', 'check', syntax.file);
    t.is(check.code, 1, 'hse policy check refuses it too, changing nothing');
  });

  test.serial(
    'tags: a tagged key gives a node owned by its tag; --advertise-tags for a tag the user does not own is refused; tagging a machine moves its filter',
    async (t) => {
      // A rule on the tag: alice may reach tag:server on the open port.
      t.is((await setPolicy(policy(`{ "action": "accept", "src": ["alice@"], "dst": ["tag:server:${closed.port}"] },`))).code, 0);
      const key = JSON.parse((await hse('keys', 'create', '--user', 'alice', '--tags', 'tag:server', '--json')).stdout).key as string;
      const delta = new TsNode({ name: 'delta', env: { TS_DEBUG_USE_DERP_HTTP: '1' } });
      nodes.push(delta);
      await delta.start();
      await delta.up(image.url, [`--auth-key=${key}`]);
      const ds = await delta.waitFor((s) => s.BackendState === 'Running', 'delta running');
      ips.delta = ds.Self.TailscaleIPs[0];
      const listed = JSON.parse((await hse('nodes', 'list', '--json')).stdout) as { givenName: string; tags: string[] }[];
      t.deepEqual(listed.find((n) => n.givenName === 'delta')?.tags, ['tag:server'], 'owned by its tag');
      await alpha.waitFor((s) => peerNames(s).includes('delta'), 'alpha to see the tagged node');
      t.true(await alpha.canConnect(ips.delta, closed.port), 'alice reaches tag:server');

      // bob may not own tag:server: the client prints the refusal naming the tag.
      const bobKey = JSON.parse((await hse('keys', 'create', '--user', 'bob', '--json')).stdout).key as string;
      const echo = new TsNode({ name: 'echo', env: { TS_DEBUG_USE_DERP_HTTP: '1' } });
      nodes.push(echo);
      await echo.start();
      const refused = await echo
        .cli(
          [
            'up',
            `--login-server=${image.url}`,
            '--hostname=echo',
            '--accept-dns=false',
            `--auth-key=${bobKey}`,
            '--advertise-tags=tag:server',
            '--timeout=30s',
          ],
          60_000,
        )
        .then(
          (r) => `${r.stdout}${r.stderr}`,
          (e: { stdout?: string; stderr?: string }) => `${e.stdout ?? ''}${e.stderr ?? ''}`,
        );
      t.regex(refused, /tag:server/);
      t.regex(refused, /invalid or not permitted/);

      // An administrator tags bravo: the rule on tag:server now admits alice to bravo's second port.
      t.false(await alpha.canConnect(ips.bravo, closed.port, 4000), 'not before the tag');
      const tagged = await hse('nodes', 'tag', 'bravo', 'tag:server');
      t.is(tagged.code, 0, tagged.stderr);
      let reached = false;
      for (let i = 0; i < 5 && !reached; i++) reached = await alpha.canConnect(ips.bravo, closed.port, 4000);
      t.true(reached, "bravo's filter follows its new tag");
      const undefinedTag = await hse('nodes', 'tag', 'bravo', 'tag:nope');
      t.is(undefinedTag.code, 1);
      t.regex(undefinedTag.stderr, /tag:nope is not defined in the policy's tagOwners/);
    },
  );
}
