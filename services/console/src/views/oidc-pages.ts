// The pages of sign-in with the identity provider, for people who are not (necessarily) signed in to the console:
//   the device page    /console/register/<auth id>: the device that asked, and the button that signs in to add it;
//   device added       after the provider: which machine it became, that `tailscale up` finishes by itself;
//   device refused     after the provider: why this person may not add devices (the device stays waiting);
//   no console access  after the provider: signed in, but the groups give no console role.
import type { NodeView, PendingAuth } from '../../../../shared/model.ts';
import { ago, clientVersionFull, osLabel, shortKey, utc } from './format.ts';
import { html, type Html } from './html.ts';
import { page } from './layout.ts';
import { commandBox } from './parts.ts';

function deviceFacts(p: PendingAuth): Html {
  const os = osLabel(p.hostinfo);
  return html`<div class="device-head">
  <span class="device-icon large" aria-hidden="true"></span>
  <div>
    <p class="device-name" id="device-name">${p.hostname || 'unnamed device'}</p>
    <p class="muted">${os || 'OS not reported'}</p>
  </div>
</div>
<dl class="facts-list compact">
  <div class="fact"><dt>Asked from</dt><dd class="mono" id="device-ip">${p.ip || 'unknown address'}</dd></div>
  <div class="fact"><dt>Asked at</dt><dd><span title="${utc(p.created)}">${utc(p.created)}</span> <span class="muted">(${ago(p.created)})</span></dd></div>
  <div class="fact"><dt>Client version</dt><dd>${clientVersionFull(p.hostinfo) || '—'}</dd></div>
  <div class="fact"><dt>Machine key</dt><dd class="mono" title="${p.machineKey}">${shortKey(p.machineKey)}</dd></div>
</dl>`;
}

function card(title: string, body: Html, id: string): string {
  return page({
    title,
    bodyClass: 'centered',
    body: html`<section class="card register" id="${id}">
  <p class="eyebrow">Device login</p>
  ${body}
</section>`,
  });
}

export interface DeviceSignInView {
  pending: PendingAuth;
  provider: string;
  /** The sign-in form's CSRF token (security/csrf.ts loginToken). */
  csrf: string;
  /** Why the provider cannot be used right now, or null. */
  unavailable: string | null;
  /** Operator approval is switched on: where an administrator approves by hand. */
  approvalHref: string | null;
}

export function deviceSignInPage(v: DeviceSignInView): string {
  const p = v.pending;
  return card(
    'Add a device',
    html`<h1>Add this device to the tailnet</h1>
  <p>Only continue if you started <code>tailscale up</code> on this device yourself: it will be yours, reachable as you and with your access.</p>
  ${deviceFacts(p)}
  ${v.unavailable ? html`<p class="alert" role="alert" id="provider-unavailable">Sign-in with ${v.provider} is not available right now: ${v.unavailable}. Try again in a minute.</p>` : ''}
  <form method="post" action="/console/oidc/device/${p.authId}" class="stack" id="device-signin-form">
    <input type="hidden" name="csrf" value="${v.csrf}">
    <button type="submit" class="button primary" id="device-signin"${v.unavailable ? html` disabled` : ''}>Sign in with ${v.provider} to add it</button>
  </form>
  ${v.approvalHref ? html`<p class="hint">Administrators can also <a href="${v.approvalHref}">approve it by hand in the console</a>.</p>` : ''}`,
    'device-signin-page',
  );
}

export function deviceAddedPage(node: NodeView, who: string): string {
  return card(
    'Device added',
    html`<div class="outcome ok" id="outcome" data-status="approved">
  <h1>Device added</h1>
  <p><strong id="added-name">${node.givenName}</strong> joined the tailnet as <strong id="added-user">${node.user}</strong>'s device (signed in as ${who}), with address <span class="mono">${node.ipv4}</span>.</p>
  <p><code>tailscale up</code> on the device finishes by itself. You can close this page.</p>
</div>`,
    'device-added-page',
  );
}

export interface DeviceRefusedView {
  reason: string;
  who: string;
  pending: PendingAuth | null;
  authId: string;
  csrf: string;
  provider: string;
}

/** A button that starts the provider's sign-in again, asking for credentials: to try with another account. */
function anotherAccount(action: string, csrf: string, provider: string, next?: string): Html {
  return html`<form method="post" action="${action}" class="stack" id="another-account-form">
    <input type="hidden" name="csrf" value="${csrf}">
    <input type="hidden" name="another" value="1">
    ${next ? html`<input type="hidden" name="next" value="${next}">` : ''}
    <button type="submit" class="button" id="another-account">Sign in to ${provider} as someone else</button>
  </form>`;
}

export function deviceRefusedPage(v: DeviceRefusedView): string {
  const p = v.pending;
  return card(
    'Device not added',
    html`<div class="outcome bad" id="outcome" data-status="refused">
  <h1>This device was not added</h1>
  <p>You signed in as <strong id="refused-who">${v.who}</strong>, but:</p>
  <p class="alert" role="alert" id="refused-reason">${v.reason}</p>
  <p>${p ? html`The device ${p.hostname ? html`<strong>${p.hostname}</strong> ` : ''}keeps waiting; someone who may add devices can open the same link.` : 'The device keeps waiting.'}</p>
</div>
${p?.status === 'pending' ? anotherAccount(`/console/oidc/device/${v.authId}`, v.csrf, v.provider) : ''}`,
    'device-refused-page',
  );
}

export function deviceDecidedPage(p: PendingAuth): string {
  const approved = p.status === 'approved';
  return card(
    approved ? 'Device already added' : 'Device rejected',
    html`<div class="outcome ${approved ? 'ok' : 'bad'}" id="outcome" data-status="${p.status}">
  <h1>${approved ? 'This device was already added' : 'This device was rejected'}</h1>
  <p>${approved ? html`${p.hostname || 'The device'} joined the tailnet${p.decidedBy ? html` (added by ${p.decidedBy})` : ''}.` : html`An administrator refused it${p.decidedBy ? html` (${p.decidedBy})` : ''}. Run <code>tailscale up</code> on the device again for a new link.`}</p>
</div>`,
    'device-decided-page',
  );
}

export function deviceLinkUnknownPage(publicOrigin: string): string {
  return page({
    title: 'Login link expired',
    bodyClass: 'centered',
    body: html`<section class="card register" role="alert" id="device-unknown-page">
  <p class="eyebrow">Device login</p>
  <h1>This login link is unknown or has expired</h1>
  <p>Links from <code>tailscale up</code> are valid for 30 minutes and only for the device that printed them. Run this on the device again; it prints a new link:</p>
  ${commandBox('cmd-again', `tailscale up --login-server=${publicOrigin}`)}
</section>`,
    scripts: ['copy.js'],
  });
}

export function noConsoleAccessPage(v: { who: string; provider: string; csrf: string; next: string }): string {
  return page({
    title: 'No console access',
    bodyClass: 'centered',
    body: html`<section class="card narrow error" role="alert" id="no-console-access">
  <p class="status">403</p>
  <h1>No console access</h1>
  <p>You signed in with ${v.provider} as <strong id="denied-who">${v.who}</strong>, but you are in none of the groups that may use this console, so you were not signed in. An administrator of ${v.provider} can add you to the console's administrator or auditor group.</p>
  ${anotherAccount('/console/oidc/login', v.csrf, v.provider, v.next)}
  <p><a class="button subtle" href="/console/login">Go to sign-in</a></p>
</section>`,
  });
}
