// Admin API for the tailnet policy (console "Access controls", `hse policy`, the remote API): read it with its origin
// and history, check a text without changing anything, save (validated first: a text that does not compile is refused
// with every error's line and column, and the policy in force stays), revert to an earlier version, and ask who may
// reach a machine. With HSE_POLICY_FILE the file is the policy: reading works, changing is refused with the reason.
import { structuredPatch } from 'diff';
import { HseError } from '../../../../shared/errors.ts';
import type { LivePolicy } from '../map/live-policy.ts';
import { formatPolicyError, type PolicyError } from '../policy/index.ts';
import type { PolicyStore, PolicyVersion } from '../state/policy-store.ts';
import { type Call, id, type Routes } from './admin-kit.ts';

export interface PolicyRouteDeps {
  live: LivePolicy;
  store: PolicyStore;
  /** HSE_POLICY_FILE, when the policy is a file. */
  file: string | null;
  log: (c: Call, action: string, target: string, details?: Record<string, unknown>) => Promise<unknown>;
}

export interface PolicyProblem {
  line: number;
  column: number;
  message: string;
}

function problems(list: PolicyError[]): PolicyProblem[] {
  return list.map((e) => ({ line: e.line, column: e.column, message: e.message }));
}

/** A unified diff of two policy texts, for the activity log and the history (at most 200 lines). */
export function policyDiff(before: string | null, after: string | null): string {
  const patch = structuredPatch('before', 'after', before ?? '', after ?? '', '', '', { context: 2 });
  const lines: string[] = [];
  for (const h of patch.hunks) {
    lines.push(`@@ -${h.oldStart},${h.oldLines} +${h.newStart},${h.newLines} @@`, ...h.lines);
  }
  return lines.length > 200 ? [...lines.slice(0, 200), `… ${lines.length - 200} more lines`].join('\n') : lines.join('\n');
}

function textOf(body: Record<string, unknown>): string {
  const t = body.text;
  if (typeof t !== 'string') throw new HseError(400, '"text" (the policy file, HuJSON) is required');
  return t;
}

export function policyRoutes(d: PolicyRouteDeps): Routes {
  const refuseIfFile = () => {
    if (d.file) {
      throw new HseError(409, `the policy is the file ${d.file} (HSE_POLICY_FILE); edit that file instead — it is reloaded when it changes`);
    }
  };

  /** Checks, then saves; refused texts change nothing. */
  const save = async (c: Call, text: string, opts: { ifVersion?: number; note?: string }): Promise<PolicyVersion & { warnings: PolicyProblem[] }> => {
    refuseIfFile();
    const check = d.live.check(text);
    if (check.errors.length > 0) {
      throw new HseError(400, `the policy was refused; the policy in force stays:\n${check.errors.map(formatPolicyError).join('\n')}`, {
        details: { errors: problems(check.errors), warnings: problems(check.warnings), tests: check.tests },
      });
    }
    const before = await d.store.current();
    const v = await d.store.save({ text, actor: c.actor, ip: c.ip, ...(opts.note ? { note: opts.note } : {}) }, opts.ifVersion);
    await d.log(c, 'policy.change', `version ${v.version}`, {
      version: v.version,
      previous: before?.version ?? null,
      ...(opts.note ? { note: opts.note } : {}),
      diff: policyDiff(before?.text ?? null, text),
    });
    return { ...v, warnings: problems(check.warnings) };
  };

  return {
    'GET /v1/policy': async () => {
      const inForce = d.live.inForce;
      return {
        text: inForce.text,
        version: inForce.version,
        origin: inForce.origin,
        file: d.file,
        allowAll: d.live.policy.allowAll,
        tags: d.live.policy.definedTags(),
      };
    },
    'POST /v1/policy/check': async (c) => {
      const r = d.live.check(textOf(c.body));
      // tests: every assertion of the policy's tests and sshTests with its outcome (empty when errors stopped them).
      return { ok: r.errors.length === 0, errors: problems(r.errors), warnings: problems(r.warnings), tests: r.tests };
    },
    'PUT /v1/policy': async (c) => {
      const ifVersion = c.body.ifVersion === undefined ? undefined : Number(c.body.ifVersion);
      if (ifVersion !== undefined && !Number.isInteger(ifVersion)) throw new HseError(400, '"ifVersion" must be a version number');
      return save(c, textOf(c.body), { ifVersion });
    },
    'GET /v1/policy/history': async () => {
      const all = await d.store.history();
      return all.map((v, i) => ({ ...v, diff: policyDiff(all[i + 1]?.text ?? null, v.text) }));
    },
    'POST /v1/policy/revert/:id': async (c) => {
      const version = id(c.params[0]);
      const old = await d.store.get(version);
      if (!old) throw new HseError(404, `there is no policy version ${version} (the last 100 are kept)`);
      return save(c, old.text, { note: `revert to version ${version}` });
    },
    'GET /v1/nodes/:id/access': async (c) => {
      const nodeId = id(c.params[0]);
      if (!d.live.knows(nodeId)) throw new HseError(404, `no machine with id ${nodeId}`);
      return { reachers: d.live.policy.reachersOf(nodeId) };
    },
  };
}
