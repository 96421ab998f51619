// Proxy passwords at rest: scrypt (node:crypto), `scrypt$<N>$<r>$<p>$<salt b64>$<hash b64>`, so the cost can
// be raised later and old hashes still verify. Verification is synchronous because the proxy's
// authorization is (Router.authorize answers inside the SOCKS5 handshake callback): it costs ~40 ms of CPU at
// N=2^14, so it runs once per user and process — the directory then remembers a SHA-256 of the verified
// password in memory (never stored) and every later check is O(1) (src/users/directory.ts).
import { createHash, randomBytes, scrypt, scryptSync, timingSafeEqual } from 'node:crypto';
import { isGeneratedHash, verifyGeneratedPassword } from './secret-hash.ts';

const N = 16_384;
const R = 8;
const P = 1;
const KEY_LENGTH = 32;

export function hashPassword(password: string, salt: Buffer = randomBytes(16)): string {
  const key = scryptSync(password, salt, KEY_LENGTH, { N, r: R, p: P, maxmem: 64 * 1024 * 1024 });
  return `scrypt$${N}$${R}$${P}$${salt.toString('base64')}$${key.toString('base64')}`;
}

/** hashPassword on libuv's thread pool: what the admin routes use, so a create never stalls the proxy's event loop. */
export function hashPasswordAsync(password: string, salt: Buffer = randomBytes(16)): Promise<string> {
  return new Promise((resolve, reject) => {
    scrypt(password, salt, KEY_LENGTH, { N, r: R, p: P, maxmem: 64 * 1024 * 1024 }, (err, key) => {
      if (err) reject(err);
      else resolve(`scrypt$${N}$${R}$${P}$${salt.toString('base64')}$${key.toString('base64')}`);
    });
  });
}

/** True when `password` is the one `stored` was made from; false for any malformed hash. */
export function verifyPassword(password: string, stored: string): boolean {
  // A password Rotor generated is kept as a SHA-256 (src/users/secret-hash.ts): no scrypt to run.
  if (isGeneratedHash(stored)) return verifyGeneratedPassword(password, stored);
  const parts = stored.split('$');
  if (parts.length !== 6 || parts[0] !== 'scrypt') return false;
  const [n, r, p] = [Number(parts[1]), Number(parts[2]), Number(parts[3])];
  if (![n, r, p].every((x) => Number.isInteger(x) && x > 0) || n > 1 << 20) return false;
  const salt = Buffer.from(parts[4]!, 'base64');
  const expected = Buffer.from(parts[5]!, 'base64');
  if (expected.length === 0) return false;
  const key = scryptSync(password, salt, expected.length, { N: n, r, p, maxmem: 256 * 1024 * 1024 });
  return timingSafeEqual(key, expected);
}

/** A new password: 18 random bytes, base64url (24 characters, safe in a proxy URL). */
export function generatePassword(): string {
  return randomBytes(18).toString('base64url');
}

/** The in-memory fingerprint of a verified password (compared in constant time, never stored). */
export function passwordDigest(password: string): Buffer {
  return createHash('sha256').update(password, 'utf8').digest();
}
