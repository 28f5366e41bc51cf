// Change events published on the Redis channel K.changes whenever state changes, whoever made the change (a client,
// the console, the CLI, another instance). Map sessions turn them into deltas; the relay drops connections of nodes
// that were deleted; the console's live views refresh.
export type ChangeEvent =
  | { kind: 'node.upsert'; nodeId: number; full: boolean }
  | { kind: 'node.delete'; nodeId: number; nodeKey: string }
  | { kind: 'node.online'; nodeId: number; online: boolean; lastSeen: string }
  | { kind: 'node.keyrotate'; nodeId: number; oldNodeKey: string; nodeKey: string }
  | { kind: 'user.change'; userId: number }
  | { kind: 'pending.change'; authId: string }
  | { kind: 'policy.change'; version: number }
  /** The tailnet's DNS settings (K.dns) were replaced; every stream gets the new DNSConfig. */
  | { kind: 'dns.change' };

export function encodeChange(e: ChangeEvent): string {
  return JSON.stringify(e);
}

export function decodeChange(s: string): ChangeEvent | null {
  try {
    const e = JSON.parse(s) as ChangeEvent;
    return typeof e === 'object' && e !== null && typeof e.kind === 'string' ? e : null;
  } catch {
    return null;
  }
}
