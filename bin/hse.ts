// `hse`: the operator CLI. Talks to the coordination service's admin socket in the run directory (same settings as
// the image: HSE_DATA_DIR / HSE_RUN_DIR), so run it where the image runs (inside the container: `docker exec`).
// Every change is recorded in the activity log with actor "cli".
import fs from 'node:fs';
import { AdminClient, AdminError, type PolicyProblem } from '../shared/admin-client.ts';
import { loadConfig } from '../shared/config.ts';
import { adminSocket } from '../shared/paths.ts';

const USAGE = `usage: hse <command> [arguments]

users list
users create <name>
users rename <id> <new-name>
users delete <id>
keys list
keys create --user <name|id> [--reusable] [--ephemeral] [--tags tag:a,tag:b] [--expires <seconds>]
keys expire <id>
apikeys list                        (keys for the remote API, /api/v2)
apikeys create --description <text> [--expires 90d] [--read-only]
apikeys revoke <id>
nodes list
nodes rename <node> <new-name>
nodes expire <node>
nodes expiry <node> --disable|--enable
nodes move <node> <user>
nodes tag <node> tag:a,tag:b        (an empty list "" removes the tags)
nodes access <node>                 (who may reach it, on what)
nodes delete <node>
routes list
routes approve <node> <prefix>…     (0.0.0.0/0, ::/0 or the word exit approve the exit node)
routes unapprove <node> <prefix>…
policy get
policy set <file>                   (- = standard input; refused unless it validates)
policy check <file>                 (exit 1 with the errors; nothing changes)
policy history
policy revert <version>
dns get
dns set <file>                      (- = standard input; JSON, see README "DNS")
pending list
pending approve <auth-id> --user <name|id>
pending reject <auth-id>
dns get
dns set <file>         (JSON as "dns get" prints it; - reads standard input)

<node> is a machine's id or its name. Add --json to print JSON instead of a table.`;

function readInput(file: string): string {
  try {
    return fs.readFileSync(file === '-' ? 0 : file, 'utf8');
  } catch (e) {
    process.stderr.write(`hse: cannot read ${file === '-' ? 'standard input' : file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}\n`);
    process.exit(2);
  }
}

/** Prints a refused policy's errors, one per line with its position, and exits 1. */
function policyRefused(file: string, problems: PolicyProblem[], message: string): never {
  if (problems.length === 0) process.stderr.write(`hse: ${message}\n`);
  for (const p of problems) process.stderr.write(`${file}:${p.line}:${p.column}: ${p.message}\n`);
  process.exit(1);
}

function flag(args: string[], name: string): string | undefined {
  const i = args.indexOf(name);
  if (i === -1) return undefined;
  const v = args[i + 1];
  args.splice(i, 2);
  return v;
}

function bool(args: string[], name: string): boolean {
  const i = args.indexOf(name);
  if (i === -1) return false;
  args.splice(i, 1);
  return true;
}

function table(rows: Record<string, unknown>[], cols: string[]): string {
  if (rows.length === 0) return '(none)';
  const cells = rows.map((r) => cols.map((c) => (Array.isArray(r[c]) ? (r[c] as unknown[]).join(',') : String(r[c] ?? ''))));
  const widths = cols.map((c, i) => Math.max(c.length, ...cells.map((r) => r[i].length)));
  const line = (vals: string[]) =>
    vals
      .map((v, i) => v.padEnd(widths[i]))
      .join('  ')
      .trimEnd();
  return [line(cols.map((c) => c.toUpperCase())), ...cells.map(line)].join('\n');
}

function need(v: string | undefined, what: string): string {
  if (v === undefined || v === '') {
    process.stderr.write(`hse: missing ${what}\n\n${USAGE}\n`);
    process.exit(2);
  }
  return v;
}

async function run(argv: string[]): Promise<void> {
  const args = [...argv];
  const json = bool(args, '--json');
  const cfg = loadConfig('cli');
  const api = new AdminClient(adminSocket(cfg));
  const who = { actor: 'cli', ip: '' };
  const [group, cmd, ...rest] = args;
  const out = (v: unknown, cols?: string[]) => {
    if (json || !cols) process.stdout.write(`${JSON.stringify(v, null, 2)}\n`);
    else process.stdout.write(`${table((Array.isArray(v) ? v : [v]) as Record<string, unknown>[], cols)}\n`);
  };
  const id = (s: string | undefined) => Number(need(s, 'id'));
  /** A machine by id or by name. */
  const node = async (ref: string | undefined): Promise<number> => {
    const r = need(ref, 'machine (id or name)');
    if (/^\d+$/.test(r)) return Number(r);
    const found = (await api.listNodes(who)).filter((n) => n.givenName === r.toLowerCase() || n.fqdn === r.toLowerCase().replace(/\.$/, ''));
    if (found.length !== 1) {
      process.stderr.write(`hse: no machine named "${r}" (see hse nodes list)\n`);
      process.exit(1);
    }
    return found[0].id;
  };

  switch (`${group} ${cmd}`) {
    case 'users list':
      return out(await api.listUsers(who), ['id', 'name', 'machines', 'created']);
    case 'users create':
      return out(await api.createUser(who, need(rest[0], 'user name')), ['id', 'name', 'created']);
    case 'users rename':
      return out(await api.renameUser(who, id(rest[0]), need(rest[1], 'new name')), ['id', 'name']);
    case 'users delete':
      return out(await api.deleteUser(who, id(rest[0])), ['id', 'name']);
    case 'keys list':
      return out(await api.listPreAuthKeys(who), ['id', 'prefix', 'user', 'reusable', 'ephemeral', 'used', 'expired', 'expiration']);
    case 'keys create': {
      const user = need(flag(rest, '--user'), '--user');
      const expires = flag(rest, '--expires');
      const k = await api.createPreAuthKey(who, {
        user,
        reusable: bool(rest, '--reusable'),
        ephemeral: bool(rest, '--ephemeral'),
        tags: (flag(rest, '--tags') ?? '')
          .split(',')
          .map((t) => t.trim())
          .filter((t) => t !== ''),
        expiresInSeconds: expires ? Number(expires) : undefined,
      });
      if (json) return out(k);
      process.stdout.write(`${k.key}\n\nThe key is shown only now. Use it with:\n  tailscale up --login-server=${cfg.publicOrigin} --auth-key=${k.key}\n`);
      return;
    }
    case 'apikeys list':
      return out(
        (await api.listApiKeys(who)).map((k) => ({ ...k, lastUsed: k.lastUsed ? `${k.lastUsed.time} from ${k.lastUsed.ip || '?'}` : 'never' })),
        ['id', 'prefix', 'description', 'role', 'expiration', 'expired', 'revoked', 'lastUsed', 'createdBy'],
      );
    case 'apikeys create': {
      const expires = flag(rest, '--expires') ?? '90d';
      const m = /^(\d{1,4})d$/.exec(expires);
      if (!m) {
        process.stderr.write('hse: --expires is a number of days like 90d (1d to 365d)\n');
        process.exit(1);
      }
      const k = await api.createApiKey(who, {
        description: need(flag(rest, '--description'), '--description'),
        expiresInSeconds: Number(m[1]) * 86_400,
        role: bool(rest, '--read-only') ? 'readonly' : 'admin',
      });
      if (json) return out(k);
      process.stdout.write(
        `${k.key}\n\nThe key is shown only now (${k.role === 'readonly' ? 'read-only, ' : ''}expires ${k.expiration}). Use it with:\n  curl -H "Authorization: Bearer ${k.key}" ${cfg.publicOrigin}/api/v2/tailnet/-/devices\n`,
      );
      return;
    }
    case 'apikeys revoke':
      return out(await api.revokeApiKey(who, id(rest[0])), ['id', 'prefix', 'description', 'revoked']);
    case 'keys expire':
      return out(await api.expirePreAuthKey(who, id(rest[0])), ['id', 'prefix', 'expired']);
    case 'nodes list':
      return out(await api.listNodes(who), ['id', 'givenName', 'user', 'tags', 'ipv4', 'ipv6', 'online', 'lastSeen', 'expiry', 'expired']);
    case 'nodes rename':
      return out(await api.renameNode(who, await node(rest[0]), need(rest[1], 'new name')), ['id', 'givenName', 'fqdn']);
    case 'nodes expire':
      return out(await api.expireNode(who, await node(rest[0])), ['id', 'givenName', 'expired']);
    case 'nodes expiry': {
      const disable = bool(rest, '--disable');
      const enable = bool(rest, '--enable');
      if (disable === enable) {
        process.stderr.write(`hse: give exactly one of --disable or --enable\n\n${USAGE}\n`);
        process.exit(2);
      }
      return out(await api.setKeyExpiryDisabled(who, await node(rest[0]), disable), ['id', 'givenName', 'keyExpiryDisabled', 'expiry']);
    }
    case 'nodes move':
      return out(await api.moveNode(who, await node(rest[0]), need(rest[1], 'user')), ['id', 'givenName', 'user']);
    case 'nodes tag': {
      const tags = (rest[1] ?? '')
        .split(',')
        .map((t) => t.trim())
        .filter((t) => t !== '');
      return out(await api.tagNode(who, await node(rest[0]), tags), ['id', 'givenName', 'tags']);
    }
    case 'nodes access':
      return out((await api.nodeAccess(who, await node(rest[0]))).reachers, ['who', 'what', 'origin', 'line']);
    case 'nodes delete':
      return out(await api.deleteNode(who, await node(rest[0])), ['id', 'givenName']);
    case 'routes list':
      return out(await api.listRoutes(who), ['nodeId', 'node', 'prefix', 'advertised', 'approved', 'active', 'primary', 'online']);
    case 'routes approve':
    case 'routes unapprove': {
      const target = await node(rest[0]);
      const prefixes = rest.slice(1).filter((p) => p !== '');
      if (prefixes.length === 0) need(undefined, 'route prefix(es)');
      return out(await api.setRoutesApproved(who, target, prefixes, cmd === 'approve'), ['node', 'prefix', 'advertised', 'approved', 'active', 'primary']);
    }
    case 'policy get': {
      const p = await api.getPolicy(who);
      if (json) return out(p);
      process.stdout.write(p.text ?? `// No policy: every device may reach every other (${p.origin}).\n`);
      return;
    }
    case 'policy check': {
      const file = need(rest[0], 'policy file (- for standard input)');
      const r = await api.checkPolicy(who, readInput(file));
      for (const w of r.warnings) process.stderr.write(`${file}:${w.line}:${w.column}: warning: ${w.message}\n`);
      if (!r.ok) policyRefused(file, r.errors, 'the policy does not validate');
      if (json) return out(r);
      process.stdout.write(`${file}: the policy is valid (nothing was changed)\n`);
      return;
    }
    case 'policy set': {
      const file = need(rest[0], 'policy file (- for standard input)');
      try {
        const v = await api.setPolicy(who, readInput(file));
        for (const w of v.warnings) process.stderr.write(`${file}:${w.line}:${w.column}: warning: ${w.message}\n`);
        if (json) return out(v);
        process.stdout.write(`policy version ${v.version} is in force\n`);
      } catch (e) {
        if (e instanceof AdminError && e.status === 400) policyRefused(file, (e.details as { errors?: PolicyProblem[] } | undefined)?.errors ?? [], e.message);
        throw e;
      }
      return;
    }
    case 'policy history':
      return out(await api.policyHistory(who), ['version', 'time', 'actor', 'ip', 'note']);
    case 'policy revert':
      return out(await api.revertPolicy(who, id(rest[0])), ['version', 'actor', 'note']);
    case 'dns get':
      return out(await api.getDns(who));
    case 'dns set': {
      const file = need(rest[0], 'file (or - for standard input)');
      const source = file === '-' ? 'standard input' : file;
      const text = readInput(file);
      let doc: unknown;
      try {
        doc = JSON.parse(text);
      } catch (e) {
        throw new Error(`${source} is not JSON: ${(e as Error).message}`);
      }
      const saved = await api.setDns(who, doc);
      if (!json) process.stderr.write('DNS settings saved; connected devices get them within a second.\n');
      return out(saved);
    }
    case 'pending list':
      return out(await api.listPending(who), ['authId', 'hostname', 'ip', 'created']);
    case 'pending approve':
      return out(await api.approve(who, need(rest[0], 'auth id'), need(flag(rest, '--user'), '--user')), ['id', 'givenName', 'user', 'ipv4']);
    case 'pending reject':
      return out(await api.reject(who, need(rest[0], 'auth id')), ['authId', 'hostname', 'status']);
    default:
      process.stderr.write(`${USAGE}\n`);
      process.exit(group === undefined || group === 'help' || group === '--help' ? 0 : 2);
  }
}

run(process.argv.slice(2)).catch((e: Error) => {
  process.stderr.write(`hse: ${e instanceof AdminError ? e.message : e.message}\n`);
  process.exit(1);
});
