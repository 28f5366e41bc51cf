// The long fault and abuse runs behind docs/reliability.md, one command each (npm test runs small versions of the
// same scenarios in test/reliability/*.test.ts):
//
//   node test/reliability/run-faults.ts crash       [--nodes 300] [--rounds 1]
//   node test/reliability/run-faults.ts restart     [--nodes 300]
//   node test/reliability/run-faults.ts redis       [--nodes 100] [--outage 75]
//   node test/reliability/run-faults.ts durability  [--iterations 200]
//   node test/reliability/run-faults.ts floods      [--rounds 2] [--heap-cap <MiB>]
//   node test/reliability/run-faults.ts fuzz        [--batches 10]
//
// (node = the pinned one: node_modules/.bin/node.) Each prints a Markdown table on stdout and keeps the raw numbers
// in test-artifacts/reliability/<scenario>.json. Everything runs on loopback with its own temp data dir, pm2 home
// and Redis, and cleans up after itself. The official Tailscale client is used when installed (.ci/run does it).
import { parseArgs } from 'node:util';
import { runCrash } from './scenarios/crash.ts';
import { runDurability } from './scenarios/durability.ts';
import { runFloods } from './scenarios/floods.ts';
import { runFuzzSoak } from './scenarios/fuzz.ts';
import { runRedisOutage } from './scenarios/redis-outage.ts';
import { runRestart } from './scenarios/restart.ts';

const { positionals, values } = parseArgs({
  allowPositionals: true,
  options: {
    nodes: { type: 'string' },
    rounds: { type: 'string' },
    outage: { type: 'string', default: '75' },
    iterations: { type: 'string', default: '200' },
    batches: { type: 'string', default: '10' },
    'heap-cap': { type: 'string' },
  },
});

const scenario = positionals[0] ?? '';
const num = (v: string | undefined, d: number) => (v === undefined ? d : Number(v));
const runs: Record<string, () => Promise<string>> = {
  crash: () => runCrash({ nodes: num(values.nodes, 300), rounds: num(values.rounds, 1) }),
  restart: () => runRestart({ nodes: num(values.nodes, 300) }),
  redis: () => runRedisOutage({ nodes: num(values.nodes, 100), outageSeconds: num(values.outage, 75) }),
  durability: () => runDurability({ iterations: num(values.iterations, 200) }),
  floods: () => runFloods({ rounds: num(values.rounds, 2), heapCapMiB: values['heap-cap'] === undefined ? undefined : Number(values['heap-cap']) }),
  fuzz: () => runFuzzSoak({ batches: num(values.batches, 10) }),
};

if (!runs[scenario]) {
  process.stderr.write(`usage: node test/reliability/run-faults.ts <${Object.keys(runs).join('|')}> [options]; see the comment at the top of this file\n`);
  process.exit(2);
}
try {
  process.stdout.write(`${await runs[scenario]()}\n`);
  process.exit(0);
} catch (e) {
  process.stderr.write(`run-faults ${scenario} failed: ${(e as Error).stack ?? e}\n`);
  process.exit(1);
}
