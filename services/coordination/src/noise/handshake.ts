// The responder (server) side of Noise_IK as controlbase runs it. The client's first message arrives whole (it rides
// in the upgrade request's X-Tailscale-Handshake header), so the handshake is one synchronous function: initiation
// in, response bytes and the two transport cipher states out.
//
//   prologue: "Tailscale Control Protocol v<capver, decimal>"
//   <- s                      (the client learned our static key from GET /key)
//   -> e, es, s, ss           (initiation)
//   <- e, ee, se              (response)
import { MIN_CAP_VERSION } from '../tailcfg/capver.ts';
import { AuthError } from './aead.ts';
import type { CipherState } from './cipher-state.ts';
import { HandshakeError, parseInitiation, writeResponse } from './messages.ts';
import { SymmetricState } from './symmetric.ts';
import { generatePair, type X25519Pair } from './x25519.ts';

export const PROLOGUE_PREFIX = 'Tailscale Control Protocol v';

export function prologue(capVersion: number): Buffer {
  return Buffer.from(`${PROLOGUE_PREFIX}${capVersion}`, 'ascii');
}

export interface HandshakeResult {
  capVersion: number;
  /** The client's machine public key, proven by the ss token. */
  machineKey: Buffer;
  /** The 51 bytes to send back. */
  response: Buffer;
  /** Client -> server. */
  rx: CipherState;
  /** Server -> client. */
  tx: CipherState;
  /** Final h, unique to this connection (controlbase exposes it for channel binding). */
  handshakeHash: Buffer;
}

export interface RespondOptions {
  minCapVersion?: number;
  /** Fixed server ephemeral, only for reproducing recorded test vectors. */
  ephemeral?: X25519Pair;
}

/**
 * Throws HandshakeError: with `reply` set when the client should be told why (an error frame), without when the
 * connection should just be closed (bad crypto gets no oracle).
 */
export function respondToInitiation(initiation: Uint8Array, server: X25519Pair, opts: RespondOptions = {}): HandshakeResult {
  const init = parseInitiation(initiation);
  const min = opts.minCapVersion ?? MIN_CAP_VERSION;
  if (init.capVersion < min) {
    throw new HandshakeError(
      `client capability version ${init.capVersion} is below the minimum ${min}`,
      `this Tailscale client is too old for this server (capability version ${init.capVersion}, need ${min} or newer, Tailscale v1.80+); please upgrade Tailscale`,
    );
  }
  try {
    const s = new SymmetricState();
    s.mixHash(prologue(init.capVersion));
    s.mixHash(server.publicKey);

    // -> e, es, s, ss
    s.mixHash(init.ephemeral);
    const kEs = s.mixDH(server.privateKey, init.ephemeral);
    const machineKey = s.decryptAndHash(kEs, init.sealedStatic);
    const kSs = s.mixDH(server.privateKey, machineKey);
    s.decryptAndHash(kSs, init.tag);

    // <- e, ee, se
    const e = opts.ephemeral ?? generatePair();
    s.mixHash(e.publicKey);
    s.mixDH(e.privateKey, init.ephemeral);
    const kSe = s.mixDH(e.privateKey, machineKey);
    const tag = s.encryptAndHash(kSe, Buffer.alloc(0));

    const handshakeHash = Buffer.from(s.h);
    const [c1, c2] = s.split();
    return { capVersion: init.capVersion, machineKey, response: writeResponse(e.publicKey, tag), rx: c1, tx: c2, handshakeHash };
  } catch (err) {
    if (err instanceof AuthError) {
      throw new HandshakeError(`handshake initiation did not authenticate (${err.message}); the client may have an old copy of the server key from GET /key`);
    }
    throw new HandshakeError(`handshake failed: ${(err as Error).message}`);
  }
}
