// DNS: what every device's Tailscale resolver is told — MagicDNS, global nameservers and whether they override the
// device's own, split DNS, search domains, extra records. Everyone signed in sees the settings in force; an
// administrator also gets the form to change them (network/dns-form.ts reads it; the coordination service checks it
// and sends the result to every connected device).
import type { DnsSettings } from '../../../../shared/dns-settings.ts';
import { settingsToForm, type DnsFormText } from '../network/dns-form.ts';
import type { Flash } from '../request/flash.ts';
import { html, type Html } from './html.ts';
import { page, type Viewer } from './layout.ts';
import { csrfField, errorBanner, flashBanner, pageHead, readOnlyNote } from './parts.ts';

export interface DnsView {
  viewer: Viewer;
  settings: DnsSettings;
  baseDomain: string;
  flash?: Flash | null;
  error?: string | null;
  /** What the form held when a change was refused, so nothing has to be typed again. */
  draft?: DnsFormText;
}

function row(label: string, value: Html | string): Html {
  return html`<div class="fact"><dt>${label}</dt><dd>${value}</dd></div>`;
}

const mono = (items: string[]): Html => html`${items.map((s, i) => html`${i ? ', ' : ''}<span class="mono">${s}</span>`)}`;

/** The settings in force, in words. */
function current(s: DnsSettings, baseDomain: string): Html {
  const splits = Object.entries(s.splitDNS);
  return html`<section class="card facts" id="dns-current">
  <h2>In force</h2>
  <dl class="facts-list">
    ${row('MagicDNS', s.magicDNS ? html`<span class="badge good">on</span> <span class="sub">devices reach each other as <span class="mono">&lt;name&gt;.${baseDomain}</span></span>` : html`<span class="badge plain">off</span>`)}
    ${row(
      'Global nameservers',
      s.nameservers.length === 0
        ? html`<span class="muted">none — devices keep their own resolvers</span>`
        : html`${mono(s.nameservers)}<span class="sub">${s.overrideLocalDNS ? 'override local DNS: every query goes to these' : 'local DNS stays in charge; these are the fallback'}</span>`,
    )}
    ${row(
      'Split DNS',
      splits.length === 0
        ? html`<span class="muted">none</span>`
        : html`<ul class="dns-list" id="dns-split">${splits.map(([d, servers]) => html`<li><span class="mono">${d}</span> → ${mono(servers)}</li>`)}</ul>`,
    )}
    ${row('Search domains', s.magicDNS || s.searchDomains.length ? mono([...(s.magicDNS ? [baseDomain] : []), ...s.searchDomains.filter((d) => d !== baseDomain)]) : html`<span class="muted">none</span>`)}
    ${row(
      'Extra records',
      s.extraRecords.length === 0
        ? html`<span class="muted">none</span>`
        : html`<ul class="dns-list" id="dns-records">${s.extraRecords.map((r) => html`<li><span class="mono">${r.name}</span> ${r.type} <span class="mono">${r.value}</span></li>`)}</ul>`,
    )}
  </dl>
</section>`;
}

function area(name: string, label: string, value: string, hint: Html | string, placeholder: string): Html {
  return html`<label>${label}
    <textarea name="${name}" rows="4" autocomplete="off" autocapitalize="none" spellcheck="false" placeholder="${placeholder}">${value}</textarea>
    <span class="hint">${hint}</span>
  </label>`;
}

function editForm(v: DnsView, f: DnsFormText): Html {
  return html`<form method="post" action="/console/dns" class="card create-form dns-form" id="dns-form">
  ${csrfField(v.viewer)}
  <h2>Change</h2>
  <div class="checks">
    <label class="check"><input type="checkbox" name="magicDNS" value="1"${f.magicDNS ? html` checked` : ''}><span><strong>MagicDNS</strong><span class="hint">devices resolve each other's names under ${v.baseDomain}</span></span></label>
    <label class="check"><input type="checkbox" name="overrideLocalDNS" value="1"${f.overrideLocalDNS ? html` checked` : ''}><span><strong>Override local DNS</strong><span class="hint">send every query to the global nameservers instead of the device's own resolvers</span></span></label>
  </div>
  <div class="dns-fields">
    ${area('nameservers', 'Global nameservers', f.nameservers, html`One per line: an IPv4 or IPv6 address, <span class="mono">IP:port</span>, or a DNS-over-HTTPS URL of a provider the Tailscale client knows (Google, Cloudflare, Quad9, NextDNS, …).`, '1.1.1.1\n2606:4700:4700::1111')}
    ${area('splitDNS', 'Split DNS', f.splitDNS, html`One domain per line, followed by its nameservers. Not ${v.baseDomain} or under it: MagicDNS answers those.`, 'corp.example.com 10.0.0.53 10.0.0.54')}
    ${area('searchDomains', 'Search domains', f.searchDomains, html`One per line. ${v.baseDomain} comes first by itself while MagicDNS is on.`, 'corp.example.com')}
    ${area('extraRecords', 'Extra records', f.extraRecords, html`One per line: name, <span class="mono">A</span> or <span class="mono">AAAA</span>, address. Any name, also outside ${v.baseDomain}.`, `grafana.${v.baseDomain} A 100.64.0.7`)}
  </div>
  <button type="submit" class="button primary">Save DNS settings</button>
  <p class="hint">Connected devices get the change within a second, without a restart. From a shell: <code>hse dns get</code>, <code>hse dns set settings.json</code>.</p>
</form>`;
}

export function dnsPage(v: DnsView): string {
  return page({
    title: 'DNS',
    viewer: v.viewer,
    active: 'dns',
    body: html`${pageHead({ title: 'DNS', subtitle: "What every device's Tailscale resolver is told." })}
${flashBanner(v.flash)}
${errorBanner(v.error)}
<div class="detail-grid">
  ${current(v.settings, v.baseDomain)}
  ${v.viewer.role === 'admin' ? editForm(v, v.draft ?? settingsToForm(v.settings)) : html`<section class="card manage">${readOnlyNote('the DNS settings')}</section>`}
</div>`,
  });
}
