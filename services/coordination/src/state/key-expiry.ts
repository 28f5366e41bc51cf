// When a node key expires. Set at registration (and at re-login after expiry or logout): the tailnet-wide lifetime
// HSE_NODE_KEY_EXPIRY from now, or sooner when the client asks for sooner (RegisterRequest.Expiry, e.g. SetExpirySooner);
// a later request is capped. A machine whose expiry an operator disabled never expires, whatever it asks. null = never,
// which the map sends as no KeyExpiry (tailcfg.Node.KeyExpiry: zero = does not expire).
import type { Config } from '../../../../shared/config.ts';

export function keyExpiryAt(cfg: Pick<Config, 'nodeKeyExpirySeconds'>, requested: Date | null, disabled: boolean, now = Date.now()): string | null {
  if (disabled) return null;
  const wanted = requested && requested.getTime() > now ? requested.getTime() : null;
  const limit = cfg.nodeKeyExpirySeconds > 0 ? now + cfg.nodeKeyExpirySeconds * 1000 : null;
  if (wanted === null && limit === null) return null;
  return new Date(Math.min(wanted ?? Number.POSITIVE_INFINITY, limit ?? Number.POSITIVE_INFINITY)).toISOString();
}
