// The bench's check of a STUN answer: only the header (binding success, our magic cookie), not the address inside,
// so that counting 100,000 answers a second costs the load client as little as possible. Requests are the relay's
// own bindingRequest (services/relay/src/stun.ts), built as Tailscale's net/stun builds them: derper refuses any
// other shape, so derper answering them is the check that they are right.
import { BINDING_SUCCESS, HEADER_LEN, MAGIC_COOKIE } from '../../services/relay/src/stun.ts';

const COOKIE = MAGIC_COOKIE.readUInt32BE(0);

/** True for a binding success response with our cookie; its transaction id is bytes 8..20. */
export function isBindingSuccess(b: Buffer): boolean {
  return b.length >= HEADER_LEN && b.readUInt16BE(0) === BINDING_SUCCESS && b.readUInt32BE(4) === COOKIE;
}
