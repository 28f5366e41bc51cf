// The DNSConfig every node gets, from the tailnet's DNS settings (shared/dns-settings.ts) and HSE_BASE_DOMAIN. A pure
// function: the map hub builds it once per change and sends the same object to every stream.
//
// How a v1.102 client reads each field (tailscale ipn/ipnlocal/node_backend.go dnsConfigForNetmap):
// - MagicDNS (`Proxied`): the client routes its own name's suffix to quad-100 itself; the base domain is also sent as
//   an empty-list route, as Tailscale's own control server sends its tailnet suffix, which makes quad-100
//   authoritative for it (names it does not know get NXDOMAIN instead of leaking to the LAN's resolver).
// - "override local DNS": the global nameservers become `Resolvers` (every query goes through them). Off, they are
//   sent as `FallbackResolvers`, which leaves the device's own resolvers in charge: v1.102 uses fallbacks only when an
//   exit node that cannot proxy DNS is selected (headscale's dnsToTailcfgDNS does the same).
// - Split DNS: one route per domain, with its nameservers.
// - Search domains: the base domain first while MagicDNS is on (short names of machines resolve), then the
//   operator's.
// - Extra records: into quad-100's host table, for any name.
import type { DnsSettings } from '../../../../shared/dns-settings.ts';
import type { DNSConfig, DNSResolver } from '../tailcfg/tailcfg.ts';

const resolvers = (addrs: string[]): DNSResolver[] => addrs.map((Addr) => ({ Addr }));

export function buildDnsConfig(s: DnsSettings, baseDomain: string): DNSConfig {
  const routes: Record<string, DNSResolver[]> = {};
  if (s.magicDNS) routes[`${baseDomain}.`] = [];
  for (const [domain, servers] of Object.entries(s.splitDNS)) routes[`${domain}.`] = resolvers(servers);
  const domains = s.magicDNS ? [baseDomain] : [];
  for (const d of s.searchDomains) if (!domains.includes(d)) domains.push(d);

  const out: DNSConfig = {};
  if (s.nameservers.length > 0) {
    if (s.overrideLocalDNS) out.Resolvers = resolvers(s.nameservers);
    else out.FallbackResolvers = resolvers(s.nameservers);
  }
  if (Object.keys(routes).length > 0) out.Routes = routes;
  if (domains.length > 0) out.Domains = domains;
  out.Proxied = s.magicDNS;
  if (s.extraRecords.length > 0) out.ExtraRecords = s.extraRecords.map((r) => ({ Name: r.name, Type: r.type, Value: r.value }));
  return out;
}
