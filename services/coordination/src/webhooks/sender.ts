// Sends one webhook delivery, signed as Tailscale signs its webhooks (docs/webhooks/example.go in tailscale/tailscale):
//   Tailscale-Webhook-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>" keyed with the endpoint secret>
// The body is sent exactly as stored, so what the receiver hashes is what was signed. t is the time of this attempt:
// receivers refuse old timestamps (Tailscale's example: older than 5 minutes), so a retry is signed afresh.
import crypto from 'node:crypto';

/** A receiver gets this long to answer; Tailscale's own deliveries time out similarly. */
export const SEND_TIMEOUT_MS = 10_000;

export function signature(secret: string, body: string, unixSeconds: number): string {
  const mac = crypto.createHmac('sha256', secret).update(`${unixSeconds}.${body}`).digest('hex');
  return `t=${unixSeconds},v1=${mac}`;
}

export interface SendResult {
  ok: boolean;
  status: number | null;
  error: string | null;
}

export async function send(url: string, secret: string, body: string, now = Date.now()): Promise<SendResult> {
  try {
    const res = await fetch(url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'user-agent': 'hse-webhooks/1',
        'tailscale-webhook-signature': signature(secret, body, Math.floor(now / 1000)),
      },
      body,
      redirect: 'manual',
      signal: AbortSignal.timeout(SEND_TIMEOUT_MS),
    });
    // The answer's body is not used; reading it lets the connection be reused.
    await res.arrayBuffer().catch(() => undefined);
    const ok = res.status >= 200 && res.status < 300;
    return { ok, status: res.status, error: ok ? null : `the receiver answered ${res.status}` };
  } catch (e) {
    const err = e as Error & { cause?: { code?: string; message?: string } };
    const why = err.name === 'TimeoutError' ? `no answer within ${SEND_TIMEOUT_MS / 1000} s` : (err.cause?.code ?? err.cause?.message ?? err.message);
    return { ok: false, status: null, error: `could not reach the receiver: ${why}` };
  }
}
