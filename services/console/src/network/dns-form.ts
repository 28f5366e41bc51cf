// The DNS page's form, both ways: DNS settings as the text the form shows (one entry per line), and the posted form as
// the settings document the admin API checks (shared/dns-settings.ts validateDnsSettings, the one place rules live).
// Only the line layout is checked here; what an entry means (an address, a domain) is the admin API's to judge.
//   nameservers      one per line:                 1.1.1.1 | 10.0.0.53:5353 | https://dns.google/dns-query
//   split DNS        a domain, then nameservers:   corp.example.com 10.0.0.53 10.0.0.54
//   search domains   one per line (or spaces):     corp.example.com
//   extra records    name, optional type, value:   grafana.hse.internal A 100.64.0.7
import type { DnsSettings } from '../../../../shared/dns-settings.ts';
import { field } from '../request/form-body.ts';
import { FormProblem } from '../request/form-route.ts';

/** The form's text fields, as typed (kept to show again when a change is refused). */
export interface DnsFormText {
  magicDNS: boolean;
  overrideLocalDNS: boolean;
  nameservers: string;
  splitDNS: string;
  searchDomains: string;
  extraRecords: string;
}

export function settingsToForm(s: DnsSettings): DnsFormText {
  return {
    magicDNS: s.magicDNS,
    overrideLocalDNS: s.overrideLocalDNS,
    nameservers: s.nameservers.join('\n'),
    splitDNS: Object.entries(s.splitDNS)
      .map(([domain, servers]) => `${domain} ${servers.join(' ')}`)
      .join('\n'),
    searchDomains: s.searchDomains.join('\n'),
    extraRecords: s.extraRecords.map((r) => `${r.name} ${r.type} ${r.value}`).join('\n'),
  };
}

export function readDnsForm(form: URLSearchParams): DnsFormText {
  return {
    magicDNS: field(form, 'magicDNS') === '1',
    overrideLocalDNS: field(form, 'overrideLocalDNS') === '1',
    nameservers: field(form, 'nameservers'),
    splitDNS: field(form, 'splitDNS'),
    searchDomains: field(form, 'searchDomains'),
    extraRecords: field(form, 'extraRecords'),
  };
}

/** Non-empty lines, each split into words (spaces, tabs or commas between them). */
function lines(text: string): string[][] {
  return text
    .split(/\r?\n/)
    .map((l) => l.split(/[\s,]+/).filter(Boolean))
    .filter((words) => words.length > 0);
}

/** The settings document for the admin API. Throws FormProblem when a line has the wrong number of words. */
export function formToSettings(f: DnsFormText): Record<string, unknown> {
  const splitDNS: Record<string, string[]> = {};
  lines(f.splitDNS).forEach((words, i) => {
    if (words.length < 2) {
      throw new FormProblem(
        `Split DNS, entry ${i + 1} ("${words.join(' ')}"): write the domain followed by its nameservers, e.g. "corp.example.com 10.0.0.53".`,
      );
    }
    const [domain, ...servers] = words;
    const key = domain.toLowerCase().replace(/\.$/, '');
    if (splitDNS[key]) throw new FormProblem(`Split DNS: "${key}" is listed twice; put all its nameservers on one line.`);
    splitDNS[key] = servers;
  });
  const extraRecords = lines(f.extraRecords).map((words, i) => {
    if (words.length === 2) return { name: words[0], value: words[1] };
    if (words.length === 3) return { name: words[0], type: words[1], value: words[2] };
    throw new FormProblem(
      `Extra records, entry ${i + 1} ("${words.join(' ')}"): write the name, optionally A or AAAA, then the address, e.g. "grafana.example.com A 100.64.0.7".`,
    );
  });
  return {
    magicDNS: f.magicDNS,
    overrideLocalDNS: f.overrideLocalDNS,
    nameservers: lines(f.nameservers).flat(),
    splitDNS,
    searchDomains: lines(f.searchDomains).flat(),
    extraRecords,
  };
}
