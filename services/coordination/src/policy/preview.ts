// "Preview rule matches" (Tailscale's API: POST /tailnet/-/acl/preview?type=…&previewFor=…): which access rules of a
// policy text apply to a user (type "user": rules with the user among the sources) or to a destination address and
// port (type "ipport", "100.64.0.7:22": rules whose destinations cover that device's address and port). Pure: text
// and a tailnet snapshot in, the matching rules with their sources, destinations and line out.
import { parseAddr } from './ip.ts';
import { ModelBuilder, type Sel, type Unit } from './model.ts';
import { parsePolicyText } from './parse.ts';
import { Resolver } from './resolve.ts';
import type { PortRange } from './selectors.ts';
import { TailnetIndex } from './tailnet-index.ts';
import type { PolicyError, TailnetSnapshot } from './index.ts';

export interface PreviewMatch {
  /** The rule's sources as written. */
  users: string[];
  /** Its destinations as "selector:ports". */
  ports: string[];
  lineNumber: number;
}

export type PreviewResult = { ok: true; matches: PreviewMatch[] } | { ok: false; errors: PolicyError[] };

function portsText(ports: PortRange[]): string {
  if (ports.length === 1 && ports[0].first === 0 && ports[0].last === 65535) return '*';
  return ports.map((p) => (p.first === p.last ? String(p.first) : `${p.first}-${p.last}`)).join(',');
}

export function previewRules(text: string, snapshot: TailnetSnapshot, type: 'user' | 'ipport', previewFor: string): PreviewResult {
  const { policy, sink } = parsePolicyText(text);
  if (!policy) return { ok: false, errors: sink.errors };
  const model = new ModelBuilder(policy, sink, snapshot.users, false).build();
  if (sink.errors.length > 0) return { ok: false, errors: sink.errors };
  const tn = new TailnetIndex(snapshot);
  const r = new Resolver(model, tn);
  const line = (u: Unit) => sink.lines.position(u.offset).line;
  const match = (u: Unit): PreviewMatch => ({
    users: u.src.map((s) => s.text),
    ports: u.entries.map((e) => `${e.dst.text}:${portsText(e.ports)}`),
    lineNumber: line(u),
  });
  const units = model.units.filter((u) => u.caps === null);

  if (type === 'user') {
    const who = previewFor.toLowerCase().replace(/@$/, '');
    const user = snapshot.users.find((x) => x.name === who || x.email?.toLowerCase() === who);
    if (!user) return { ok: true, matches: [] };
    const isSource = (s: Sel): boolean => {
      if (s.sel.kind === 'all') return true;
      if (s.sel.kind === 'autogroup') return s.sel.name === 'member';
      return r.userIdsOf(s).includes(user.id);
    };
    return { ok: true, matches: units.filter((u) => u.src.some(isSource)).map(match) };
  }

  // "ip:port" ("[v6]:port" for IPv6): rules reaching the device holding that address on that port.
  const m = /^\[?([0-9a-fA-F:.]+?)\]?:(\d{1,5})$/.exec(previewFor.trim());
  const addr = m ? parseAddr(m[1]) : null;
  if (!m || !addr) return { ok: true, matches: [] };
  const port = Number(m[2]);
  const ip = m[1].toLowerCase();
  const index = snapshot.nodes.findIndex((n) => n.ipv4 === ip || n.ipv6.toLowerCase() === ip);
  if (index === -1) return { ok: true, matches: [] };
  const at = tn.indexOf.get(snapshot.nodes[index].id);
  if (at === undefined) return { ok: true, matches: [] };
  const covers = (u: Unit) => u.entries.some((e) => r.nodes(e.dst).has(at) && e.ports.some((p) => p.first <= port && port <= p.last));
  return { ok: true, matches: units.filter(covers).map(match) };
}
