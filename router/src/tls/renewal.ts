// When ACME work happens. Pure functions, so the schedule can be tested without waiting for it.
//
// Renewal at two thirds of the certificate's lifetime: for Let's Encrypt's 90-day certificates that is with 30 days
// left (their advice), for 6-day short-lived ones with 2 days left, and the same rule holds for any CA. Failures
// are retried with a doubling delay from one minute to one hour: soon enough that a fixed DNS record or firewall is
// picked up quickly, slow enough not to run into the CA's failed-validation limit (Let's Encrypt: 5 per hour per
// name and account). A retry never waits past the moment the served certificate expires.

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;

/** setTimeout cannot wait longer than ~24.8 days; longer waits are taken in steps and re-checked. */
export const MAX_TIMER_MS = 6 * HOUR;

export function renewalTime(notBefore: Date, notAfter: Date): Date {
  const life = notAfter.getTime() - notBefore.getTime();
  return new Date(notBefore.getTime() + Math.max(0, Math.floor((life * 2) / 3)));
}

/** Whether a certificate should be renewed now. */
export function dueForRenewal(notBefore: Date, notAfter: Date, now: Date = new Date()): boolean {
  return now.getTime() >= renewalTime(notBefore, notAfter).getTime();
}

/** Delay before the next attempt after `failures` consecutive failures (1 = the first failure). */
export function retryDelayMs(failures: number, expiresInMs: number | null = null): number {
  const backoff = Math.min(HOUR, MINUTE * 2 ** Math.max(0, failures - 1));
  // Shortly before expiry, try more often rather than let the certificate lapse between two attempts.
  if (expiresInMs !== null && expiresInMs > 0) return Math.max(1000, Math.min(backoff, Math.floor(expiresInMs / 4)));
  return backoff;
}

/** How long to wait before checking again for a renewal due at `at` (at most MAX_TIMER_MS; 0 when due). */
export function waitUntil(at: Date, now: Date = new Date()): number {
  return Math.min(MAX_TIMER_MS, Math.max(0, at.getTime() - now.getTime()));
}
