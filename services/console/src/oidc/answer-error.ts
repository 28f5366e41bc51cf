// A refusal of what the identity provider answered, with what the person (and the activity log) is told. Its own
// module, apart from provider.ts, so the routes can recognise it without loading the relying-party library.

export class ProviderAnswerError extends Error {
  /** Short reason for the activity log, e.g. "unexpected JWT "aud" (audience) claim value". */
  readonly reason: string;
  constructor(reason: string, message: string) {
    super(message);
    this.reason = reason;
  }
}
