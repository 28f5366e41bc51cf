// The region's mesh key: from HSE_DERP_MESH_KEY (checked by shared/config.ts) or read here from
// HSE_DERP_MESH_KEY_FILE, a file in the format of derper's --mesh-psk-file (64 hex digits, whitespace trimmed), so
// one file can serve hse relays and derpers alike. A relay that presents this key in its ClientInfo is a trusted
// member of the region (derp-server.ts); compared in constant time.
import crypto from 'node:crypto';
import fs from 'node:fs';
import type { Config } from '../../../shared/config.ts';
import { DerpSettingError, parseMeshKey } from '../../../shared/derp-addresses.ts';
import { StartupError } from '../../../shared/errors.ts';

/** The key, null when the relay has none (then it neither meshes nor accepts mesh peers). */
export function loadMeshKey(cfg: Config): Buffer | null {
  if (cfg.derpMeshKey) return cfg.derpMeshKey;
  const file = cfg.derpMeshKeyFile;
  if (file === null) return null;
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code ?? (e as Error).message;
    throw new StartupError('HSE_DERP_MESH_KEY_FILE', `cannot read "${file}" (${code}); check the path and that this user may read it`);
  }
  try {
    return parseMeshKey(text);
  } catch (e) {
    if (e instanceof DerpSettingError) throw new StartupError('HSE_DERP_MESH_KEY_FILE', `"${file}" ${e.message}`);
    throw e;
  }
}

/** The mesh key as ClientInfo carries it: lowercase hex (derper's key.DERPMesh JSON). */
export function meshKeyText(key: Buffer): string {
  return key.toString('hex');
}

/**
 * Whether `presented` (ClientInfo's meshKey) is our key. A presented key that is not 64 hex digits cannot match and
 * is refused before any comparison; two keys of the same length are compared in constant time, so the time taken
 * says nothing about how many leading bytes were right.
 */
export function meshKeyMatches(ours: Buffer, presented: string): boolean {
  if (!/^[0-9a-fA-F]{64}$/.test(presented)) return false;
  return crypto.timingSafeEqual(ours, Buffer.from(presented, 'hex'));
}
