// Two whole images on one Redis (advanced/ha.md): instance B started with A's Noise key, relays meshed. Official
// Tailscale clients log in through different instances and see each other join, change and leave; an operator's
// change made on B — with the CLI on B's admin socket, in B's console, a new policy — reaches the map streams A
// holds. A map stream of our own test client on A records when each change arrived, so the test log shows how long
// a change took to cross from one instance to the other (the figures in advanced/ha.md), measured from the start of
// the operator's request: the API the CLI calls (shared/admin-client.ts, so a Node start-up is not counted), the
// console's form post. And a node that reconnected to B while A still held its old stream stays online when A's
// stream finally closes (state/presence.ts).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import test from 'ava';
import { AdminClient } from '../../shared/admin-client.ts';
import { parseConfig } from '../../shared/config.ts';
import { adminSocket } from '../../shared/paths.ts';
import type { MapResponse } from '../../services/coordination/src/tailcfg/tailcfg.ts';
import { Client, PASSWORD } from '../harness/console-client.ts';
import { ControlClient, type MapStream, serverKey } from '../harness/control-client.ts';
import { hseOut } from '../harness/hse-cli.ts';
import type { Image } from '../harness/image.ts';
import { startInstances } from '../harness/instances.ts';
import { startRedis, type TestRedis } from '../harness/redis.ts';
import { haveTailscale, TsNode, type TsStatus } from '../harness/tailscale.ts';

if (!haveTailscale()) {
  test('official Tailscale client is installed', (t) => t.fail('tailscaled/tailscale not found; run .ci/run or go install them (see README)'));
} else {
  let redis: TestRedis;
  let A: Image;
  let B: Image;
  let key = '';
  let watcher: ControlClient;
  let onA: MapStream;
  const nodes: TsNode[] = [];

  /** The real CLI, talking to one instance's admin socket. */
  const hse = (img: Image, ...args: string[]): Promise<string> => hseOut(img, args);

  const running = (s: TsStatus) => s.BackendState === 'Running';
  const peer = (n: TsNode, s: TsStatus, host: string) => n.peers(s).find((p) => p.HostName === host);

  /** Runs `change`, then waits until A's test stream gets a message matching `pred`; returns the delay in ms. */
  async function crossing(what: string, change: () => Promise<unknown>, pred: (m: MapResponse) => boolean): Promise<number> {
    const from = onA.messages.length;
    const t0 = Date.now();
    await change();
    const { at } = await onA.waitForArrival(pred, what, 30_000, from);
    return at - t0;
  }

  test.before(async () => {
    redis = await startRedis();
    [A, B] = await startInstances(2, { store: { HSE_REDIS_URL: redis.url }, env: { HSE_CONSOLE_PASSWORD: PASSWORD } });
    await A.procs.relay!.waitFor(/mesh link up/, 30_000);
    await B.procs.relay!.waitFor(/mesh link up/, 30_000);
    await hse(B, 'users', 'create', 'ha');
    key = (JSON.parse(await hse(A, 'keys', 'create', '--user', 'ha', '--reusable', '--json')) as { key: string }).key;
    // Our own client's stream on A: it sees every peer (no policy yet) and records when each message arrived.
    watcher = await ControlClient.connect(A.port, await serverKey(A.url));
    const reg = await watcher.register({ Auth: { AuthKey: key }, Hostinfo: { Hostname: 'watcher', OS: 'linux' } });
    if (!reg.MachineAuthorized) throw new Error(`watcher not authorised: ${JSON.stringify(reg)}`);
    onA = watcher.stream({ Hostinfo: { Hostname: 'watcher', OS: 'linux' } });
    await onA.waitFor((m) => m.Node !== undefined, 'the full map');
  });

  test.after.always(async () => {
    watcher?.close();
    for (const n of nodes) await n.destroy();
    await B?.stop();
    await A?.stop();
    await redis?.stop();
  });

  test.serial('a client on instance A sees a client on instance B join, change and leave', async (t) => {
    for (const name of ['on-a', 'on-b']) {
      const n = new TsNode({ name, env: { TS_DEBUG_USE_DERP_HTTP: '1' } });
      nodes.push(n);
      await n.start();
    }
    const [ca, cb] = nodes;
    await ca.up(A.url, [`--auth-key=${key}`]);
    await cb.up(B.url, [`--auth-key=${key}`]);
    const joined = await ca.waitFor((s) => running(s) && peer(ca, s, 'on-b')?.Online === true, 'on-a to see on-b join (online)');
    const b = peer(ca, joined, 'on-b')!;
    t.true(b.TailscaleIPs.length > 0, 'on-b has its addresses at on-a');

    // A change the client makes itself (its Hostinfo), registered on B.
    await cb.cli(['set', '--hostname=on-b-renamed']);
    await ca.waitFor((s) => peer(ca, s, 'on-b-renamed') !== undefined, 'on-a to see on-b change its host name');

    // Leaving: the client disconnects from B; A's client sees it offline.
    await cb.cli(['down']);
    const left = await ca.waitFor((s) => peer(ca, s, 'on-b-renamed')?.Online === false, 'on-a to see on-b leave (offline)');
    t.deepEqual(peer(ca, left, 'on-b-renamed')!.TailscaleIPs, b.TailscaleIPs, 'the node keeps its addresses while offline');
    await cb.cli(['up', `--login-server=${B.url}`, '--hostname=on-b-renamed', '--accept-dns=false', '--accept-routes=false']);
    await ca.waitFor((s) => peer(ca, s, 'on-b-renamed')?.Online === true, 'on-a to see on-b come back');
  });

  test.serial("an operator's change on instance B (CLI, console, policy) reaches instance A's streams", async (t) => {
    const [ca] = nodes;
    const api = new AdminClient(adminSocket(parseConfig(B.env)));
    const cli = { actor: 'cli', ip: '' };
    const id = (JSON.parse(await hse(B, 'nodes', 'list', '--json')) as { id: number; givenName: string }[]).find((n) => n.givenName.startsWith('on-b'))!.id;

    // The CLI on B renames the machine: A's streams get the peer with its new name.
    const renamed = await crossing(
      'the renamed peer',
      () => api.renameNode(cli, id, 'bravo'),
      (m) => (m.PeersChanged ?? []).some((p) => p.ID === id && p.Name.startsWith('bravo.')),
    );
    await ca.waitFor((s) => ca.peers(s).some((p) => p.DNSName.startsWith('bravo.')), 'on-a to see the new MagicDNS name');

    // B's console saves DNS settings: A's streams get the new DNSConfig.
    const admin = new Client(B.url);
    t.is((await admin.signIn('admin', PASSWORD)).status, 303, 'signed in to B’s console');
    const dns = await crossing(
      'the new DNS settings',
      async () => {
        const r = await admin.post('/console/dns', { magicDNS: '1', nameservers: '9.9.9.9', splitDNS: '', searchDomains: '', extraRecords: '' });
        if (r.status !== 303) throw new Error(`DNS form answered ${r.status}: ${r.body.slice(0, 500)}`);
      },
      (m) => JSON.stringify(m.DNSConfig ?? null).includes('9.9.9.9'),
    );

    // A policy saved on B: A's streams get the new packet filter.
    const policy = await crossing(
      'the new packet filter',
      () => api.setPolicy(cli, '{ "acls": [ { "action": "accept", "src": ["*"], "dst": ["*:2222"] } ] }\n'),
      (m) => JSON.stringify(m.PacketFilter ?? null).includes('2222'),
    );
    // And the real CLI on B, once more: A's streams follow.
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'hse-ha-policy-')), 'policy.hujson');
    fs.writeFileSync(file, '{ "acls": [ { "action": "accept", "src": ["*"], "dst": ["*:3333"] } ] }\n');
    await crossing(
      'the packet filter of the CLI',
      () => hse(B, 'policy', 'set', file),
      (m) => JSON.stringify(m.PacketFilter ?? null).includes('3333'),
    );
    fs.rmSync(path.dirname(file), { recursive: true, force: true });
    t.log(`change made on B → message on A's stream: rename ${renamed} ms, DNS ${dns} ms, policy ${policy} ms`);
    t.pass();
  });

  test.serial('a node that moved to instance B before A saw its old stream close stays online when that stream ends', async (t) => {
    const api = new AdminClient(adminSocket(parseConfig(B.env)));
    const cli = { actor: 'cli', ip: '' };
    const hostinfo = { Hostinfo: { Hostname: 'mover', OS: 'linux' } };
    const onOld = await ControlClient.connect(A.port, await serverKey(A.url));
    const reg = await onOld.register({ Auth: { AuthKey: key }, ...hostinfo });
    t.true(reg.MachineAuthorized);
    const first = onOld.stream(hostinfo);
    const id = (await first.waitFor((m) => m.Node !== undefined, 'its full map on A')).Node!.ID;
    await onA.waitFor((m) => [...(m.PeersChanged ?? []), ...(m.Peers ?? [])].some((p) => p.ID === id), 'the watcher to see the mover');
    // The same machine and node key, a second connection, to B (the load balancer sent its reconnect there).
    const onNew = await ControlClient.connect(B.port, await serverKey(B.url), onOld.machine);
    onNew.nodeKey = onOld.nodeKey;
    const second = onNew.stream(hostinfo);
    await second.waitFor((m) => m.Node !== undefined, 'its full map on B');

    const from = onA.messages.length;
    onOld.close();
    await A.procs.coordination!.waitFor(/stream closed here; the node is connected to another instance/, 15_000);
    // A change after A's decision, to know when everything A could have said has arrived.
    await api.renameNode(cli, id, 'mover-moved');
    await onA.waitForArrival((m) => (m.PeersChanged ?? []).some((p) => p.ID === id && p.Name.startsWith('mover-moved.')), 'the rename', 15_000, from);
    const said = onA.messages.slice(from);
    t.false(
      said.some((m) => (m.PeersChangedPatch ?? []).some((p) => p.NodeID === id && p.Online === false)),
      'no "offline" for the mover',
    );
    t.false(
      said.some((m) => (m.PeersChanged ?? []).some((p) => p.ID === id && p.Online === false)),
      'and it is shown online in its renamed entry',
    );
    onNew.close();
  });
}
