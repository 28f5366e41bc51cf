// Evaluates FilterRules for one incoming packet the way the receiving Tailscale client does, so "may A reach B" is
// answered from exactly what B is sent.
//
// Reference: tailscale wgengine/filter (tailcfg.go MatchesFromFilterRules, filter.go runIn4/runIn6, match.go):
//   - IPProto empty = TCP, UDP, ICMPv4, ICMPv6; numbers outside 0-255 are ignored;
//   - rules are split by address family; a rule counts for a family when it has sources and destinations in it;
//   - TCP SYN, UDP and SCTP: protocol listed, source in SrcIPs, destination address and port in a DstPorts entry;
//   - ICMP echo: any rule whose sources and destinations match admits it, whatever its protocols and ports
//     ("if any port is open to an IP, allow ICMP to it");
//   - other protocols: protocol listed and a matching destination entry covering every port;
//   - rules with CapGrant (no DstPorts) grant capabilities, not packets.
// The client also drops packets to addresses that are not its own or its advertised routes before these rules run;
// callers only ask about a node's own addresses.
import type { FilterRule } from '../tailcfg/tailcfg.ts';
import { type Family, type Interval, parseFilterEntry } from './ip.ts';

const DEFAULT_PROTOS = [6, 17, 1, 58];
const ICMP4 = 1;
const ICMP6 = 58;

interface Match {
  protos: number[];
  srcs: Interval[];
  dsts: { iv: Interval; first: number; last: number }[];
}

export class FilterMatcher {
  private readonly byFamily: Record<Family, Match[]> = { 4: [], 6: [] };

  constructor(rules: readonly FilterRule[]) {
    for (const r of rules) {
      if (!r.DstPorts || r.DstPorts.length === 0) continue;
      const protos = r.IPProto && r.IPProto.length > 0 ? r.IPProto.filter((n) => n >= 0 && n <= 255) : DEFAULT_PROTOS;
      const srcs = r.SrcIPs.flatMap((s) => parseFilterEntry(s) ?? []);
      const dsts = r.DstPorts.flatMap((d) => (parseFilterEntry(d.IP) ?? []).map((iv) => ({ iv, first: d.Ports.First, last: d.Ports.Last })));
      for (const family of [4, 6] as const) {
        const m: Match = { protos, srcs: srcs.filter((s) => s.family === family), dsts: dsts.filter((d) => d.iv.family === family) };
        if (m.srcs.length > 0 && m.dsts.length > 0) this.byFamily[family].push(m);
      }
    }
  }

  /** Is a new connection (TCP SYN, a UDP datagram, an ICMP echo request, …) from src to dst:port admitted? */
  admits(family: Family, src: bigint, dst: bigint, proto: number, port: number): boolean {
    const inSrc = (m: Match) => m.srcs.some((s) => s.lo <= src && src <= s.hi);
    const dstOk = (d: Match['dsts'][number]) => d.iv.lo <= dst && dst <= d.iv.hi;
    const ms = this.byFamily[family];
    if ((family === 4 && proto === ICMP4) || (family === 6 && proto === ICMP6)) {
      return ms.some((m) => inSrc(m) && m.dsts.some(dstOk));
    }
    if (proto === 6 || proto === 17 || proto === 132) {
      return ms.some((m) => m.protos.includes(proto) && inSrc(m) && m.dsts.some((d) => dstOk(d) && port >= d.first && port <= d.last));
    }
    return ms.some((m) => m.protos.includes(proto) && inSrc(m) && m.dsts.some((d) => dstOk(d) && d.first === 0 && d.last === 65535));
  }
}
