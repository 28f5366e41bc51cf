// The page frame every console page shares: header with the product name and the navigation, the signed-in account
// with its sign-out button, and the content. Assets are files under /console/static (no inline script or style, as
// the CSP demands), with a content hash in the URL so browsers may cache them for good.
import { assetUrl } from '../static-files.ts';
import { html, type Html } from './html.ts';
import { SECTIONS } from './nav.ts';

export interface Viewer {
  username: string;
  role: 'admin' | 'auditor';
  csrf: string;
}

export interface PageOptions {
  title: string;
  body: Html;
  viewer?: Viewer | null;
  /** Section id to highlight. */
  active?: string;
  scripts?: string[];
  /** Extra class on <body>, e.g. "centered" for the sign-in page. */
  bodyClass?: string;
}

function navigation(viewer: Viewer, active: string | undefined): Html {
  const items = SECTIONS.filter((s) => s.ready && (!s.roles || s.roles.includes(viewer.role)));
  return html`<nav class="nav" aria-label="Sections"><ul>${items.map(
    (s) => html`<li><a href="${s.href}"${s.id === active ? html` aria-current="page"` : ''}>${s.label}</a></li>`,
  )}</ul></nav>`;
}

function accountMenu(viewer: Viewer): Html {
  return html`<div class="account">
      <a class="who" href="/console/account" title="Signed in as ${viewer.username} (${viewer.role}) — my account and password"><span class="avatar" aria-hidden="true">${viewer.username.slice(0, 1).toUpperCase()}</span><span class="name">${viewer.username}</span><span class="role">${viewer.role}</span></a>
      <form method="post" action="/console/logout" class="signout">
        <input type="hidden" name="csrf" value="${viewer.csrf}">
        <button type="submit" class="button subtle">Sign out</button>
      </form>
    </div>`;
}

export function page(o: PageOptions): string {
  const viewer = o.viewer ?? null;
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<title>${o.title} · hse console</title>
<link rel="icon" href="${assetUrl('icon.svg')}" type="image/svg+xml">
<link rel="stylesheet" href="${assetUrl('console.css')}">
${(o.scripts ?? []).map((s) => html`<script src="${assetUrl(s)}" defer></script>`)}
</head>
<body class="${o.bodyClass ?? ''}">
<header class="topbar">
  <a class="brand" href="/console"><img src="${assetUrl('icon.svg')}" alt="" width="24" height="24"><span>hse</span></a>
  ${viewer ? navigation(viewer, o.active) : ''}
  ${viewer ? accountMenu(viewer) : ''}
</header>
<main class="content">
${o.body}
</main>
</body>
</html>
`.value;
}
