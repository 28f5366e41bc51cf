// Capability versions: the integer a client sends in its Noise initiation, register and map requests to say which
// protocol features it speaks (tailscale tailcfg.CurrentCapabilityVersion). One minimum and one check, used by the
// handshake, /machine/register and /machine/map alike.

/** Capability version of Tailscale v1.80, the oldest client this server speaks to (as headscale does). */
export const MIN_CAP_VERSION = 113;

/** Capability versions are small integers; peers decode Node.Cap as a Go int, so anything else would break their maps. */
export function isCapVersion(v: unknown): v is number {
  return typeof v === 'number' && Number.isInteger(v) && v >= 0 && v <= 1_000_000;
}

/**
 * Why a request's `Version` is refused, or null when it is acceptable. The text is shown to the user by the client.
 */
export function capVersionProblem(v: unknown): string | null {
  if (!isCapVersion(v)) return "Version must be the client's capability version (a whole number)";
  if (v < MIN_CAP_VERSION) {
    return `this Tailscale client is too old for this server (capability version ${v}, need ${MIN_CAP_VERSION} or newer, Tailscale v1.80+); please upgrade Tailscale`;
  }
  return null;
}
