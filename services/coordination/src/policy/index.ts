// The policy engine's entry point: policy text and a tailnet snapshot in; either a compiled policy or every error, each
// with the line and column of the value it is about. Pure: no Redis, no HTTP, no clock.
//
//   text ──parse.ts──► Policy ──model.ts──► Model (checked) ──policy-tests.ts──► tests pass?
//                                                  └──compile.ts──► CompiledPolicy (filters, peers, routes, SSH, caps)
//
// No policy (null, or text with only whitespace and comments) is Tailscale's default, allow-all (allow-all.ts).
import { AllowAll } from './allow-all.ts';
import { type CompileOptions, Compiled } from './compile.ts';
import type { CompiledPolicy } from './compiled-policy.ts';
import type { PolicyError } from './hujson.ts';
import { ModelBuilder } from './model.ts';
import { parsePolicyText } from './parse.ts';
import { PolicyTestRunner, type TestResult } from './policy-tests.ts';
import { Resolver } from './resolve.ts';
import { TailnetIndex } from './tailnet-index.ts';
import type { TailnetSnapshot } from './types.ts';

export type { CompiledPolicy, Reacher, ViewDigest } from './compiled-policy.ts';
export type { PolicyError } from './hujson.ts';
export type { TestResult } from './policy-tests.ts';
export type { Policy, TailnetNode, TailnetSnapshot, TailnetUser } from './types.ts';

export interface PolicyOptions extends CompileOptions {
  /**
   * Refuse selectors naming users who do not exist. On for saving a policy (console, API, `hse policy check`); off
   * when reloading one already in force, where such a selector then matches nothing and comes back as a warning.
   */
  strict?: boolean;
  /** Run the policy's tests and sshTests (default on). */
  runTests?: boolean;
}

/** tests: every assertion of the policy's tests and sshTests with its outcome (empty when they were not run). */
export type PolicyResult =
  | { ok: true; policy: CompiledPolicy; warnings: PolicyError[]; tests: TestResult[] }
  | { ok: false; errors: PolicyError[]; warnings: PolicyError[]; tests: TestResult[] };

/** "line 12, column 15: group:eng is not defined in groups". */
export function formatPolicyError(e: PolicyError): string {
  return `line ${e.line}, column ${e.column}: ${e.message}`;
}

/** The policy Tailscale applies when there is none: every node reaches every node. */
export function allowAllPolicy(snapshot: TailnetSnapshot, opts: CompileOptions = {}): CompiledPolicy {
  return new AllowAll(new TailnetIndex(snapshot), opts);
}

/** True when the text holds no policy at all (empty, or only whitespace and comments). */
export function isEmptyPolicy(text: string | null): boolean {
  if (text === null) return true;
  const stripped = text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/\/\/[^\n]*/g, '');
  return stripped.trim() === '';
}

/** Checks and compiles a policy against the tailnet. All errors come back, sorted by position. */
export function compilePolicy(text: string | null, snapshot: TailnetSnapshot, opts: PolicyOptions = {}): PolicyResult {
  if (isEmptyPolicy(text)) return { ok: true, policy: allowAllPolicy(snapshot, opts), warnings: [], tests: [] };
  const { policy, sink } = parsePolicyText(text!);
  let tests: TestResult[] = [];
  const done = (): PolicyResult => {
    const byPos = (a: PolicyError, b: PolicyError) => a.line - b.line || a.column - b.column;
    return { ok: false, errors: dedupe(sink.errors).sort(byPos), warnings: sink.warnings.sort(byPos), tests };
  };
  if (!policy) return done();
  const model = new ModelBuilder(policy, sink, snapshot.users, opts.strict === true).build();
  if (sink.errors.length > 0) return done();
  const tn = new TailnetIndex(snapshot);
  if (opts.runTests !== false) {
    const runner = new PolicyTestRunner(model, new Resolver(model, tn), sink);
    runner.run();
    tests = runner.results;
  }
  if (sink.errors.length > 0) return done();
  const compiled = new Compiled(model, tn, (offset) => sink.lines.position(offset).line, opts);
  return { ok: true, policy: compiled, warnings: sink.warnings, tests };
}

/** Checks a policy without keeping the compiled result (`hse policy check`, the console's validate button). */
export function checkPolicy(
  text: string | null,
  snapshot: TailnetSnapshot,
  opts: PolicyOptions = { strict: true },
): { errors: PolicyError[]; warnings: PolicyError[] } {
  const r = compilePolicy(text, snapshot, opts);
  return r.ok ? { errors: [], warnings: r.warnings } : { errors: r.errors, warnings: r.warnings };
}

function dedupe(errors: PolicyError[]): PolicyError[] {
  const seen = new Set<string>();
  return errors.filter((e) => {
    const k = `${e.line}:${e.column}:${e.message}`;
    if (seen.has(k)) return false;
    seen.add(k);
    return true;
  });
}
