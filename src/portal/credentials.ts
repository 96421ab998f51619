// The portal's one password check: the proxy's own hashes (src/users/password.ts format,
// scrypt$N$r$p$salt$hash), verified on libuv's thread pool so a sign-in never stalls the proxy's event loop.
// An unknown user costs the same scrypt as a known one (the answer's timing tells nothing). Hashes in another
// of the proxy's formats go to the proxy's own check.
import { scrypt, timingSafeEqual } from 'node:crypto';
import { verifyPassword } from '../users/password.ts';

/** A hash of a password nobody knows, in the proxy's format, for unknown user names. */
const DECOY = 'scrypt$16384$8$1$AAAAAAAAAAAAAAAAAAAAAA==$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=';

function scryptAsync(password: string, salt: Buffer, length: number, o: { N: number; r: number; p: number }): Promise<Buffer> {
  return new Promise((resolve, reject) =>
    scrypt(password, salt, length, { ...o, maxmem: 256 * 1024 * 1024 }, (err, key) => (err ? reject(err) : resolve(key))),
  );
}

/** True when `password` is the one `stored` was made from; false for a malformed or absent hash. */
export async function checkPassword(password: string, stored: string | undefined): Promise<boolean> {
  // Another format of the proxy's (a cheap one, such as a generated password's digest): its own check.
  if (stored !== undefined && !stored.startsWith('scrypt$')) return verifyPassword(password, stored);
  const parts = (stored ?? DECOY).split('$');
  if (parts.length !== 6 || parts[0] !== 'scrypt') return false;
  const [N, r, p] = [Number(parts[1]), Number(parts[2]), Number(parts[3])];
  if (![N, r, p].every((x) => Number.isInteger(x) && x > 0) || N > 1 << 20) return false;
  const salt = Buffer.from(parts[4]!, 'base64');
  const expected = Buffer.from(parts[5]!, 'base64');
  if (expected.length === 0) return false;
  const key = await scryptAsync(password, salt, expected.length, { N, r, p });
  return timingSafeEqual(key, expected) && stored !== undefined;
}
