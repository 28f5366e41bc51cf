// Small tailnets for the policy tests: users alice, bob, carol (alice and bob with addresses), and nodes built from a
// short description. Node k gets 100.64.0.k and fd7a:115c:a1e0::k, so a test can name addresses by node number.
import type { ExecutionContext } from 'ava';
import { type CompiledPolicy, compilePolicy, formatPolicyError, type PolicyOptions } from '../../services/coordination/src/policy/index.ts';
import type { TailnetNode, TailnetSnapshot, TailnetUser } from '../../services/coordination/src/policy/types.ts';

export const USERS: TailnetUser[] = [
  { id: 1, name: 'alice', email: 'alice@example.com', idpGroups: ['engineering'] },
  { id: 2, name: 'bob', email: 'bob@example.org', idpGroups: [] },
  { id: 3, name: 'carol', email: null, idpGroups: ['engineering', 'sales'] },
];

const USER_IDS: Record<string, number> = { alice: 1, bob: 2, carol: 3 };

/** A node: owned by a user ("alice") or by tags (["tag:db"]), with approved routes. */
export function node(id: number, owner: string | string[], routes: string[] = []): TailnetNode {
  const tags = Array.isArray(owner) ? owner : [];
  return {
    id,
    ipv4: `100.64.0.${id}`,
    ipv6: `fd7a:115c:a1e0::${id.toString(16)}`,
    userId: Array.isArray(owner) ? 1 : USER_IDS[owner],
    tags,
    approvedRoutes: routes,
  };
}

export function snapshot(nodes: TailnetNode[], users: TailnetUser[] = USERS): TailnetSnapshot {
  return { nodes, users };
}

export const v4 = (id: number) => `100.64.0.${id}`;
export const v6 = (id: number) => `fd7a:115c:a1e0::${id.toString(16)}`;

/** Compiles, failing the test with the errors when the policy is refused. */
export function compile(t: ExecutionContext, text: string, snap: TailnetSnapshot, opts: PolicyOptions = { strict: true }): CompiledPolicy {
  const r = compilePolicy(text, snap, opts);
  if (!r.ok) t.fail(`policy refused:\n${r.errors.map(formatPolicyError).join('\n')}`);
  return (r as { policy: CompiledPolicy }).policy;
}

/** The errors of a refused policy, formatted ("line 3, column 14: …"). */
export function errors(text: string, snap: TailnetSnapshot = snapshot([]), opts: PolicyOptions = { strict: true }): string[] {
  const r = compilePolicy(text, snap, opts);
  return r.ok ? [] : r.errors.map(formatPolicyError);
}

/** "line L, column C" of the first occurrence of needle in text (1-based), as errors report positions. */
export function at(text: string, needle: string, occurrence = 1): string {
  let offset = -1;
  for (let k = 0; k < occurrence; k++) offset = text.indexOf(needle, offset + 1);
  if (offset < 0) throw new Error(`${needle} not in the text`);
  const before = text.slice(0, offset);
  const line = before.split('\n').length;
  const column = offset - before.lastIndexOf('\n');
  return `line ${line}, column ${column}`;
}

/** A policy from an object (most tests write the policy as JSON; HuJSON-specific tests write text). */
export function policyText(p: unknown): string {
  return JSON.stringify(p, null, 2);
}
