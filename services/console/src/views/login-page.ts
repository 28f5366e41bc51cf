// The sign-in page. Plain form fields named username and password with the usual autocomplete hints, posting to the
// same path, so password managers fill it and scripts can post to it. With an identity provider configured, a
// "Sign in with <provider>" button above them (a form posting to /console/oidc/login), or alone when the operator
// switched passwords off.
import { html, type Html } from './html.ts';
import { page } from './layout.ts';

/** The ways to sign in this console offers. */
export interface SignInChoices {
  passwords: boolean;
  /** The identity provider's button; null without one. */
  provider: { name: string } | null;
}

export const PASSWORDS_ONLY: SignInChoices = { passwords: true, provider: null };

export interface LoginView {
  csrf: string;
  next: string;
  username?: string;
  /** Error shown above the form (wrong credentials, rate limited). */
  error?: string;
  /** Neutral notice (signed out, session ended). */
  notice?: string;
  /** When set, the form is disabled and says until when. */
  retryAt?: Date;
  choices?: SignInChoices;
}

function providerButton(v: LoginView, name: string): Html {
  return html`<form method="post" action="/console/oidc/login" class="stack" id="oidc-form">
    <input type="hidden" name="csrf" value="${v.csrf}">
    <input type="hidden" name="next" value="${v.next}">
    <button type="submit" class="button primary" id="oidc-signin">Sign in with ${name}</button>
  </form>`;
}

function hhmm(d: Date): string {
  return d.toISOString().slice(11, 19);
}

function passwordForm(v: LoginView, blocked: boolean): Html {
  return html`<form method="post" action="/console/login" class="stack">
    <input type="hidden" name="csrf" value="${v.csrf}">
    <input type="hidden" name="next" value="${v.next}">
    <label>User name
      <input name="username" id="username" autocomplete="username" autocapitalize="none" autocorrect="off" spellcheck="false" required maxlength="64" value="${v.username ?? ''}"${v.username ? '' : html` autofocus`}>
    </label>
    <label>Password
      <input name="password" id="password" type="password" autocomplete="current-password" required maxlength="1024"${v.username ? html` autofocus` : ''}>
    </label>
    <button type="submit" class="button${v.choices?.provider ? '' : ' primary'}"${blocked ? html` disabled` : ''}>Sign in</button>
  </form>`;
}

export function loginPage(v: LoginView): string {
  const blocked = v.retryAt !== undefined;
  const { passwords, provider } = v.choices ?? PASSWORDS_ONLY;
  return page({
    title: 'Sign in',
    bodyClass: 'centered',
    body: html`<section class="card narrow signin">
  <h1>Sign in to the console</h1>
  ${v.notice ? html`<p class="notice" role="status">${v.notice}</p>` : ''}
  ${v.error ? html`<p class="alert" role="alert">${v.error}</p>` : ''}
  ${blocked ? html`<p class="muted">You can try again at <time datetime="${v.retryAt!.toISOString()}">${hhmm(v.retryAt!)} UTC</time>, then <a href="/console/login">open the sign-in page again</a>.</p>` : ''}
  ${provider ? providerButton(v, provider.name) : ''}
  ${provider && passwords ? html`<p class="muted or">or with a console password</p>` : ''}
  ${passwords ? passwordForm(v, blocked) : ''}
</section>`,
  });
}

/** The 429 page: why, from which address, and when to retry. */
export function rateLimitedPage(v: { csrf: string; next: string; ip: string; retryAfter: number; username?: string; choices?: SignInChoices }): string {
  const minutes = Math.ceil(v.retryAfter / 60);
  return loginPage({
    choices: v.choices,
    csrf: v.csrf,
    next: v.next,
    username: v.username,
    retryAt: new Date(Date.now() + v.retryAfter * 1000),
    error: `Too many failed sign-ins from your address (${v.ip || 'unknown'}). Sign-in from this address is paused for ${minutes} more minute${minutes === 1 ? '' : 's'}.`,
  });
}

/** The 429 page when the account is locked against the client's network (auth/account-throttle.ts). */
export function accountLockedPage(v: { csrf: string; next: string; retryAfter: number; username: string; choices?: SignInChoices }): string {
  const minutes = Math.ceil(v.retryAfter / 60);
  return loginPage({
    csrf: v.csrf,
    next: v.next,
    username: v.username,
    choices: v.choices,
    retryAt: new Date(Date.now() + v.retryAfter * 1000),
    error: `Too many failed sign-ins for "${v.username}" from many addresses, yours among them: sign-in to this account from your network is paused for ${minutes} more minute${minutes === 1 ? '' : 's'}. From a network that has not failed it still works.`,
  });
}
