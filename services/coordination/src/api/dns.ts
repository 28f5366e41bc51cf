// DNS in Tailscale's API shape, mapped onto the one DNS document hse keeps (shared/dns-settings.ts): nameservers
// ({"dns": [...]}), search paths, split DNS (GET, PATCH merges, PUT replaces), preferences (MagicDNS), and the newer
// combined configuration. Every change goes through the admin route PUT /v1/dns, so it is validated, logged and sent to
// every device exactly as a change in the console is.
import { type DnsSettings, defaultDnsSettings } from '../../../../shared/dns-settings.ts';
import { HseError } from '../../../../shared/errors.ts';
import { type AdminCaller, type ApiCall, type ApiRoutes, jsonBody } from './api-kit.ts';

export function dnsRoutes(admin: AdminCaller): ApiRoutes {
  const get = (c: ApiCall) => admin<DnsSettings>('GET /v1/dns', c);
  const change = async (c: ApiCall, edit: (s: DnsSettings) => DnsSettings): Promise<DnsSettings> => {
    const next = edit({ ...defaultDnsSettings(), ...(await get(c)) });
    return admin<DnsSettings>('PUT /v1/dns', c, [], next as unknown as Record<string, unknown>);
  };
  const list = (b: Record<string, unknown>, k: string): string[] => {
    const v = b[k];
    if (!Array.isArray(v) || !v.every((x) => typeof x === 'string')) throw new HseError(400, `"${k}" must be a list of strings`);
    return v as string[];
  };
  const splitOf = (b: Record<string, unknown>, patch: boolean): Record<string, string[] | null> => {
    const out: Record<string, string[] | null> = {};
    for (const [domain, v] of Object.entries(b)) {
      if (v === null && patch) out[domain] = null;
      else if (Array.isArray(v) && v.every((x) => typeof x === 'string')) out[domain] = v as string[];
      else throw new HseError(400, `split DNS for "${domain}" must be a list of nameservers${patch ? ' (or null to remove it)' : ''}`);
    }
    return out;
  };
  const resolvers = (list: string[]) => list.map((address) => ({ address }));
  const addresses = (v: unknown, what: string): string[] => {
    if (v === undefined || v === null) return [];
    if (!Array.isArray(v)) throw new HseError(400, `"${what}" must be a list of {"address": "..."}`);
    return v.map((r) => {
      const a = (r as { address?: unknown })?.address;
      if (typeof a !== 'string') throw new HseError(400, `"${what}" entries are {"address": "..."}`);
      return a;
    });
  };

  return {
    'GET /api/v2/tailnet/:t/dns/nameservers': { handler: async (c) => ({ json: { dns: (await get(c)).nameservers } }) },
    'POST /api/v2/tailnet/:t/dns/nameservers': {
      handler: async (c) => {
        const dns = list(jsonBody(c), 'dns');
        const s = await change(c, (x) => ({ ...x, nameservers: dns }));
        return { json: { dns: s.nameservers, magicDNS: s.magicDNS } };
      },
    },
    'GET /api/v2/tailnet/:t/dns/searchpaths': { handler: async (c) => ({ json: { searchPaths: (await get(c)).searchDomains } }) },
    'POST /api/v2/tailnet/:t/dns/searchpaths': {
      handler: async (c) => {
        const paths = list(jsonBody(c), 'searchPaths');
        return { json: { searchPaths: (await change(c, (x) => ({ ...x, searchDomains: paths }))).searchDomains } };
      },
    },
    'GET /api/v2/tailnet/:t/dns/split-dns': { handler: async (c) => ({ json: (await get(c)).splitDNS }) },
    'PATCH /api/v2/tailnet/:t/dns/split-dns': {
      handler: async (c) => {
        const patch = splitOf(jsonBody(c), true);
        const s = await change(c, (x) => {
          const split = { ...x.splitDNS };
          for (const [domain, v] of Object.entries(patch)) {
            if (v === null) delete split[domain];
            else split[domain] = v;
          }
          return { ...x, splitDNS: split };
        });
        return { json: s.splitDNS };
      },
    },
    'PUT /api/v2/tailnet/:t/dns/split-dns': {
      handler: async (c) => {
        const split = splitOf(jsonBody(c), false) as Record<string, string[]>;
        return { json: (await change(c, (x) => ({ ...x, splitDNS: split }))).splitDNS };
      },
    },
    'GET /api/v2/tailnet/:t/dns/preferences': { handler: async (c) => ({ json: { magicDNS: (await get(c)).magicDNS } }) },
    'POST /api/v2/tailnet/:t/dns/preferences': {
      handler: async (c) => {
        const b = jsonBody(c);
        if (typeof b.magicDNS !== 'boolean') throw new HseError(400, '"magicDNS" must be true or false');
        return { json: { magicDNS: (await change(c, (x) => ({ ...x, magicDNS: b.magicDNS as boolean }))).magicDNS } };
      },
    },
    'GET /api/v2/tailnet/:t/dns/configuration': {
      handler: async (c) => {
        const s = await get(c);
        const split: Record<string, { address: string }[]> = {};
        for (const [domain, list] of Object.entries(s.splitDNS)) split[domain] = resolvers(list);
        return {
          json: {
            nameservers: resolvers(s.nameservers),
            splitDNS: split,
            searchPaths: s.searchDomains,
            preferences: { overrideLocalDNS: s.overrideLocalDNS, magicDNS: s.magicDNS },
          },
        };
      },
    },
    'POST /api/v2/tailnet/:t/dns/configuration': {
      // Replaces the whole configuration; what it does not name (hse's extra records) stays.
      handler: async (c) => {
        const b = jsonBody(c);
        const prefs = (b.preferences ?? {}) as Record<string, unknown>;
        const split: Record<string, string[]> = {};
        for (const [domain, v] of Object.entries((b.splitDNS ?? {}) as Record<string, unknown>)) split[domain] = addresses(v, `splitDNS.${domain}`);
        await change(c, (x) => ({
          ...x,
          nameservers: addresses(b.nameservers, 'nameservers'),
          splitDNS: split,
          searchDomains: b.searchPaths === undefined ? [] : list(b, 'searchPaths'),
          overrideLocalDNS: prefs.overrideLocalDNS === true,
          magicDNS: prefs.magicDNS === true,
        }));
        return {};
      },
    },
  };
}
