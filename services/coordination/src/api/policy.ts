// The policy file in Tailscale's API shape: GET /api/v2/tailnet/-/acl (HuJSON, comments kept, with
// "Accept: application/hujson"; JSON otherwise), POST (set, with If-Match: the ETag of the version it replaces),
// POST …/acl/validate (a policy text, or a list of tests run against the policy in force) and POST …/acl/preview.
// Setting goes through the admin route PUT /v1/policy: validated, versioned, in the activity log with its diff.
//
// ETag: a hash of the version number and text in force, quoted; "ts-default" matches only while no policy was ever
// set (Tailscale's If-Match value for "replace the default policy"). A stale ETag is 412, as Tailscale answers.
import crypto from 'node:crypto';
import * as jsonc from 'jsonc-parser';
import { HseError } from '../../../../shared/errors.ts';
import type { PolicyCheck, PolicyInForce } from '../../../../shared/admin-client.ts';
import type { LivePolicy } from '../map/live-policy.ts';
import { formatPolicyError } from '../policy/index.ts';
import { previewRules } from '../policy/preview.ts';
import type { AdminCaller, ApiCall, ApiRoutes } from './api-kit.ts';

/** What GET shows while no policy is set: hse's (and Tailscale's) default, every device reaching every other. */
export const DEFAULT_POLICY = `// No policy is set on this server: every device may reach every other device on every port (Tailscale's default).
// Setting a policy replaces this.
{
  "grants": [{ "src": ["*"], "dst": ["*"], "ip": ["*"] }],
}
`;

export function etagOf(p: Pick<PolicyInForce, 'version' | 'text'>): string {
  return crypto
    .createHash('sha256')
    .update(`${p.version ?? 'default'}\n${p.text ?? ''}`)
    .digest('hex')
    .slice(0, 32);
}

function wantsHujson(c: ApiCall): boolean {
  return /application\/hujson/i.test(String(c.headers.accept ?? ''));
}

/** The policy as the caller asked for it: HuJSON text as stored, or standard JSON (comments and trailing commas gone). */
function policyAnswer(c: ApiCall, text: string, etag: string) {
  const headers = { etag: `"${etag}"` };
  if (wantsHujson(c)) return { text, type: 'application/hujson', headers };
  return { json: jsonc.parse(text, [], { allowTrailingComma: true }) as unknown, headers };
}

/** Problems of a refused policy as Tailscale's error "data": one entry, its errors as "line L, column C: …". */
function refusal(message: string, errors: { line: number; column: number; message: string }[]) {
  return { message, data: [{ user: '', errors: errors.map(formatPolicyError) }] };
}

export function policyRoutes(d: { admin: AdminCaller; live: LivePolicy }): ApiRoutes {
  const current = (c: ApiCall) => d.admin<PolicyInForce>('GET /v1/policy', c);
  return {
    'GET /api/v2/tailnet/:t/acl': {
      handler: async (c) => {
        const p = await current(c);
        return policyAnswer(c, p.text ?? DEFAULT_POLICY, etagOf(p));
      },
    },
    'POST /api/v2/tailnet/:t/acl': {
      handler: async (c) => {
        const text = c.raw.toString('utf8');
        if (text.trim() === '') throw new HseError(400, 'the request body must be the policy file (HuJSON or JSON)');
        const p = await current(c);
        const ifMatch = c.headers['if-match'];
        if (ifMatch !== undefined) {
          const want = String(ifMatch).trim().replace(/^W\//, '').replace(/^"|"$/g, '');
          const ok = want === etagOf(p) || (want === 'ts-default' && p.version === null);
          if (!ok) throw new HseError(412, 'precondition failed: the policy changed since this ETag was read; get it again and reapply the change');
        }
        let saved: { version: number };
        try {
          saved = await d.admin('PUT /v1/policy', c, [], { text, ...(ifMatch !== undefined && p.version !== null ? { ifVersion: p.version } : {}) });
        } catch (e) {
          if (e instanceof HseError && e.status === 409 && ifMatch !== undefined) {
            throw new HseError(412, 'precondition failed: the policy changed meanwhile; get it again and reapply the change');
          }
          throw e;
        }
        return policyAnswer(c, text, etagOf({ version: saved.version, text }));
      },
    },
    'POST /api/v2/tailnet/:t/acl/validate': {
      readOnly: true,
      // A policy text is checked as a save would; a JSON list of tests is run against the policy in force. Problems
      // come back as 200 with Tailscale's {message, data}, a clean result as an empty 200 (what its clients expect).
      handler: async (c) => {
        let text = c.raw.toString('utf8');
        const trimmed = text.trim();
        if (trimmed === '') throw new HseError(400, 'the request body must be a policy file or a list of tests');
        if (trimmed.startsWith('[')) {
          const tests = jsonc.parse(trimmed, [], { allowTrailingComma: true }) as unknown;
          const inForce = (await current(c)).text ?? DEFAULT_POLICY;
          text = jsonc.applyEdits(inForce, jsonc.modify(inForce, ['tests'], tests, { formattingOptions: { insertSpaces: true, tabSize: 2 } }));
        }
        const r = await d.admin<PolicyCheck>('POST /v1/policy/check', c, [], { text });
        if (r.ok) return {};
        return { json: refusal(r.errors.length === 1 ? formatPolicyError(r.errors[0]) : `${r.errors.length} problems in the policy`, r.errors) };
      },
    },
    'POST /api/v2/tailnet/:t/acl/preview': {
      readOnly: true,
      handler: async (c) => {
        const type = c.query.get('type');
        const previewFor = c.query.get('previewFor') ?? '';
        if (type !== 'user' && type !== 'ipport') throw new HseError(400, '"type" must be "user" or "ipport"');
        if (previewFor === '') throw new HseError(400, '"previewFor" is required (a user, or ip:port)');
        const text = c.raw.toString('utf8');
        const r = previewRules(text.trim() === '' ? ((await current(c)).text ?? DEFAULT_POLICY) : text, d.live.snapshot(), type, previewFor);
        if (!r.ok) throw new HseError(400, `the policy was refused:\n${r.errors.map(formatPolicyError).join('\n')}`, { details: refusal('', r.errors).data });
        return { json: { matches: r.matches, type, previewFor } };
      },
    },
  };
}
