// One registered node must not be able to break every other node's network map. The official client decodes maps
// into typed Go structs, so a peer's Hostinfo field of the wrong JSON type (OS: 5), an endpoint that is not "ip:port"
// or a fractional Node.Cap made it reject every MapResponse ("PollNetMap: json: cannot unmarshal number into Go
// struct field Node.Peers.Hostinfo.OS of type string") — found by fuzz-coordination.test.ts. Shown here with the
// official client: a node sends such values by register and by map request, and one record is planted straight into
// Redis (stored before the server cleaned them); the official client keeps receiving maps and sees a node that joins
// afterwards.
import path from 'node:path';
import test from 'ava';
import { AdminClient } from '../../shared/admin-client.ts';
import { K } from '../../shared/redis-keys.ts';
import { serverKey } from '../harness/control-client.ts';
import { CAP_VERSION } from '../harness/noise-client.ts';
import { startImage, type Image } from '../harness/image.ts';
import { haveTailscale, TsNode } from '../harness/tailscale.ts';
import { SimNode } from './lib/sim-node.ts';

const who = { actor: 'reliability-test', ip: '' };
const BAD_HOSTINFO = {
  Hostname: 'bad-one',
  OS: 5,
  OSVersion: { no: 'object' },
  Services: 'not a list',
  RoutableIPs: ['not-a-prefix'],
  NetInfo: { PreferredDERP: 'nine hundred', WorkingUDP: 'yes', DERPLatency: { '1-v4': 'fast' } },
  Location: { Latitude: 'north' },
  RequestTags: [1, 2],
};
const BAD_ENDPOINTS = ['not-an-endpoint', '1.2.3.4:99999', '[::1]', 42];

if (!haveTailscale()) {
  test('official Tailscale client is installed', (t) => t.fail('tailscaled/tailscale not found; run .ci/run or go install them (see README)'));
} else {
  let image: Image;
  let victim: TsNode;
  const sims: SimNode[] = [];

  test.before(async () => {
    image = await startImage({});
    victim = new TsNode({ name: 'victim', env: { TS_DEBUG_USE_DERP_HTTP: '1' } });
    await victim.start();
  });
  test.after.always(async () => {
    for (const s of sims) await s.stop();
    await victim?.destroy();
    await image?.stop();
  });

  test('mistyped Hostinfo and endpoints from one node never stop the maps of the others', async (t) => {
    const admin = new AdminClient(path.join(image.runDir, 'coordination-admin.sock'));
    await admin.createUser(who, 'u');
    const key = (await admin.createPreAuthKey(who, { user: 'u', reusable: true, expiresInSeconds: 3600 })).key;
    await victim.up(image.url, [`--auth-key=${key}`]);
    await victim.waitFor((s) => s.BackendState === 'Running', 'victim running');
    const pub = await serverKey(image.url);
    const sim = (name: string) => {
      const n = new SimNode({ port: image.port, serverPublic: pub, hostname: name });
      sims.push(n);
      return n;
    };

    // By register and by map request (lite update), then kept on a stream so peers get its patches too.
    const bad = sim('bad-one');
    const r = await bad.post('/machine/register', { Version: CAP_VERSION, NodeKey: bad.nodeKey, Hostinfo: BAD_HOSTINFO, Auth: { AuthKey: key } });
    t.is(r.status, 200);
    t.is(
      (
        await bad.post('/machine/map', {
          Version: CAP_VERSION,
          NodeKey: bad.nodeKey,
          Stream: false,
          OmitPeers: true,
          Hostinfo: BAD_HOSTINFO,
          Endpoints: BAD_ENDPOINTS,
        })
      ).status,
      200,
    );
    // Node.Cap is a Go int: a fractional or huge version is refused rather than passed on.
    for (const Version of [142.5, 1e21]) t.is((await bad.post('/machine/map', { Version, NodeKey: bad.nodeKey, Stream: false, OmitPeers: true })).status, 400);
    bad.start();

    // A record written before the server cleaned what it stores.
    const planted = sim('planted');
    await planted.register(key);
    const redis = image.redis!.client();
    const id = await redis.hget(K.nodeByNodeKey, planted.nodeKey);
    const rec = JSON.parse((await redis.hget(K.nodes, id!))!) as Record<string, unknown>;
    await redis.hset(K.nodes, id!, JSON.stringify({ ...rec, hostinfo: { ...BAD_HOSTINFO, Hostname: 'planted' }, endpoints: BAD_ENDPOINTS, capVersion: 142.5 }));
    // The running service holds its own copy; a rename makes it read and publish the record again.
    await admin.renameNode(who, Number(id), 'planted-renamed');
    planted.start();

    const later = sim('later-one');
    await later.register(key);
    later.start();
    const s = await victim.waitFor(
      (x) => ['bad-one', 'planted', 'later-one'].every((h) => victim.peers(x).some((p) => p.HostName === h && p.Online)),
      'the victim to see all three online',
      60_000,
    );
    t.true(victim.peers(s).some((p) => p.DNSName.startsWith('planted-renamed.')));
    t.notRegex(victim.output(), /cannot unmarshal/);

    // The cleaning keeps what the official client really sends.
    const victimId = await redis.hget(K.nodeByMachineKey, (await admin.listNodes(who)).find((n) => n.hostname === 'victim')!.machineKey);
    const stored = JSON.parse((await redis.hget(K.nodes, victimId!))!).hostinfo as Record<string, unknown> & { NetInfo?: Record<string, unknown> };
    t.is(stored.OS, 'linux');
    t.regex(String(stored.IPNVersion), /^1\.102\.3/);
    t.is(stored.GoArch, process.arch === 'x64' ? 'amd64' : stored.GoArch);
    t.is(stored.Userspace, true);
    t.is(typeof stored.NetInfo?.PreferredDERP, 'number');
  });
}
