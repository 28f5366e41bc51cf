// "Who may reach this machine, on what", in words an operator reads on the console's machine page: one line per rule
// that admits traffic to the machine (or gives a capability, or lets someone log in over SSH).
import type { Reacher } from './compiled-policy.ts';
import type { Entry, SSHRuleModel, Unit } from './model.ts';
import { isAllPorts, type PortRange, portsText, protocolName } from './selectors.ts';
import type { SSHMatch } from './ssh.ts';
import type { TailnetIndex } from './tailnet-index.ts';

function protoWords(protos: number[] | null): string {
  return protos === null ? 'tcp/udp' : protos.map(protocolName).join('/');
}

function portWords(ports: PortRange[]): string {
  return isAllPorts(ports) ? 'every port' : portsText(ports).split(',').join(', ');
}

export function describeReachers(
  units: readonly Unit[],
  matched: { unit: number; entries: number[]; selfUser: number | null }[],
  ssh: SSHMatch[],
  sshRules: readonly SSHRuleModel[],
  lineOf: (offset: number) => number,
  tn: TailnetIndex,
  /** Whether an address destination (a CIDR or a host name) names the machine itself, not a subnet it routes into. */
  namesMachine: (entry: Entry) => boolean = () => true,
): Reacher[] {
  const out: Reacher[] = [];
  const add = (who: string, what: string, origin: string, offset: number) => {
    out.push({ who, what, origin, line: lineOf(offset), text: `${who} → ${what}` });
  };
  const userName = (id: number | null) => (id === null ? '' : (tn.users.get(id)?.name ?? String(id)));
  for (const m of matched) {
    const u = units[m.unit];
    const sources = u.src.map((s) => s.text).join(', ');
    const selfEntries = m.entries.filter((e) => u.entries[e].dst.text === 'autogroup:self');
    // A subnet destination that matched because this machine routes into it admits traffic through the machine, not
    // to it: said as such, one line per subnet.
    const throughEntries = m.entries.filter((e) => u.entries[e].dst.text !== 'autogroup:self' && !namesMachine(u.entries[e]));
    const otherEntries = m.entries.filter((e) => u.entries[e].dst.text !== 'autogroup:self' && namesMachine(u.entries[e]));
    const describe = (entries: number[]) => {
      if (u.caps) return `capability ${Object.keys(u.caps).join(', ')}`;
      const ports: PortRange[] = entries.flatMap((e) => u.entries[e].ports);
      const merged = ports.some((p) => p.first === 0 && p.last === 65535) ? [{ first: 0, last: 65535 }] : ports;
      if (u.protos && !u.protos.some((p) => p === 6 || p === 17 || p === 132)) return protoWords(u.protos);
      return `${protoWords(u.protos)} ${portWords(merged)}`;
    };
    if (otherEntries.length > 0) add(sources, describe(otherEntries), u.origin, u.offset);
    for (const e of throughEntries) add(sources, `${describe([e])} into ${u.entries[e].dst.text} (through this machine's route)`, u.origin, u.offset);
    if (selfEntries.length > 0) add(`${userName(m.selfUser)}@'s own devices (autogroup:self)`, describe(selfEntries), u.origin, u.offset);
  }
  for (const s of ssh) {
    const r = sshRules[s.rule];
    const users = [
      ...(r.users.root ? ['root'] : []),
      ...r.users.named,
      ...(r.users.nonroot ? ['any user but root'] : []),
      ...r.users.localpartDomains.map((d) => `their own name (@${d})`),
    ];
    const who = s.selfUser === null ? r.src.map((x) => x.text).join(', ') : `${userName(s.selfUser)}@'s own devices (autogroup:self)`;
    add(who, `ssh as ${users.join(', ')}`, r.origin, r.offset);
  }
  return out;
}
