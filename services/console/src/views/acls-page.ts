// Access controls: the tailnet policy. What is in force (a saved version, the HSE_POLICY_FILE, or nothing at all —
// then every device reaches every other, Tailscale's default), the policy's own tests and whether they hold, and every
// saved version with who saved it from where, its diff and a revert. Administrators get the editor (a textarea; the
// page script policy-editor.js adds line numbers, marks the lines with errors and jumps to them); auditors and a
// policy file get the text read-only, with numbered lines that "who may reach this machine" links to (#L<line>).
// Errors are shown three ways, so an operator finds them with or without the script: listed with line and column,
// each with the lines around it and a caret under the column, and marked in the editor's line numbers.
import type { PolicyInForce, PolicyProblem, PolicyVersion } from '../../../../shared/admin-client.ts';
import { outlineTests, type PolicyTestsOutline } from '../acls/policy-tests.ts';
import type { Flash } from '../request/flash.ts';
import { ago, utc } from './format.ts';
import { html, type Html } from './html.ts';
import { page, type Viewer } from './layout.ts';
import { confirmAction, csrfField, errorBanner, flashBanner, pageHead, readOnlyNote } from './parts.ts';

export type PolicyVersionEntry = PolicyVersion & { diff: string };

/** The result of checking a text (Check, or a refused Save), shown with the text as typed. */
export interface PolicyCheckShown {
  /** "check": the Check button (nothing saved either way); "refused": a Save the coordination service refused. */
  kind: 'check' | 'refused';
  errors: PolicyProblem[];
  warnings: PolicyProblem[];
}

export interface AclsView {
  viewer: Viewer;
  policy: PolicyInForce;
  history: PolicyVersionEntry[];
  flash?: Flash | null;
  error?: string | null;
  /**
   * The text in the editor when it is not the policy in force (after Check or a refusal), and the version it was based
   * on (null: the one in force now).
   */
  draft?: { text: string; ifVersion: number | null };
  check?: PolicyCheckShown | null;
}

const NO_POLICY = "No policy: every device can reach every other (Tailscale's default).";

function position(p: PolicyProblem): string {
  return `Line ${p.line}, column ${p.column}`;
}

function savedBy(v: PolicyVersion, now: number): Html {
  return html`saved by <strong>${v.actor}</strong>${v.ip ? html` from <span class="mono">${v.ip}</span>` : ''} <span title="${utc(v.time)}">${ago(v.time, now)}</span>`;
}

/** What is in force, in one card. */
function inForce(v: AclsView, now: number): Html {
  const p = v.policy;
  const current = p.version !== null ? v.history.find((h) => h.version === p.version) : undefined;
  let state: Html;
  if (p.file) {
    state = html`<p>The policy is the file <span class="mono" id="policy-file">${p.file}</span> (<code>HSE_POLICY_FILE</code>). Edit that file to change it: hse reloads it when it changes, and a file that does not compile is refused with its errors in the coordination service's log while the previous policy stays in force.</p>
${p.allowAll ? html`<p class="muted">The file holds no rules: every device can reach every other (Tailscale's default).</p>` : ''}`;
  } else if (p.allowAll) {
    state = html`<p><strong id="no-policy">${NO_POLICY}</strong></p>
<p class="muted">${v.viewer.role === 'admin' ? 'Write a policy below to decide who may reach what; until one is saved, nothing is filtered.' : 'Until an administrator saves a policy, nothing is filtered.'}</p>`;
  } else {
    state = html`<p><span class="badge good">version ${p.version}</span> ${current ? savedBy(current, now) : ''}${current?.note ? html` <span class="muted">(${current.note})</span>` : ''}</p>`;
  }
  return html`<section class="card policy-state" id="policy-state" data-version="${p.version ?? ''}" data-file="${p.file ? 'true' : 'false'}" data-allow-all="${p.allowAll ? 'true' : 'false'}">
  <h2>In force</h2>
  ${state}
  ${p.tags.length ? html`<p class="muted">Tags it defines: ${p.tags.map((t, i) => html`${i ? ' ' : ''}<span class="badge plain mono">${t}</span>`)}</p>` : ''}
</section>`;
}

/** The lines of the text as the page shows them: numbered, each with an id for #L<n> links. */
function numbered(text: string, marked: Set<number>): Html {
  const lines = text.split('\n');
  return html`<ol class="code" id="policy-code">${lines.map((l, i) => html`<li id="L${i + 1}"${marked.has(i + 1) ? html` class="bad"` : ''}><code>${l || ' '}</code></li>`)}</ol>`;
}

function editor(v: AclsView): Html {
  const text = v.draft?.text ?? v.policy.text ?? '';
  const ifVersion = v.draft?.ifVersion ?? v.policy.version ?? 0;
  const bad = [...new Set((v.check?.errors ?? []).map((e) => e.line))];
  const lines = Math.max(1, text.split('\n').length);
  return html`<form method="post" action="/console/acls" class="card policy-form" id="policy-form">
  ${csrfField(v.viewer)}
  <input type="hidden" name="ifVersion" value="${ifVersion}">
  <div class="editor-head">
    <h2><label for="policy-text">Policy</label></h2>
    <span class="hint">HuJSON: JSON with comments and trailing commas, as Tailscale's policy file.</span>
  </div>
  <div class="editor">
    <pre class="gutter" aria-hidden="true" hidden>${Array.from({ length: lines }, (_, i) => html`<span${bad.includes(i + 1) ? html` class="bad"` : ''}>${i + 1}</span>\n`)}</pre>
    <textarea name="text" id="policy-text" rows="${Math.min(40, Math.max(16, lines + 2))}" wrap="off" autocomplete="off" autocapitalize="none" spellcheck="false" data-error-lines="${bad.join(',')}" placeholder="${PLACEHOLDER}">
${text}</textarea>
  </div>
  <div class="button-row">
    <button type="submit" class="button" formaction="/console/acls/check" id="check-button">Check</button>
    <button type="submit" class="button primary" id="save-button">Save</button>
  </div>
  <p class="hint">Saved only when it compiles and its tests pass; otherwise nothing changes and the policy in force stays. Devices get a saved policy within a second. From a shell: <code>hse policy check file.hujson</code>, <code>hse policy set file.hujson</code>.</p>
</form>`;
}

const PLACEHOLDER = `{
  "groups": { "group:eng": ["alice@", "bob@"] },
  "tagOwners": { "tag:server": ["group:eng"] },
  "acls": [
    { "action": "accept", "src": ["group:eng"], "dst": ["tag:server:22,443"] },
  ],
  "tests": [
    { "src": "alice@", "accept": ["tag:server:22"], "deny": ["tag:server:80"] },
  ],
}`;

/** The text read-only (auditors, a policy file), with numbered lines. */
function readOnly(v: AclsView): Html {
  const text = v.policy.text;
  if (text === null || v.policy.allowAll) return html``;
  return html`<section class="card policy-text" id="policy-read">
  <h2>Policy</h2>
  ${v.viewer.role === 'admin' ? '' : readOnlyNote('the policy')}
  <div class="code-wrap">${numbered(text, new Set())}</div>
</section>`;
}

/** Each error with the lines around it and a caret under the column, as a compiler prints it. */
function excerpt(text: string, p: PolicyProblem): Html {
  const lines = text.split('\n');
  const from = Math.max(1, p.line - 1);
  const to = Math.min(lines.length, p.line + 1);
  const out: Html[] = [];
  for (let n = from; n <= to; n++) {
    const l = lines[n - 1] ?? '';
    out.push(html`<span class="${n === p.line ? 'hit' : ''}"><span class="ln">${n}</span>${l}</span>\n`);
    if (n === p.line) out.push(html`<span class="caret"><span class="ln"></span>${l.slice(0, Math.max(0, p.column - 1)).replace(/[^\t]/g, ' ')}^</span>\n`);
  }
  return html`<pre class="excerpt">${out}</pre>`;
}

function problemList(items: PolicyProblem[], text: string, kind: 'error' | 'warning'): Html {
  return html`<ol class="problems ${kind}s">${items.map(
    (p) => html`<li class="problem" data-line="${p.line}" data-column="${p.column}">
    <a class="at" href="#policy-text" data-line="${p.line}" data-column="${p.column}">${position(p)}</a>: ${p.message}
    ${excerpt(text, p)}
  </li>`,
  )}</ol>`;
}

function checkResult(v: AclsView): Html {
  const c = v.check;
  if (!c) return html``;
  const text = v.draft?.text ?? '';
  const n = c.errors.length;
  const head =
    n === 0
      ? html`<p class="notice ok" id="check-ok">The policy compiles${c.kind === 'check' ? ' and its tests pass. Nothing is saved until you press Save.' : '.'}</p>`
      : html`<div class="alert" role="alert" id="check-failed"><p><strong>${n} problem${n === 1 ? '' : 's'}</strong>: ${c.kind === 'refused' ? 'the policy was not saved; the policy in force stays.' : 'this text would be refused. Nothing was saved.'}</p></div>`;
  return html`<section class="card check-result" id="check-result" data-errors="${n}">
  <h2>${c.kind === 'refused' ? 'Why it was refused' : 'Check'}</h2>
  ${head}
  ${n ? problemList(c.errors, text, 'error') : ''}
  ${c.warnings.length ? html`<h3>Warnings</h3><p class="muted">These do not stop a save.</p>${problemList(c.warnings, text, 'warning')}` : ''}
</section>`;
}

/** `subject` names what the tests belong to; null when there is no policy at all. */
function testsCard(o: PolicyTestsOutline, subject: string | null, checked: boolean): Html {
  let body: Html;
  const about = html`Tests (<code>"tests"</code>, <code>"sshTests"</code>) state who must and must not reach what; a save that breaks one is refused.`;
  if (subject === null) body = html`<p class="muted">There is no policy, so nothing to test yet. ${about}</p>`;
  else if (o.unreadable) body = html`<p class="muted">The tests cannot be listed until the text reads as HuJSON (see the problems above).</p>`;
  else if (o.entries.length === 0) body = html`<p class="muted">${subject} has no tests. ${about}</p>`;
  else {
    const failed = o.entries.filter((t) => t.failures.length > 0).length;
    const summary = !o.ran
      ? html`<p class="muted" id="tests-summary">Not run: the policy has errors outside its tests, and tests run once it compiles.</p>`
      : html`<p id="tests-summary"><strong>${o.entries.length}</strong> test${o.entries.length === 1 ? '' : 's'}: ${
          failed ? html`<span class="badge bad">${failed} failed</span> ` : ''
        }<span class="badge good">${o.entries.length - failed} passed</span>${checked ? '' : html` <span class="muted">(checked when this version was saved)</span>`}</p>`;
    body = html`${summary}<ul class="tests">${o.entries.map((t) => {
      const state = !o.ran && t.failures.length === 0 ? 'not-run' : t.failures.length ? 'failed' : 'passed';
      return html`<li class="test ${state}" data-line="${t.line}" data-state="${state}">
  <span class="badge ${state === 'passed' ? 'good' : state === 'failed' ? 'bad' : 'plain'}">${state === 'not-run' ? 'not run' : state}</span>
  <a class="at" href="#L${t.line}" data-line="${t.line}" data-column="1">line ${t.line}</a>
  <span class="mono">${t.src}</span> ${t.asserts.join(' · ')}
  ${t.failures.length ? html`<ul class="failures">${t.failures.map((f) => html`<li>${position(f)}: ${f.message}</li>`)}</ul>` : ''}
</li>`;
    })}</ul>`;
  }
  return html`<section class="card tests-card" id="tests">
  <h2>Tests</h2>
  ${body}
</section>`;
}

function diffView(diff: string): Html {
  if (diff.trim() === '') return html`<p class="muted">No change in the text.</p>`;
  return html`<pre class="diff">${diff.split('\n').map((l) => {
    const cls = l.startsWith('@@') ? 'hunk' : l.startsWith('+') ? 'add' : l.startsWith('-') ? 'del' : '';
    return html`<span${cls ? html` class="${cls}"` : ''}>${l}</span>\n`;
  })}</pre>`;
}

function historyCard(v: AclsView, now: number): Html {
  const canRevert = v.viewer.role === 'admin' && !v.policy.file;
  if (v.history.length === 0) {
    return html`<section class="card history-card" id="history"><h2>History</h2><p class="muted">No version has been saved yet.</p></section>`;
  }
  return html`<section class="card history-card" id="history">
  <h2>History</h2>
  <p class="muted">The last ${v.history.length === 1 ? 'version' : `${v.history.length} versions`}, newest first (hse keeps 100). Every change is also in Logs.</p>
  <ol class="history">${v.history.map((h) => {
    const current = h.version === v.policy.version && !v.policy.file;
    return html`<li class="version" data-version="${h.version}"${current ? html` data-current="true"` : ''}>
    <div class="version-head">
      <strong>Version ${h.version}</strong>${current ? html` <span class="badge good">in force</span>` : ''}
      <span class="sub">${savedBy(h, now)}${h.note ? html` · ${h.note}` : ''}</span>
    </div>
    <details class="changes"><summary>Changes</summary>${diffView(h.diff)}</details>
    ${
      canRevert && !current
        ? confirmAction({
            viewer: v.viewer,
            action: `/console/acls/revert/${h.version}`,
            label: 'Revert to this version…',
            question: html`Make version ${h.version} the policy in force again? It is saved as a new version; devices get it within a second.`,
            confirmLabel: `Revert to version ${h.version}`,
            tone: 'plain',
          })
        : ''
    }
  </li>`;
  })}</ol>
</section>`;
}

export function aclsPage(v: AclsView, now = Date.now()): string {
  const editing = v.viewer.role === 'admin' && !v.policy.file;
  const outline = v.check ? outlineTests(v.draft?.text ?? '', v.check.errors) : outlineTests(v.policy.allowAll ? null : v.policy.text, []);
  return page({
    title: 'Access controls',
    viewer: v.viewer,
    active: 'acls',
    scripts: editing ? ['policy-editor.js'] : [],
    body: html`${pageHead({ title: 'Access controls', subtitle: 'Who may reach what in the tailnet: the policy file, its tests and its history.' })}
${flashBanner(v.flash)}
${errorBanner(v.error)}
${inForce(v, now)}
${checkResult(v)}
${editing ? editor(v) : readOnly(v)}
${testsCard(outline, v.check ? 'This text' : v.policy.allowAll ? null : 'The policy in force', v.check !== undefined && v.check !== null)}
${historyCard(v, now)}`,
  });
}
