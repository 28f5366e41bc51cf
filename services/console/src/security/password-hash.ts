// Console passwords are stored only as argon2id hashes (node:crypto, Node 24), in the PHC string format so the
// parameters travel with the hash and can be raised later without breaking old accounts:
//   $argon2id$v=19$m=<KiB>,t=<passes>,p=<lanes>$<salt, base64 without padding>$<hash, base64 without padding>
// Parameters follow OWASP's argon2id baseline (19 MiB, 2 passes, 1 lane): about 50 ms here, which keeps a guessing
// attacker slow while a sign-in stays instant.
import crypto from 'node:crypto';

const MEMORY_KIB = 19_456;
const PASSES = 2;
const LANES = 1;
const TAG_BYTES = 32;
const SALT_BYTES = 16;

function argon2id(password: string, salt: Buffer, memory: number, passes: number, lanes: number, tagLength: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    crypto.argon2('argon2id', { message: Buffer.from(password, 'utf8'), nonce: salt, memory, passes, parallelism: lanes, tagLength }, (err, key) =>
      err ? reject(err) : resolve(key),
    );
  });
}

const b64 = (b: Buffer) => b.toString('base64').replace(/=+$/, '');

export async function hashPassword(password: string): Promise<string> {
  const salt = crypto.randomBytes(SALT_BYTES);
  const tag = await argon2id(password, salt, MEMORY_KIB, PASSES, LANES, TAG_BYTES);
  return `$argon2id$v=19$m=${MEMORY_KIB},t=${PASSES},p=${LANES}$${b64(salt)}$${b64(tag)}`;
}

const PHC = /^\$argon2id\$v=19\$m=(\d{1,7}),t=(\d{1,3}),p=(\d{1,3})\$([A-Za-z0-9+/]{11,})\$([A-Za-z0-9+/]{22,})$/;

/** True when `password` matches the stored hash. A malformed stored hash never matches (and never throws). */
export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const m = PHC.exec(stored);
  if (!m) return false;
  const [, memory, passes, lanes, saltText, tagText] = m;
  const salt = Buffer.from(saltText, 'base64');
  const expected = Buffer.from(tagText, 'base64');
  let tag: Buffer;
  try {
    tag = await argon2id(password, salt, Number(memory), Number(passes), Number(lanes), expected.length);
  } catch {
    return false;
  }
  return crypto.timingSafeEqual(tag, expected);
}

/** A hash of a random password, checked against when the account does not exist, so timing does not reveal names. */
let decoy: Promise<string> | null = null;
export function decoyHash(): Promise<string> {
  decoy ??= hashPassword(crypto.randomBytes(16).toString('hex'));
  return decoy;
}

/** A strong password for the first administrator: 24 characters from 64, about 144 bits. */
export function generatePassword(): string {
  return crypto.randomBytes(18).toString('base64url');
}
