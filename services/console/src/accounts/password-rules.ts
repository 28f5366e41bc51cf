// What a console password must be. Long beats clever: a length floor and nothing else, so a passphrase or a password
// manager's output both pass.
export const MIN_PASSWORD = 12;
export const MAX_PASSWORD = 1024;

/** null when fine, else what to change. */
export function passwordProblem(pw: string): string | null {
  if (pw.length < MIN_PASSWORD) return `A password needs at least ${MIN_PASSWORD} characters (a few words make a good one).`;
  if (pw.length > MAX_PASSWORD) return `A password may have at most ${MAX_PASSWORD} characters.`;
  return null;
}
