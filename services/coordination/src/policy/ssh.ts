// The ssh section → each node's tailcfg.SSHPolicy.
//
// Reference: tailcfg.SSHPolicy / SSHRule / SSHPrincipal / SSHAction, and the policies Tailscale's control plane sends
// (headscale's compatibility captures): one SSHRule per policy rule that targets the node, in policy order; principals
// are the source devices' addresses (nodeIP, IPv4 and IPv6); sshUsers maps each listed user to itself, "*" → "=" for
// autogroup:nonroot, and "root" → "" when root is not listed (so "*" cannot reach it); the action accepts and allows
// agent and port forwarding; localpart:*@<domain> becomes one rule per source user, mapping the local part of their
// address. For autogroup:self the principals are the node's own user's devices among the sources.
// hse differs: "check" rules are refused at validation (they need a browser sign-in hse does not offer yet), so every
// rule accepts; principals are listed once per address (Tailscale repeats a device with two matching tags); the
// users common to every source form one rule and localpart rules follow (Tailscale repeats the common users per
// source user — the same decisions); and localpart rules go to the rule's destinations only (Tailscale's captures
// also put them on the source users' own devices, which the policy did not name).
import type { SSHAction, SSHPolicy, SSHPrincipal, SSHRule } from '../tailcfg/tailcfg.ts';
import type { Model, SSHRuleModel } from './model.ts';
import type { Resolver } from './resolve.ts';
import type { Bitset } from './tailnet-index.ts';

const ACCEPT: SSHAction = Object.freeze({ accept: true, allowAgentForwarding: true, allowLocalPortForwarding: true, allowRemotePortForwarding: true });

/** The rule's sshUsers, keys in sorted order as Tailscale's (Go-encoded) maps come. */
export function sshUsersMap(r: SSHRuleModel): Record<string, string> {
  const m: Record<string, string> = {};
  if (r.users.nonroot) m['*'] = '=';
  for (const u of r.users.named) m[u] = u;
  m.root = r.users.root ? 'root' : '';
  return Object.fromEntries(Object.entries(m).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}

/** An SSH rule that targets a node: which rule, and for autogroup:self whose devices are the principals. */
export interface SSHMatch {
  rule: number;
  selfUser: number | null;
}

export class SSHCompiler {
  private readonly srcNodes: Bitset[];
  private readonly keyOf: string[];
  private readonly policies = new Map<string, { policy: SSHPolicy | null; hash: string; matches: SSHMatch[] }>();
  private readonly principalCache = new Map<string, SSHPrincipal[]>();
  /** Each shared principals list's hash, so a policy hashes without re-reading them. */
  private readonly principalHash = new WeakMap<SSHPrincipal[], string>();
  private readonly usersMaps: Record<string, string>[];

  private readonly model: Model;
  private readonly r: Resolver;

  private readonly hash: (s: string) => string;

  constructor(model: Model, r: Resolver, hash: (s: string) => string) {
    this.model = model;
    this.r = r;
    this.hash = hash;
    const tn = r.tn;
    this.srcNodes = model.ssh.map((rule) => r.union(rule.src));
    this.usersMaps = model.ssh.map(sshUsersMap);
    this.keyOf = new Array(tn.n).fill('');
    const tokens: string[][] = Array.from({ length: tn.n }, () => []);
    model.ssh.forEach((rule, k) => {
      for (const d of rule.dst) {
        if (d.sel.kind === 'autogroup' && d.sel.name === 'self') {
          for (const [userId, devices] of tn.untaggedByUser) {
            if (!devices.some((i) => this.srcNodes[k].has(i))) continue;
            for (const i of devices) tokens[i].push(`s${k}:${userId}`);
          }
        } else {
          for (const i of r.devices(d).toArray()) tokens[i].push(`r${k}`);
        }
      }
    });
    for (let i = 0; i < tn.n; i++) {
      const uniq = [...new Set(tokens[i])];
      const key = uniq.join(',');
      this.keyOf[i] = key;
      if (this.policies.has(key)) continue;
      const matches: SSHMatch[] = uniq.map((t) =>
        t.startsWith('s') ? { rule: Number(t.slice(1).split(':')[0]), selfUser: Number(t.split(':')[1]) } : { rule: Number(t.slice(1)), selfUser: null },
      );
      matches.sort((a, b) => a.rule - b.rule);
      const rules = matches.flatMap((m) => this.rules(m));
      const policy = rules.length > 0 ? { rules } : null;
      const text = JSON.stringify(policy, (k, v) => (k === 'principals' ? this.principalHash.get(v) : v));
      this.policies.set(key, { policy, hash: hash(text), matches });
    }
  }

  /** Addresses of the given source devices, as principals (cached: many nodes share them). */
  private principals(key: string, nodes: () => Iterable<number>): SSHPrincipal[] {
    const cached = this.principalCache.get(key);
    if (cached) return cached;
    const tn = this.r.tn;
    const out: SSHPrincipal[] = [];
    for (const i of nodes()) {
      if (tn.v4Text[i]) out.push({ nodeIP: tn.v4Text[i] });
      if (tn.v6Text[i]) out.push({ nodeIP: tn.v6Text[i] });
    }
    Object.freeze(out);
    this.principalCache.set(key, out);
    this.principalHash.set(out, this.hash(out.map((p) => p.nodeIP).join(',')));
    return out;
  }

  private rules(m: SSHMatch): SSHRule[] {
    const rule = this.model.ssh[m.rule];
    const tn = this.r.tn;
    const src = this.srcNodes[m.rule];
    const sources = (): number[] => (m.selfUser === null ? [...src.toArray()] : (tn.untaggedByUser.get(m.selfUser) ?? []).filter((i) => src.has(i)));
    const out: SSHRule[] = [];
    const withEnv = (r: SSHRule): SSHRule => (rule.acceptEnv.length > 0 ? { ...r, acceptEnv: rule.acceptEnv } : r);
    const u = rule.users;
    if (u.root || u.nonroot || u.named.length > 0) {
      const principals = this.principals(`${m.rule}:${m.selfUser}`, sources);
      if (principals.length > 0) out.push(withEnv({ principals, sshUsers: this.usersMaps[m.rule], action: ACCEPT }));
    }
    // localpart:*@<domain>: each source user with an address in the domain logs in as its local part.
    for (const domain of u.localpartDomains) {
      const byUser = new Map<number, number[]>();
      for (const i of sources()) {
        if (tn.tagged[i]) continue;
        const list = byUser.get(tn.nodes[i].userId) ?? [];
        list.push(i);
        byUser.set(tn.nodes[i].userId, list);
      }
      for (const [userId, devices] of [...byUser].sort((a, b) => a[0] - b[0])) {
        const email = tn.users.get(userId)?.email?.toLowerCase();
        if (!email?.endsWith(`@${domain}`)) continue;
        const local = email.slice(0, email.length - domain.length - 1);
        const principals = this.principals(`${m.rule}:${m.selfUser}:lp:${userId}`, () => devices);
        out.push(withEnv({ principals, sshUsers: { [local]: local }, action: ACCEPT }));
      }
    }
    return out;
  }

  policyFor(i: number): SSHPolicy | null {
    return this.policies.get(this.keyOf[i])!.policy;
  }

  hashFor(i: number): string {
    return this.policies.get(this.keyOf[i])!.hash;
  }

  /** Is the node a destination of any ssh rule (and so needs the SSH capability)? */
  isDestination(i: number): boolean {
    return this.keyOf[i] !== '';
  }

  /** The ssh rules that target the node, for the machine page. */
  rulesFor(i: number): SSHMatch[] {
    return this.policies.get(this.keyOf[i])!.matches;
  }
}
