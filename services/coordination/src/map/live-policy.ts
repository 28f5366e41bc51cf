// The compiled policy in force for the tailnet as it is now. It is recompiled when the policy text changes (a save, a
// file reload) and when the tailnet changes in a way the policy can see — a node joins or leaves, its tags, owner,
// addresses or routes in effect change, a user's name, e-mail or provider groups change — and then announces it, so
// the map hub can give each stream the delta of its own view (control/map-hub.ts).
//
// Recompiles are batched: the first change after a quiet period compiles on the next turn of the event loop; while
// changes keep coming (a tailnet coming online), at most one compile runs per MIN_INTERVAL_MS, so a burst of N joins
// costs a few compiles, not N.
//
// A text that does not compile is refused and the previous policy stays in force. A text in force that stops
// compiling against a later tailnet (a policy test naming a user who was deleted, say) is compiled without its tests,
// and failing that the last compiled policy stays, with an error in the log: the tailnet never falls back to
// allow-all, or to deny-all, because of a change elsewhere.
import { EventEmitter } from 'node:events';
import type { ActivityLog } from '../../../../shared/activity.ts';
import type { Logger } from '../../../../shared/log.ts';
import { histogram } from '../../../../shared/metrics.ts';
import type { NodeRecord, UserRecord } from '../../../../shared/model.ts';
import { type CompiledPolicy, compilePolicy, formatPolicyError, type PolicyError, type TailnetSnapshot, type TestResult } from '../policy/index.ts';
import type { Tailnet } from '../state/tailnet.ts';
import type { PolicySource, PolicyText } from './policy-source.ts';
import { effectiveRoutes } from './routes.ts';

const MIN_INTERVAL_MS = 100;

const compileSeconds = histogram('hse_policy_compile_duration_seconds', 'Time to compile the policy in force against the tailnet, in seconds.');

export interface LivePolicyEvents {
  /** A new compiled policy is in force (text or tailnet changed). */
  compiled: [policy: CompiledPolicy];
}

export interface LivePolicyOptions {
  /** Taildrop between a user's own devices (HSE_TAILDROP). */
  taildrop: boolean;
}

/** The parts of a node the policy sees; a change in any of them means recompiling. */
function policyFace(n: NodeRecord): string {
  return JSON.stringify([n.userId, n.ipv4, n.ipv6, n.tags, effectiveRoutes(n)]);
}

function userFace(u: UserRecord): string {
  return JSON.stringify([u.name, u.email ?? null, u.idpGroups ?? []]);
}

export class LivePolicy extends EventEmitter<LivePolicyEvents> {
  private readonly tailnet: Tailnet;
  private readonly source: PolicySource;
  private readonly activity: ActivityLog;
  private readonly log: Logger;
  private readonly opts: LivePolicyOptions;
  private text: PolicyText = { text: null, version: null, origin: 'none' };
  private current: CompiledPolicy | null = null;
  private compiledNodes = new Set<number>();
  private pending: NodeJS.Timeout | NodeJS.Immediate | null = null;
  private lastCompile = 0;
  private readonly faces = new Map<number, string>();

  constructor(d: { tailnet: Tailnet; source: PolicySource; activity: ActivityLog; log: Logger; options: LivePolicyOptions }) {
    super();
    this.setMaxListeners(0);
    this.tailnet = d.tailnet;
    this.source = d.source;
    this.activity = d.activity;
    this.log = d.log;
    this.opts = d.options;
  }

  /** The policy in force. */
  get policy(): CompiledPolicy {
    if (!this.current) this.compileNow();
    return this.current as CompiledPolicy;
  }

  /** The text in force and where it came from. */
  get inForce(): PolicyText {
    return this.text;
  }

  /** Loads the text in force, compiles it, and follows changes of the text and of the tailnet. */
  async start(): Promise<void> {
    const initial = await this.source.initial();
    if (!this.tryText(initial, 'start')) {
      // A policy file that does not compile at start: nothing was in force before, so say so loudly and run with
      // no policy until the file is fixed (the file watcher tries every change).
      this.text = { text: null, version: null, origin: 'none (the policy file was refused)' };
      this.compileNow();
    }
    for (const n of this.tailnet.nodes.values()) this.faces.set(n.id, policyFace(n));
    this.source.on('text', (t) => {
      this.tryText(t, 'reload');
    });
    this.source.watch();
    this.tailnet.on('policy', () => {
      this.source.onStoreChange().catch((e: Error) => this.log.warn('could not load the saved policy', { error: e.message }));
    });
    this.tailnet.on('node', (n) => {
      const face = policyFace(n);
      if (this.faces.get(n.id) === face) return;
      this.faces.set(n.id, face);
      this.schedule();
    });
    this.tailnet.on('delete', (n) => {
      this.faces.delete(n.id);
      this.schedule();
    });
    const userFaces = new Map<number, string>();
    for (const u of this.tailnet.users.values()) userFaces.set(u.id, userFace(u));
    this.tailnet.on('user', (u, id) => {
      const face = u ? userFace(u) : '';
      if (userFaces.get(id) === face) return;
      userFaces.set(id, face);
      this.schedule();
    });
  }

  stop(): void {
    this.source.stop();
    if (this.pending) clearTimeout(this.pending as NodeJS.Timeout);
  }

  /** True when the node is part of the compiled policy (a node that just registered may not be yet). */
  knows(nodeId: number): boolean {
    return this.compiledNodes.has(nodeId);
  }

  /**
   * Resolves once the policy includes the node (a stream opening right after its registration), or after `maxMs`.
   * The node's arrival already scheduled a compile; waiting for it, rather than compiling now, keeps a burst of new
   * streams to a few compiles.
   */
  ready(nodeId: number, maxMs: number): Promise<void> {
    if (this.knows(nodeId)) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.off('compiled', check);
        resolve();
      };
      const check = () => {
        if (this.knows(nodeId)) done();
      };
      const timer = setTimeout(done, maxMs);
      this.on('compiled', check);
      this.schedule();
    });
  }

  /** The tailnet as the policy engine sees it. */
  snapshot(): TailnetSnapshot {
    const nodes = [];
    for (const n of this.tailnet.nodes.values()) {
      nodes.push({ id: n.id, ipv4: n.ipv4, ipv6: n.ipv6, userId: n.userId, tags: n.tags, approvedRoutes: [...effectiveRoutes(n)] });
    }
    const users = [];
    for (const u of this.tailnet.users.values()) users.push({ id: u.id, name: u.name, email: u.email ?? null, idpGroups: u.idpGroups ?? [] });
    return { nodes, users };
  }

  /** Checks a text as a save would (strict: unknown users are errors); nothing changes. */
  check(text: string | null): { errors: PolicyError[]; warnings: PolicyError[]; tests: TestResult[]; policy: CompiledPolicy | null } {
    const r = compilePolicy(text, this.snapshot(), { strict: true, taildrop: this.opts.taildrop });
    return r.ok
      ? { errors: [], warnings: r.warnings, tests: r.tests, policy: r.policy }
      : { errors: r.errors, warnings: r.warnings, tests: r.tests, policy: null };
  }

  private schedule(): void {
    if (this.pending) return;
    const wait = this.lastCompile + MIN_INTERVAL_MS - Date.now();
    const run = () => {
      this.pending = null;
      this.compileNow();
    };
    this.pending = wait > 0 ? setTimeout(run, wait) : setImmediate(run);
  }

  /** Takes a new text if it compiles against the tailnet now; returns whether it did. */
  private tryText(t: PolicyText, why: 'start' | 'reload'): boolean {
    const started = performance.now();
    const r = compilePolicy(t.text, this.snapshot(), { strict: false, taildrop: this.opts.taildrop });
    const ms = Math.round(performance.now() - started);
    for (const w of r.warnings) this.log.warn('policy warning', { origin: t.origin, at: formatPolicyError(w) });
    if (!r.ok) {
      const first = r.errors.slice(0, 5).map(formatPolicyError);
      this.log.error('policy refused; the policy in force stays', { origin: t.origin, errors: r.errors.length, first: first.join(' | ') });
      if (why === 'reload') {
        this.activity
          .record({ action: 'policy.refused', actor: 'system', ip: '', target: t.origin, details: { errors: r.errors.map(formatPolicyError).slice(0, 20) } })
          .catch(() => {});
      }
      return false;
    }
    this.text = t;
    this.install(r.policy);
    // ms: checking and compiling the text against the tailnet (bench/control-policy.ts reads it as the compile time).
    this.log.info('policy in force', { origin: t.origin, nodes: this.compiledNodes.size, allowAll: r.policy.allowAll, ms });
    if (why === 'reload' && t.version === null) {
      this.activity.record({ action: 'policy.reload', actor: 'system', ip: '', target: t.origin, details: {} }).catch(() => {});
    }
    return true;
  }

  private compileNow(): void {
    if (this.pending) {
      clearTimeout(this.pending as NodeJS.Timeout);
      clearImmediate(this.pending as NodeJS.Immediate);
      this.pending = null;
    }
    const started = Date.now();
    const snapshot = this.snapshot();
    let r = compilePolicy(this.text.text, snapshot, { strict: false, taildrop: this.opts.taildrop });
    if (!r.ok) r = compilePolicy(this.text.text, snapshot, { strict: false, runTests: false, taildrop: this.opts.taildrop });
    if (!r.ok) {
      this.log.error('the policy in force no longer compiles against the tailnet; keeping the last compiled one', {
        origin: this.text.origin,
        first: r.errors.slice(0, 3).map(formatPolicyError).join(' | '),
      });
      this.lastCompile = Date.now();
      return;
    }
    this.install(r.policy);
    this.lastCompile = Date.now();
    compileSeconds.observe({}, (this.lastCompile - started) / 1000);
    this.log.debug('policy compiled', { nodes: snapshot.nodes.length, ms: this.lastCompile - started });
  }

  private install(p: CompiledPolicy): void {
    this.current = p;
    this.compiledNodes = new Set(p.nodeIds);
    this.emit('compiled', p);
  }
}
