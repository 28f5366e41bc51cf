// HTTP-01 challenge answers the ACME client has published, read by the port-80 server. In memory only: a challenge
// lives for the seconds between "ready" and the CA's validation, within one process.
//
// Wire (RFC 8555, 8.3): the CA asks `GET /.well-known/acme-challenge/<token>` on port 80 of the name being
// validated and expects `200` with the key authorization ("<token>.<account key thumbprint>") as the body.

export const CHALLENGE_PREFIX = '/.well-known/acme-challenge/';

/** Tokens are base64url (RFC 8555, 8.1): anything else is not one of ours and is not looked up. */
const TOKEN = /^[A-Za-z0-9_-]{1,256}$/;

export class ChallengeStore {
  private readonly answers = new Map<string, string>();

  set(token: string, keyAuthorization: string): void {
    if (!TOKEN.test(token)) throw new Error(`ACME challenge token "${token.slice(0, 40)}" is not base64url`);
    this.answers.set(token, keyAuthorization);
  }

  delete(token: string): void {
    this.answers.delete(token);
  }

  /** The answer for a request path under CHALLENGE_PREFIX, or null when there is none. */
  answerFor(path: string): string | null {
    if (!path.startsWith(CHALLENGE_PREFIX)) return null;
    const token = path.slice(CHALLENGE_PREFIX.length);
    if (!TOKEN.test(token)) return null;
    return this.answers.get(token) ?? null;
  }
}
