// Control plane under a tailnet policy: hse vs headscale, in one run, on the same policy file (issue 17's benchmark).
// The policy is bench/lib/policy-gen.ts's — 100 groups, ~300 rules, tags, SSH rules, tests — cut to what both
// servers accept (bench/lib/policy-plan.ts says what that is); 70% of the nodes are users' devices (two per user),
// 30% tagged servers, each user's device may reach about 50 others. For each N, each server fresh:
//   setup       users (N×0.35) and a first policy through the server's API (what its CLI calls): only the groups and
//               tagOwners (--register-under=whole: the whole policy but its tests, which fail with no devices); then a
//               reusable pre-auth key per user and per set of tags (tagged keys: the node belongs to its tags);
//   register    N nodes, each with its user's or its tags' key (64 at a time). Under the whole policy headscale
//               registered 950 of 2,000 nodes in 900 s (results/), so by default the nodes register under the first,
//               rule-less version on both servers and the rules arrive in one piece next;
//   compile     the whole policy set with N nodes registered and no stream open: the time from the request
//               until the policy is in force (hse: until the coordination logs "policy in force", with the compile's
//               own ms; headscale: until its API answers — it compiles and reloads before answering, and logs no
//               compile time of its own);
//   full maps   all N open their map streams at once: time until every node has its first full map; its size;
//               whether its peers are the ones the policy gives (checked against hse's engine, for both servers);
//   join        a new device of an existing user (ephemeral key) registers and opens its stream: latency until each
//               stream that may see it lists it (p50/p99 over every such stream of every event); then it logs out
//               (leave), latency until each has it in PeersRemoved;
//   change 1    one rule's ports change (acls[100]): until each stream whose view changed has a new filter;
//   change 2    a rule is added (autogroup:member -> tag:t5:443): until each stream whose view changed (every user's
//               device, and tag:t5's nodes) has its delta — measured from the request to the server's API;
//   resources   server RSS (peak, settled with N streams open), CPU seconds, from /proc.
// Ours: coordination + redis-server (+ router). Through the router when the open-file limit lets it hold N streams
// (two sockets each); above that, straight to the coordination's socket (said in the output). Headscale: one
// process, SQLite, policy in its database (policy.mode: database), reached directly. Every phase has a time limit;
// what did not finish within it is reported as such.
//
//   node bench/control-policy.ts                         N = 2000, 10000
//   options: --n=2000,10000  --only=hse|headscale  --events=K (joins, default 5)  --limit=S (seconds a phase may
//            take, default 900)  --seed=1  --concurrency=64  --register-under=tags|whole
//            --cpu-prof=DIR (hse's processes write CPU profiles there when they stop: node --cpu-prof)
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fetchServerKey } from './load-client/dial.ts';
import { isViewDelta, PolicyFleet, type Watched } from './load-client/policy-fleet.ts';
import { parseArgs } from './lib/args.ts';
import { startHeadscale } from './lib/headscale.ts';
import { startHse } from './lib/hse.ts';
import { HEADSCALE, missingPeers, PEERS } from './lib/peers.ts';
import { changedPolicies, changedViews, compileOrThrow, expectedPeers, joinAudience, makePlan, type PolicyPlan } from './lib/policy-plan.ts';
import { fmtMiB, fmtMs, fmtNum, header, median, percentile, ratio, table } from './lib/report.ts';
import { PeakSampler, sampleGroup } from './lib/sampling.ts';

type ServerName = 'hse' | 'headscale';

const args = parseArgs(process.argv.slice(2));
const sizes = args.ints('n', [2000, 10000]);
const events = args.int('events', 5);
const limitMs = args.int('limit', 900) * 1000;
const seed = args.int('seed', 1);
const concurrency = args.int('concurrency', 64);
const only = args.str('only', '');
const cpuProf = args.str('cpu-prof', '');
const registerUnder = args.str('register-under', 'tags') as 'tags' | 'whole';
if (registerUnder !== 'tags' && registerUnder !== 'whole') throw new Error('--register-under: "tags" or "whole"');
const log = (s: string) => process.stderr.write(`[control-policy ${new Date().toISOString().slice(11, 19)}] ${s}\n`);

let servers: ServerName[] = only === 'hse' ? ['hse'] : only === 'headscale' ? ['headscale'] : ['hse', 'headscale'];
const notMeasured = servers.includes('headscale') ? missingPeers([PEERS.headscale]) : [];
if (notMeasured.length > 0) {
  servers = servers.filter((s) => s !== 'headscale');
  for (const m of notMeasured) log(`${m}; ${servers.length > 0 ? 'measuring ours alone' : 'nothing to measure'}`);
  if (servers.length === 0) process.exit(2);
}

/** The open-file limit this process (and the servers it starts) runs under. */
function openFileLimit(): number {
  const m = /^Max open files\s+(\d+)/m.exec(fs.readFileSync('/proc/self/limits', 'utf8'));
  return m ? Number(m[1]) : 1024;
}

interface KeySpec {
  user: string | null;
  tags: string[];
  ephemeral?: boolean;
}

/** What the benchmark needs of a server: its API for users, keys and the policy, and where nodes connect. */
interface PolicyServer {
  name: ServerName;
  how: string;
  target: { host: string; port: number; socketPath?: string };
  serverKey(): Promise<Buffer>;
  pids(): Record<string, number>;
  createUser(name: string): Promise<void>;
  /** Resolves once the server checks policies against every user created so far. */
  usersSettled(text: string): Promise<void>;
  key(k: KeySpec): Promise<string>;
  /** Sets the policy; resolves when it is in force, with the server's own compile time when it reports one. */
  setPolicy(text: string): Promise<{ ms: number; compileMs: number }>;
  logs(): string;
  stop(): Promise<void>;
}

const who = { actor: 'bench', ip: '' };

function getOverSocket(socketPath: string, p: string): Promise<string> {
  return new Promise((resolve, reject) => {
    http
      .get({ socketPath, path: p }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
      })
      .on('error', reject);
  });
}

async function startHseServer(n: number): Promise<PolicyServer> {
  // Through the router it holds two sockets per stream; leave room for everything else.
  const viaRouter = 2 * (n + 64) + 500 < openFileLimit();
  const profDir = cpuProf ? path.resolve(cpuProf) : '';
  const h = await startHse({
    processes: viaRouter ? ['redis', 'coordination', 'router'] : ['redis', 'coordination'],
    env: profDir ? { NODE_OPTIONS: `--cpu-prof --cpu-prof-dir=${profDir}` } : {},
  });
  const admin = h.admin;
  // The compile times the coordination logs with each policy it puts in force.
  const inForce: { at: number; ms: number }[] = [];
  let buf = '';
  h.servers.coordination!.proc.stdout!.on('data', (d: Buffer) => {
    buf += d.toString();
    const lines = buf.split('\n');
    buf = lines.pop() ?? '';
    for (const l of lines) {
      const m = /policy in force .* ms=(\d+)/.exec(l);
      if (m) inForce.push({ at: performance.now(), ms: Number(m[1]) });
    }
  });
  const socketPath = h.socket('coordination');
  return {
    name: 'hse',
    how: viaRouter ? 'through the router' : `straight to the coordination socket (the router needs 2 sockets per stream; open-file limit ${openFileLimit()})`,
    target: viaRouter ? { host: '127.0.0.1', port: h.port } : { host: '127.0.0.1', port: h.port, socketPath },
    async serverKey() {
      if (viaRouter) return fetchServerKey(h.url);
      const j = JSON.parse(await getOverSocket(socketPath, '/key?v=142')) as { publicKey: string };
      return Buffer.from(j.publicKey.replace(/^mkey:/, ''), 'hex');
    },
    pids: () => h.pids(),
    async createUser(name) {
      await admin.createUser(who, name);
    },
    async usersSettled(text) {
      // The coordination learns of new users through Redis pub/sub a moment after the API created them, and checks a
      // policy against the users it knows: wait until it knows them all, or the first set is refused.
      const deadline = performance.now() + 60_000;
      while ((await admin.checkPolicy(who, text)).errors.length > 0 && performance.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    },
    async key(k) {
      const r = await admin.createPreAuthKey(who, {
        user: k.user ?? 'u0',
        reusable: true,
        ephemeral: k.ephemeral ?? false,
        tags: k.tags,
        expiresInSeconds: 86_400,
      });
      return r.key;
    },
    async setPolicy(text) {
      const seen = inForce.length;
      const t0 = performance.now();
      try {
        await admin.setPolicy(who, text);
      } catch (e) {
        throw new Error(`${(e as Error).message} ${JSON.stringify((e as { details?: unknown }).details ?? '').slice(0, 600)}`);
      }
      const deadline = performance.now() + 60_000;
      while (inForce.length === seen && performance.now() < deadline) await new Promise((r) => setTimeout(r, 2));
      const last = inForce[inForce.length - 1];
      if (inForce.length === seen) throw new Error('the coordination never logged the new policy in force');
      return { ms: last.at - t0, compileMs: last.ms };
    },
    logs: () => h.logs(),
    stop: () => h.stop(),
  };
}

async function startHeadscaleServer(): Promise<PolicyServer> {
  const h = await startHeadscale({ policyMode: 'database' });
  const apiKey = (await h.cli('apikeys', 'create', '-e', '24h')).trim().split('\n').pop()!.trim();
  const api = async <T>(method: string, p: string, body?: unknown): Promise<T> => {
    const r = await fetch(`${h.url}/api/v1${p}`, {
      method,
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await r.text();
    if (r.status !== 200) throw new Error(`headscale ${method} /api/v1${p} answered ${r.status}: ${text.slice(0, 500)}`);
    return JSON.parse(text) as T;
  };
  const userIds = new Map<string, string>();
  return {
    name: 'headscale',
    how: 'directly (one process, SQLite, policy in its database)',
    target: { host: '127.0.0.1', port: h.port },
    serverKey: () => fetchServerKey(h.url),
    pids: () => h.pids(),
    async usersSettled() {},
    async createUser(name) {
      const r = await api<{ user: { id: string } }>('POST', '/user', { name });
      userIds.set(name, String(r.user.id));
    },
    async key(k) {
      const body: Record<string, unknown> = {
        reusable: true,
        ephemeral: k.ephemeral ?? false,
        expiration: new Date(Date.now() + 86_400_000).toISOString(),
        aclTags: k.tags,
      };
      // A tagged key belongs to no user: the node it registers is owned by its tags.
      if (k.user) body.user = userIds.get(k.user);
      const r = await api<{ preAuthKey: { key: string } }>('POST', '/preauthkey', body);
      return r.preAuthKey.key;
    },
    async setPolicy(text) {
      const t0 = performance.now();
      await api('PUT', '/policy', { policy: text });
      return { ms: performance.now() - t0, compileMs: NaN };
    },
    logs: () => h.server.output(),
    stop: () => h.stop(),
  };
}

async function inParallel<T>(items: T[], limit: number, fn: (x: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, async () => {
      while (next < items.length) await fn(items[next++]);
    }),
  );
}

/** A policy change as watched, with the API's time and the CPU seconds the server and the load client spent on it. */
type Change = Watched & { audience: number; setMs: number; serverCpu: number; clientCpu: number };

interface Run {
  server: ServerName;
  n: number;
  how: string;
  load: number;
  stage: string;
  registerMs: number;
  registered: number;
  setMs: number;
  compileMs: number;
  fullMissing: number;
  fullAllMs: number;
  fullP50Ms: number;
  mapsMismatched: number;
  mismatchSamples: string[];
  peersMean: number;
  wireP50: number;
  wireMax: number;
  jsonP50: number;
  /** From opening every stream until none got anything for 2 s, and the messages each got until then. */
  quietMs: number;
  messagesPerStream: number;
  join: Watched[];
  leave: Watched[];
  joinAudience: number;
  change1?: Change;
  change2?: Change;
  peakRssKiB: number;
  settledRssKiB: number;
  cpuFull: number;
  cpuTotal: number;
  clientCpuFull: number;
  streamsEnded: number;
  notes: string[];
}

async function runOne(name: ServerName, plan: PolicyPlan, expected: Int32Array[]): Promise<Run> {
  const n = plan.n;
  const run: Run = {
    server: name,
    n,
    how: '',
    load: os.loadavg()[0],
    stage: 'start',
    registerMs: NaN,
    registered: 0,
    setMs: NaN,
    compileMs: NaN,
    fullMissing: n,
    fullAllMs: NaN,
    fullP50Ms: NaN,
    mapsMismatched: NaN,
    mismatchSamples: [],
    peersMean: NaN,
    wireP50: NaN,
    wireMax: NaN,
    jsonP50: NaN,
    quietMs: NaN,
    messagesPerStream: NaN,
    join: [],
    leave: [],
    joinAudience: 0,
    peakRssKiB: NaN,
    settledRssKiB: NaN,
    cpuFull: NaN,
    cpuTotal: NaN,
    clientCpuFull: NaN,
    streamsEnded: 0,
    notes: [],
  };
  let srv: PolicyServer;
  try {
    srv = name === 'hse' ? await startHseServer(n) : await startHeadscaleServer();
  } catch (e) {
    run.notes.push(`did not start: ${(e as Error).message.split('\n')[0]}`);
    return run;
  }
  run.how = srv.how;
  const pids = srv.pids();
  const start = sampleGroup(pids);
  const peak = new PeakSampler(pids);
  let fleet: PolicyFleet | null = null;
  const timedOut = (what: string) => `${what}: did not finish in ${fmtMs(limitMs)}`;
  try {
    run.stage = 'setup';
    log(`${name} N=${n}: ${plan.users.length} users, the policy, keys`);
    await inParallel(plan.users, 8, (u) => srv.createUser(u));
    const first = plan.registration[registerUnder];
    await srv.usersSettled(first);
    await srv.setPolicy(first);
    const keyOf = new Map<string, string>();
    const specs = new Map<string, { user: string | null; tags: string[] }>();
    for (const x of plan.nodes) specs.set(x.user ?? `tags ${x.tags.join(',')}`, x);
    await inParallel([...specs.entries()], 8, async ([id, spec]) => {
      keyOf.set(id, await srv.key(spec));
    });
    const keys = plan.nodes.map((x) => keyOf.get(x.user ?? `tags ${x.tags.join(',')}`)!);
    const probeUsers = Array.from({ length: events }, (_, k) => plan.users[1 + k]);
    const probeKeys = new Map<string, string>();
    for (const u of probeUsers) probeKeys.set(u, await srv.key({ user: u, tags: [], ephemeral: true }));

    run.stage = 'register';
    fleet = new PolicyFleet({ ...srv.target, serverKey: await srv.serverKey() }, n);
    fleet.expectPeers(expected);
    log(`${name} N=${n}: registering`);
    const reg = await fleet.register(keys, concurrency, limitMs);
    run.registerMs = reg.ms;
    run.registered = reg.done;
    if (reg.error) throw new Error(`register failed: ${reg.error}`);
    if (reg.done < n) throw new Error(`${timedOut('register')} (${reg.done} of ${n} nodes registered)`);

    run.stage = 'compile';
    log(`${name} N=${n}: registered in ${fmtMs(reg.ms)}; the whole policy (with its tests) set with ${n} nodes`);
    const again = await srv.setPolicy(plan.text);
    run.setMs = again.ms;
    run.compileMs = again.compileMs;

    run.stage = 'full maps';
    log(`${name} N=${n}: opening ${n} map streams`);
    const cpu0 = sampleGroup(pids).cpuSeconds;
    const client0 = process.cpuUsage();
    const opened = performance.now();
    await fleet.openAll();
    run.fullMissing = await fleet.waitFull(limitMs);
    const c = process.cpuUsage(client0);
    run.clientCpuFull = (c.user + c.system) / 1e6;
    run.cpuFull = sampleGroup(pids).cpuSeconds - cpu0;
    const times = [...fleet.fullAt].filter((t) => !Number.isNaN(t));
    run.fullAllMs = run.fullMissing === 0 ? Math.max(...times) : Infinity;
    run.fullP50Ms = median(times);
    run.mapsMismatched = fleet.mismatchedMaps;
    run.mismatchSamples = fleet.mismatchSamples;
    const got = [...fleet.fullPeers].filter((x) => x >= 0);
    run.peersMean = got.reduce((s, x) => s + x, 0) / got.length;
    const wire = [...fleet.fullWire].filter((x) => !Number.isNaN(x));
    run.wireP50 = median(wire);
    run.wireMax = Math.max(...wire);
    run.jsonP50 = median([...fleet.fullJson].filter((x) => !Number.isNaN(x)));
    if (run.fullMissing > 0) throw new Error(`${timedOut('all full maps')} (${run.fullMissing} of ${n} nodes without one)`);
    log(`${name} N=${n}: full maps in ${fmtMs(run.fullAllMs)}; waiting for the streams to go quiet`);
    if (!(await fleet.settle(2000, limitMs))) run.notes.push(`streams still busy ${fmtMs(limitMs)} after the full maps`);
    run.quietMs = fleet.lastChangeAt - opened;
    run.messagesPerStream = fleet.messages / n;

    run.stage = 'join';
    for (const u of probeUsers) {
      const audience = joinAudience(plan, u);
      run.joinAudience += audience.length;
      const { node, result } = await fleet.probeJoin(probeKeys.get(u)!, audience, Math.min(limitMs, 120_000));
      run.join.push(result);
      run.leave.push(await fleet.probeLeave(node, audience, Math.min(limitMs, 120_000)));
    }
    log(`${name} N=${n}: ${events} joins and leaves measured`);

    const changes = changedPolicies(plan);
    const base = compileOrThrow(plan.text, plan.snapshot);
    const narrow = compileOrThrow(changes.narrow, plan.snapshot);
    const wide = compileOrThrow(changes.wide, plan.snapshot);
    for (const [k, text, audience] of [
      [1, changes.narrow, changedViews(base, narrow, n)],
      [2, changes.wide, changedViews(narrow, wide, n)],
    ] as const) {
      run.stage = `change ${k}`;
      let setMs = NaN;
      const serverCpu0 = sampleGroup(pids).cpuSeconds;
      const clientCpu0 = process.cpuUsage();
      const w = await fleet.observe(
        [...audience],
        isViewDelta,
        async () => {
          setMs = (await srv.setPolicy(text)).ms;
        },
        limitMs,
        2000,
      );
      const cc = process.cpuUsage(clientCpu0);
      const r = { ...w, audience: audience.length, setMs, serverCpu: sampleGroup(pids).cpuSeconds - serverCpu0, clientCpu: (cc.user + cc.system) / 1e6 };
      if (k === 1) run.change1 = r;
      else run.change2 = r;
      log(`${name} N=${n}: change ${k}: ${audience.length} streams, all in ${fmtMs(w.allMs)} (${w.missing} missing)`);
    }
    const settled = sampleGroup(pids);
    run.settledRssKiB = settled.rssKiB;
    run.cpuTotal = settled.cpuSeconds - start.cpuSeconds;
    run.stage = 'done';
  } catch (e) {
    run.notes.push(`stopped at ${run.stage}: ${(e as Error).message.split('\n')[0]}`);
    log(`${name} N=${n} stopped at ${run.stage}: ${(e as Error).message}\n${srv.logs().slice(-2000)}`);
    if (Number.isNaN(run.cpuTotal)) run.cpuTotal = sampleGroup(pids).cpuSeconds - start.cpuSeconds;
  } finally {
    peak.stop();
    run.peakRssKiB = peak.peakRssKiB;
    if (fleet) run.streamsEnded = fleet.streamsEnded;
    fleet?.close();
    await srv.stop();
  }
  return run;
}

const lat = (ws: Watched[]) => ws.flatMap((w) => w.latencies);
const missingOf = (ws: Watched[]) => ws.reduce((s, w) => s + w.missing, 0);
const allOf = (ws: Watched[]) => median(ws.map((w) => (Number.isNaN(w.allMs) ? Infinity : w.allMs)));

function rows(runs: Run[]): (string | number)[][] {
  const ours = runs.find((r) => r.server === 'hse');
  const theirs = runs.find((r) => r.server === 'headscale');
  const n = runs[0].n;
  const size = (b: number) => (Number.isFinite(b) ? (b >= 10_240 ? `${(b / 1024).toFixed(0)} KiB` : `${(b / 1024).toFixed(1)} KiB`) : '–');
  const aud = (r: Run | undefined, k: 1 | 2) => (k === 1 ? r?.change1?.audience : r?.change2?.audience);
  const a1 = aud(ours, 1) ?? aud(theirs, 1) ?? 0;
  const a2 = aud(ours, 2) ?? aud(theirs, 2) ?? 0;
  // A figure the server never reached is "timed out" (Infinity); one it was not measured on (an earlier phase
  // stopped the run) is "–" (NaN).
  const ch = (r: Run, k: 1 | 2, f: (w: Watched) => number) => {
    const w = k === 1 ? r.change1 : r.change2;
    return w ? f(w) : NaN;
  };
  type Metric = [string, (r: Run) => number, (v: number) => string, boolean];
  const ms = fmtMs;
  const metrics: Metric[] = [
    ['policy set, N nodes: request → in force', (r) => r.setMs, ms, true],
    ['  of which compiling (server log)', (r) => r.compileMs, ms, false],
    ['register, nodes/s', (r) => (r.registered === r.n ? (r.n / r.registerMs) * 1000 : NaN), (v) => fmtNum(v), true],
    ['all full maps', (r) => r.fullAllMs, ms, true],
    ['full map p50 (per node)', (r) => r.fullP50Ms, ms, true],
    ['full maps whose peers differ from the policy', (r) => r.mapsMismatched, (v) => fmtNum(v), false],
    ['peers per full map, mean', (r) => r.peersMean, (v) => fmtNum(v, 1), false],
    ['full map bytes on the wire (zstd) p50', (r) => r.wireP50, size, true],
    ['full map bytes on the wire, largest', (r) => r.wireMax, size, true],
    ['full map JSON p50', (r) => r.jsonP50, size, true],
    ['streams opened → quiet (online fan-out done)', (r) => r.quietMs, ms, true],
    ['messages per stream until quiet', (r) => r.messagesPerStream, (v) => fmtNum(v, 1), true],
    [`join → each stream that sees it p50`, (r) => percentile(lat(r.join), 50), ms, true],
    [`join → each stream that sees it p99`, (r) => percentile(lat(r.join), 99), ms, true],
    ['join → all its streams (median of events)', (r) => (r.join.length ? allOf(r.join) : NaN), ms, true],
    ['leave → each stream p50 / p99', (r) => percentile(lat(r.leave), 99), ms, true],
    [`change 1 (one rule's ports; ${a1} views) → stream p50`, (r) => ch(r, 1, (w) => percentile(w.latencies, 50)), ms, true],
    [`change 1 → stream p99`, (r) => ch(r, 1, (w) => percentile(w.latencies, 99)), ms, true],
    ['change 1 → every affected stream', (r) => ch(r, 1, (w) => (w.missing > 0 ? Infinity : w.allMs)), ms, true],
    ['change 1: streams that got a message', (r) => ch(r, 1, (w) => w.touched), (v) => fmtNum(v), false],
    [`change 2 (a rule for every user; ${a2} views) → stream p50`, (r) => ch(r, 2, (w) => percentile(w.latencies, 50)), ms, true],
    ['change 2 → stream p99', (r) => ch(r, 2, (w) => percentile(w.latencies, 99)), ms, true],
    ['change 2 → every affected stream', (r) => ch(r, 2, (w) => (w.missing > 0 ? Infinity : w.allMs)), ms, true],
    ['change 2: streams that got a message', (r) => ch(r, 2, (w) => w.touched), (v) => fmtNum(v), false],
    ['server RSS peak', (r) => r.peakRssKiB, fmtMiB, true],
    ['server RSS settled, N streams', (r) => r.settledRssKiB, fmtMiB, true],
    ['server CPU s, full-map phase', (r) => r.cpuFull, (v) => fmtNum(v, 1), true],
    ['server CPU s, whole run', (r) => r.cpuTotal, (v) => fmtNum(v, 1), true],
  ];
  const out: (string | number)[][] = [];
  for (const [label, get, fmt, compare] of metrics) {
    let a = ours ? get(ours) : NaN;
    let b = theirs ? get(theirs) : NaN;
    let shown = [fmt(a), fmt(b)];
    if (label.startsWith('leave')) {
      // p50 and p99 in one cell.
      a = ours ? percentile(lat(ours.leave), 99) : NaN;
      b = theirs ? percentile(lat(theirs.leave), 99) : NaN;
      const pair = (r: Run | undefined) => (r?.leave.length ? `${ms(percentile(lat(r.leave), 50))} / ${ms(percentile(lat(r.leave), 99))}` : '–');
      shown = [pair(ours), pair(theirs)];
    }
    out.push([String(n), label, shown[0], shown[1], compare ? ratio(a, b) : '']);
  }
  return out;
}

process.stdout.write(
  header('Control plane under a policy: hse vs headscale', {
    headscale: [HEADSCALE, ['version']],
    'redis-server': ['redis-server', ['--version']],
  }),
);
process.stdout.write(
  `N = ${sizes.join(', ')}; nodes register under ${registerUnder === 'tags' ? 'a first policy of groups and tagOwners only' : 'the whole policy but its tests'}; policy from bench/lib/policy-gen.ts (seed ${seed}) cut to what both accept (bench/lib/policy-plan.ts); ${events} joins per N; registrations ${concurrency} in flight; time limit per phase ${fmtMs(limitMs)}; open-file limit ${openFileLimit()}; load client: one Noise connection per node, one process sharing the machine with the server\n\n`,
);

const all: Run[][] = [];
const planInfo: string[] = [];
for (const n of sizes) {
  const plan = makePlan(n, seed);
  const compiled = compileOrThrow(plan.text, plan.snapshot);
  const expected = expectedPeers(compiled, n);
  const mean = expected.reduce((s, x) => s + x.length, 0) / n;
  const policy = plan.policy as { acls: unknown[]; grants: unknown[]; groups: object; tagOwners: object; ssh: unknown[] };
  planInfo.push(
    `N=${n}: ${plan.users.length} users, ${Object.keys(policy.tagOwners).length} tags, ${Object.keys(policy.groups).length} groups, ${policy.acls.length} acls + ${policy.grants.length} grants, ${policy.ssh.length} ssh rules; policy file ${fmtNum(plan.text.length / 1024, 0)} KiB; peers per node (hse's engine) mean ${fmtNum(mean, 1)}`,
  );
  const runs: Run[] = [];
  for (const s of servers) runs.push(await runOne(s, plan, expected));
  all.push(runs);
}

process.stdout.write(`${planInfo.join('\n')}\n\n`);
process.stdout.write(`${table(['N', 'metric', 'hse', 'headscale', 'hse/headscale'], all.flatMap(rows))}\n\n`);
for (const runs of all) {
  for (const r of runs) {
    const j = missingOf(r.join);
    const l = missingOf(r.leave);
    const others = (ws: Watched[]) => ws.reduce((s, w) => s + w.others, 0);
    process.stdout.write(
      `${r.server} N=${r.n} (${r.how || 'not started'}; load average ${r.load.toFixed(1)} at its start): ${r.notes.length ? `${r.notes.join('; ')}; ` : ''}` +
        `registered ${r.registered}; nodes without a full map ${r.fullMissing}; full maps whose peers differ from hse's engine ${fmtNum(r.mapsMismatched)}${r.mismatchSamples.length ? ` (e.g. ${r.mismatchSamples.join('; ')})` : ''}; ` +
        `join: ${r.joinAudience} stream deliveries expected, ${j} missing, ${others(r.join)} streams outside the audience told; leave: ${l} missing; ` +
        `${[r.change1, r.change2].map((c, k) => `change ${k + 1}: ${c ? `${c.missing} missing, ${c.others} others with a delta, API ${fmtMs(c.setMs)}, CPU s server ${fmtNum(c.serverCpu, 1)} / load client ${fmtNum(c.clientCpu, 1)}` : '–'}; `).join('')}` +
        `streams ended early ${r.streamsEnded}; load client CPU in the full-map phase ${fmtNum(r.clientCpuFull, 1)} s\n`,
    );
  }
}
process.stdout.write(
  `\nload average at the end: ${os
    .loadavg()
    .map((x) => x.toFixed(1))
    .join(' ')}\nratio < 1 is better for hse on every row except register (nodes/s), where > 1 is better. "timed out": not within the phase's limit.\n`,
);
if (notMeasured.length > 0) process.stdout.write(`headscale not measured: ${notMeasured.join('; ')}.\n`);
