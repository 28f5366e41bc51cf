// Text form of a challenge public key (tailcfg key.ChallengePublic): "chalpub:<64 lowercase hex>".
export function formatChallenge(raw: Uint8Array): string {
  if (raw.length !== 32) throw new Error(`challenge key must be 32 bytes, got ${raw.length}`);
  return `chalpub:${Buffer.from(raw).toString('hex')}`;
}
