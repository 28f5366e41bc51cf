// One error type for every failure whose status and message are meant for the caller (a client, an operator, a
// console user): it carries the HTTP status, the text to show, and optionally how long to wait before retrying. Each
// server turns it into a response in exactly one place (coordination: control/h2-server.ts and admin/admin-server.ts;
// console: errors.ts); anything that is not an HseError is a bug, answered 500 with the details kept in the log.
//
// isStoreDown() is the one test for "Redis is not answering" (as opposed to a bug), so every process answers an
// outage the same way: 503, retrying is safe.

export class HseError extends Error {
  /** HTTP status the caller gets. */
  readonly status: number;
  /** Seconds after which retrying makes sense (sent as Retry-After), when the failure is temporary. */
  readonly retryAfter: number | undefined;
  /** Structured detail for API callers (a refused policy's errors with line and column), beside the message. */
  readonly details: unknown;
  constructor(status: number, message: string, opts: { retryAfter?: number; details?: unknown } = {}) {
    super(message);
    this.name = 'HseError';
    this.status = status;
    this.retryAfter = opts.retryAfter;
    this.details = opts.details;
  }
}

/** The caller's status for `e`: an HseError's own, else 500. */
export function statusOf(e: unknown): number {
  return e instanceof HseError ? e.status : 500;
}

/**
 * True when `e` comes from Redis being unreachable: connection refused or closed, retries exhausted, a replica that
 * is loading or read-only (during a failover), a primary refusing writes because it lost its replicas
 * (min-replicas-to-write, advanced/ha.md). ioredis raises these as plain Errors, so the message is what tells.
 */
export function isStoreDown(e: unknown): boolean {
  const err = e as { name?: string; message?: string } | null;
  if (err?.name === 'MaxRetriesPerRequestError') return true;
  return /ECONNREFUSED|ENOENT|ECONNRESET|EPIPE|ETIMEDOUT|Connection is closed|Stream isn't writeable|LOADING|READONLY|MASTERDOWN|NOREPLICAS|All sentinels are unreachable/.test(
    String(err?.message ?? ''),
  );
}

/**
 * A problem at start that the operator must fix (a damaged key file, a data directory that cannot be written, a bad
 * setting found late): the process prints one line naming `subject` (the file or variable) and `reason`, and exits 2,
 * which the supervisor does not restart (ecosystem.config.js, stop_exit_codes). See shared/service.ts.
 */
export class StartupError extends Error {
  /** The file or variable to look at. */
  readonly subject: string;
  readonly reason: string;
  constructor(subject: string, reason: string) {
    super(`${subject}: ${reason}`);
    this.name = 'StartupError';
    this.subject = subject;
    this.reason = reason;
  }
}
