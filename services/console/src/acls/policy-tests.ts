// The policy's own tests, as the Access controls page lists them: each entry of `tests` and `sshTests` with its line,
// what it asserts, and whether it held. The coordination service runs the tests when it checks a policy and reports a
// failing one as an error at the assertion's line and column (services/coordination/src/policy/policy-tests.ts); it
// does not list the tests that passed. So the console reads the entries from the text (HuJSON, with jsonc-parser, the
// library the policy engine scans with) and matches the errors to them by line:
//   - no error at all: the text compiled, so every test held;
//   - errors only inside tests: those tests failed (with the engine's words), the others held;
//   - an error outside the tests: the engine stops before it runs tests, so none of them ran.
import jsonc from 'jsonc-parser';
import type { PolicyProblem } from '../../../../shared/admin-client.ts';

export interface PolicyTestEntry {
  section: 'tests' | 'sshTests';
  index: number;
  /** First and last line of the entry (1-based). */
  line: number;
  endLine: number;
  /** The source the test names ("alice@", "group:eng", "tag:ci"). */
  src: string;
  /** What it asserts, in short: ["accept tag:db:5432, 100.64.0.7:22", "deny tag:db:22"]. */
  asserts: string[];
  /** The engine's errors inside this entry: the failed assertions. */
  failures: PolicyProblem[];
}

export interface PolicyTestsOutline {
  /** The text could not be read as HuJSON (then nothing is listed). */
  unreadable: boolean;
  /** False when errors outside the tests kept the engine from running them. */
  ran: boolean;
  entries: PolicyTestEntry[];
}

function lineAt(starts: number[], offset: number): number {
  let lo = 0;
  let hi = starts.length - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (starts[mid] <= offset) lo = mid;
    else hi = mid - 1;
  }
  return lo + 1;
}

function lineStarts(text: string): number[] {
  const starts = [0];
  for (let i = text.indexOf('\n'); i !== -1; i = text.indexOf('\n', i + 1)) starts.push(i + 1);
  return starts;
}

function strings(v: unknown): string[] {
  return Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : [];
}

function assertsOf(section: PolicyTestEntry['section'], v: Record<string, unknown>): string[] {
  const out: string[] = [];
  const add = (word: string, list: string[]) => {
    if (list.length) out.push(`${word} ${list.join(', ')}`);
  };
  if (section === 'tests') {
    const proto = typeof v.proto === 'string' && v.proto !== '' ? ` (${v.proto})` : '';
    add(`may reach${proto}`, strings(v.accept));
    add(`may not reach${proto}`, strings(v.deny));
  } else {
    const dst = strings(v.dst).join(', ') || '?';
    add(`may log in to ${dst} as`, strings(v.accept));
    add(`may not log in to ${dst} as`, strings(v.deny));
    add(`needs a check to log in to ${dst} as`, strings(v.check));
  }
  return out;
}

/** The tests of `text`, each with the errors (from a check or a refused save) that fall inside it. */
export function outlineTests(text: string | null, errors: PolicyProblem[]): PolicyTestsOutline {
  if (text === null || text.trim() === '') return { unreadable: false, ran: true, entries: [] };
  const parseErrors: jsonc.ParseError[] = [];
  const root = jsonc.parseTree(text, parseErrors, { allowTrailingComma: true, disallowComments: false });
  if (!root || parseErrors.length > 0 || root.type !== 'object') return { unreadable: true, ran: false, entries: [] };
  const starts = lineStarts(text);
  const entries: PolicyTestEntry[] = [];
  for (const section of ['tests', 'sshTests'] as const) {
    const list = jsonc.findNodeAtLocation(root, [section]);
    if (list?.type !== 'array') continue;
    (list.children ?? []).forEach((node, index) => {
      const line = lineAt(starts, node.offset);
      const endLine = lineAt(starts, node.offset + node.length - 1);
      const value = jsonc.getNodeValue(node) as unknown;
      const v = typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
      entries.push({
        section,
        index,
        line,
        endLine,
        src: typeof v.src === 'string' ? v.src : '?',
        asserts: assertsOf(section, v),
        failures: errors.filter((e) => e.line >= line && e.line <= endLine),
      });
    });
  }
  const inTests = (e: PolicyProblem) => entries.some((t) => e.line >= t.line && e.line <= t.endLine);
  return { unreadable: false, ran: errors.every(inTests), entries };
}
