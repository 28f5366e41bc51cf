// The paths that start a sign-in with the identity provider. They have no session yet and check the sign-in form's
// token themselves, so the app-wide CSRF guard (auth/require-session.ts) lets them through like the sign-in form.

export function isProviderSignInStart(path: string): boolean {
  return path === '/console/oidc/login' || /^\/console\/oidc\/device\/[^/]+$/.test(path);
}
