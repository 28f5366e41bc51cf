// The policy engine alone, at the scale of issue 17's benchmark: 100 groups, 300 rules (ACLs and grants), tags,
// subnet routers, SSH rules and tests, against N nodes where each node may reach about 50 others. Prints the time to
// check and compile the policy, the time to produce every node's view (filter, peers, SSH policy, CapMap, digest),
// the size of all filters as JSON, memory, and what a policy change and a node joining cost (recompile + every
// digest, and how many nodes' views changed).
//
//   node bench/policy-compile.ts [--n=2000,10000] [--seed=1] [--runs=3]
//
// The tailnet and policy are generated from the seed, so runs are comparable. Times are wall clock on this machine
// (the median of --runs); nothing here is asserted.
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import { type CompiledPolicy, compilePolicy, formatPolicyError, type TailnetSnapshot } from '../services/coordination/src/policy/index.ts';
import { parseArgs } from './lib/args.ts';
import { generate } from './lib/policy-gen.ts';

const args = parseArgs(process.argv.slice(2));
const sizes = args.ints('n', [2000, 10000]);
const seed = args.int('seed', 1);
const runs = args.int('runs', 3);

function median<T extends { ms: number }>(xs: T[]): T {
  return [...xs].sort((a, b) => a.ms - b.ms)[Math.floor(xs.length / 2)];
}

/** Wall time and CPU time (user + system of this process: what a busy shared machine distorts less). */
function time<T>(f: () => T): { ms: number; cpu: number; value: T } {
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  const value = f();
  const c = process.cpuUsage(c0);
  return { ms: performance.now() - t0, cpu: (c.user + c.system) / 1000, value };
}

const ms = (t: { ms: number; cpu: number }) => `${t.ms.toFixed(0)} ms (CPU ${t.cpu.toFixed(0)} ms)`;

function compile(text: string, snapshot: TailnetSnapshot): CompiledPolicy {
  const r = compilePolicy(text, snapshot, { strict: true });
  if (!r.ok) throw new Error(`generated policy refused:\n${r.errors.slice(0, 5).map(formatPolicyError).join('\n')}`);
  return r.policy;
}

/** Everything the map layer asks for each node. */
function allViews(p: CompiledPolicy): { peers: number; rules: number; digests: string[] } {
  let peers = 0;
  let rules = 0;
  const digests: string[] = [];
  for (const id of p.nodeIds) {
    rules += p.filterFor(id).length;
    peers += p.peersOf(id).length;
    p.sshPolicyFor(id);
    p.capMapFor(id);
    digests.push(p.digestOf(id));
  }
  return { peers, rules, digests };
}

/** What the map layer then spends turning every filter into JSON (not the engine's work; for scale). */
function filtersAsJson(p: CompiledPolicy): number {
  let bytes = 0;
  for (const id of p.nodeIds) bytes += JSON.stringify(p.filterFor(id)).length;
  return bytes;
}

/** A full, synchronous collection (run with --expose-gc; without it, memory figures are rougher). */
function fullGc(): void {
  (globalThis as { gc?: (o: object) => void }).gc?.({ type: 'major', execution: 'sync' });
}

/** Heap and typed-array memory a value holds: measured before it is made and while a global still refers to it. */
function heldBy(make: () => unknown): { bytes: number; mem: NodeJS.MemoryUsage } {
  const used = () => {
    const m = process.memoryUsage();
    return m.heapUsed + m.arrayBuffers;
  };
  const holder = globalThis as { kept?: unknown };
  fullGc();
  const before = used();
  holder.kept = make();
  fullGc();
  const mem = process.memoryUsage();
  const bytes = used() - before;
  holder.kept = undefined;
  return { bytes, mem };
}

const mib = (b: number) => `${(b / 1048576).toFixed(1)} MiB`;

console.log(
  `policy engine benchmark — node ${process.version}, seed ${seed}, median of ${runs} run(s), load average ${os.loadavg()[0].toFixed(1)} on ${os.availableParallelism()} cores`,
);
for (const n of sizes) {
  const { snapshot, policy } = generate(n, seed);
  const text = JSON.stringify(policy, null, 2);
  const compileT: { ms: number; cpu: number }[] = [];
  const viewT: { ms: number; cpu: number }[] = [];
  let p: CompiledPolicy | null = null;
  let views: ReturnType<typeof allViews> | null = null;
  for (let r = 0; r < runs; r++) {
    p = null;
    const c = time(() => compile(text, snapshot));
    compileT.push({ ms: c.ms, cpu: c.cpu });
    const v = time(() => allViews(c.value));
    viewT.push({ ms: v.ms, cpu: v.cpu });
    p = c.value;
    views = v.value;
  }
  const json = time(() => filtersAsJson(p!));
  const base = { digests: views!.digests, peers: views!.peers, rules: views!.rules };
  p = null;
  views = null;
  const held = heldBy(() => {
    const q = compile(text, snapshot);
    allViews(q);
    return q;
  });

  // A policy change: one rule's ports change; recompile and compare every node's digest.
  const changed = structuredClone(policy) as { acls: { dst: string[] }[] };
  changed.acls[100].dst = [`${changed.acls[100].dst[0].split(':').slice(0, 2).join(':')}:9999`];
  const change = time(() => allViews(compile(JSON.stringify(changed), snapshot)));
  const affected = change.value.digests.filter((d, i) => d !== base.digests[i]).length;

  // A node joins: one more device of user 1.
  const joined = {
    ...snapshot,
    nodes: [...snapshot.nodes, { id: 1e9, ipv4: '100.127.255.254', ipv6: 'fd7a:115c:a1e0::3f:fffe', userId: 1, tags: [], approvedRoutes: [] }],
  };
  const join = time(() => allViews(compile(text, joined)));
  const joinAffected = join.value.digests.slice(0, n).filter((d, i) => d !== base.digests[i]).length;

  console.log(
    `\nN = ${n} nodes, ${snapshot.users.length} users, ${(policy.acls as unknown[]).length} acls + ${(policy.grants as unknown[]).length} grants, 100 groups`,
  );
  console.log(`  check + compile (parse, validate, tests, compile)   ${ms(median(compileT))}`);
  console.log(`  every node's view (filter, peers, ssh, caps, digest) ${ms(median(viewT))}`);
  console.log(`  peers per node (mean)                              ${(base.peers / n).toFixed(1)}`);
  console.log(`  filter rules per node (mean)                       ${(base.rules / n).toFixed(1)}`);
  console.log(`  all filters as JSON (map layer's work)             ${mib(json.value)}, ${(json.value / n).toFixed(0)} B per node, ${ms(json)}`);
  console.log(`  heap held by one compiled policy with every view   ${mib(held.bytes)} (heap ${mib(held.mem.heapUsed)}, RSS ${mib(held.mem.rss)})`);
  console.log(`  policy change: recompile + every view              ${ms(change)}, ${affected} of ${n} views changed`);
  console.log(`  node joins: recompile + every view                 ${ms(join)}, ${joinAffected} of ${n} views changed`);
}
