// Text forms of the 32-byte Curve25519 keys in the Tailscale protocol: "<prefix>:<64 lowercase hex>".
// nodekey: (WireGuard/node), mkey: (machine, Noise), discokey: (disco). The relay and the state layer compare keys in
// this form, so it is always lowercase.
export type KeyPrefix = 'nodekey' | 'mkey' | 'discokey';

export function formatKey(prefix: KeyPrefix, raw: Uint8Array): string {
  if (raw.length !== 32) throw new Error(`${prefix} must be 32 bytes, got ${raw.length}`);
  return `${prefix}:${Buffer.from(raw).toString('hex')}`;
}

/** Parses "<prefix>:<64 hex>"; returns null for anything else (wrong prefix, length, characters). */
export function parseKey(prefix: KeyPrefix, text: unknown): Buffer | null {
  if (typeof text !== 'string') return null;
  const m = /^([a-z]+):([0-9a-fA-F]{64})$/.exec(text);
  if (!m || m[1] !== prefix) return null;
  return Buffer.from(m[2], 'hex');
}

export function normaliseKey(prefix: KeyPrefix, text: unknown): string | null {
  const raw = parseKey(prefix, text);
  return raw ? formatKey(prefix, raw) : null;
}

export function isZeroKey(raw: Uint8Array): boolean {
  return raw.every((b) => b === 0);
}
