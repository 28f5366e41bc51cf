// A quick check that the load client speaks the protocol: against our image and against headscale, a few nodes
// register with a pre-auth key, open zstd map streams, see each other, then one logs out and the others see it go.
//
//   node bench/load-client/smoke.ts [--nodes=3] [--only=hse|headscale]
import { parseArgs } from '../lib/args.ts';
import { startHeadscale } from '../lib/headscale.ts';
import { startHse } from '../lib/hse.ts';
import { ControlNode } from './control-node.ts';
import { fetchServerKey } from './dial.ts';
import type { MapMessage } from './map-frames.ts';

async function check(name: string, url: string, port: number, authKey: string, ephKey: string, n: number): Promise<void> {
  const serverKey = await fetchServerKey(url);
  const nodes = Array.from({ length: n }, (_, i) => new ControlNode(`smoke-${i}`));
  const seen = nodes.map(() => new Set<string>());
  const removed = nodes.map(() => new Set<number>());
  const onMsg = (i: number) => (m: MapMessage) => {
    for (const p of [...(m.Peers ?? []), ...(m.PeersChanged ?? [])]) seen[i].add(p.Key);
    for (const id of m.PeersRemoved ?? []) removed[i].add(id);
  };
  for (const [i, node] of nodes.entries()) {
    await node.connect({ host: '127.0.0.1', port, serverKey });
    await node.register(i === n - 1 ? ephKey : authKey);
    await node.openMap(onMsg(i));
  }
  const deadline = Date.now() + 15_000;
  const allSeen = () => nodes.every((_, i) => nodes.every((o, j) => i === j || seen[i].has(o.nodeKey)));
  while (!allSeen() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  if (!allSeen()) throw new Error(`${name}: not every node saw every other within 15 s`);
  const leaver = nodes[n - 1];
  const res = await leaver.logout();
  const gone = () => nodes.slice(0, -1).every((_, i) => removed[i].has(leaver.id));
  while (!gone() && Date.now() < deadline + 15_000) await new Promise((r) => setTimeout(r, 50));
  if (!gone()) throw new Error(`${name}: the ephemeral node's logout (${JSON.stringify(res)}) did not reach every peer as PeersRemoved`);
  console.log(
    `${name}: ${n} nodes registered, got full maps, saw each other; logout removed node ${leaver.id} everywhere. early payload: ${JSON.stringify(nodes[0].early)}`,
  );
  for (const node of nodes) node.close();
}

const args = parseArgs(process.argv.slice(2));
const n = args.int('nodes', 3);
const only = args.str('only', '');
if (only !== 'headscale') {
  const hse = await startHse({ processes: ['redis', 'coordination', 'router'] });
  try {
    await check('hse', hse.url, hse.port, await hse.preAuthKey('bench'), await hse.preAuthKey('bench', { ephemeral: true }), n);
  } finally {
    await hse.stop();
  }
}
if (only !== 'hse') {
  const hs = await startHeadscale();
  try {
    await check('headscale', hs.url, hs.port, await hs.preAuthKey('bench'), await hs.preAuthKey('bench', { ephemeral: true }), n);
  } catch (e) {
    console.error(hs.server.output().slice(-5000));
    throw e;
  } finally {
    await hs.stop();
  }
}
