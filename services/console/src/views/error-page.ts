// Error pages: a title, a sentence saying what happened and what to do, and a way back. Never a stack trace.
import { html } from './html.ts';
import { page, type Viewer } from './layout.ts';

export function errorPage(status: number, title: string, message: string, viewer?: Viewer | null, action?: { href: string; label: string }): string {
  const back = action ?? (viewer ? { href: '/console', label: 'Back to the console' } : { href: '/console/login', label: 'Go to sign-in' });
  return page({
    title,
    viewer,
    bodyClass: viewer ? '' : 'centered',
    body: html`<section class="card narrow error" role="alert">
  <p class="status">${status}</p>
  <h1>${title}</h1>
  <p>${message}</p>
  <p><a class="button" href="${back.href}">${back.label}</a></p>
</section>`,
  });
}
