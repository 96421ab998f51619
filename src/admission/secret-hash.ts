// Stored forms of a password that cost no scrypt:
// - a password Rotor generated itself (generatePassword: 18 random bytes, 144 bits) is stored as
//   `sha256$<salt b64>$<SHA-256(salt ‖ password) b64>`. A slow hash protects guessable, human passwords
//   against a stolen store; nobody can search 2^144 candidates, fast hash or not (the same reasoning as API
//   tokens kept as their SHA-256). This is what lets an import of 100,000 customers with generated
//   passwords finish in seconds instead of the ~40 minutes their scrypt would take on two cores.
//   A password a client chose is always scrypt (src/admission/password.ts).
// - an import may carry `passwordHash`: an scrypt hash in Rotor's own format (another Rotor's store, a
//   migration), checked here for shape and cost before it is stored.
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

const PREFIX = 'sha256$';

/** The stored form of a password Rotor generated (generatePassword); never for a chosen password. */
export function hashGeneratedPassword(password: string, salt: Buffer = randomBytes(16)): string {
  const digest = createHash('sha256').update(salt).update(password, 'utf8').digest();
  return `${PREFIX}${salt.toString('base64')}$${digest.toString('base64')}`;
}

export function isGeneratedHash(stored: string): boolean {
  return stored.startsWith(PREFIX);
}

/** True when `password` is the one a `sha256$` hash was made from; false for any malformed hash. */
export function verifyGeneratedPassword(password: string, stored: string): boolean {
  const parts = stored.split('$');
  if (parts.length !== 3 || parts[0] !== 'sha256') return false;
  const salt = Buffer.from(parts[1]!, 'base64');
  const expected = Buffer.from(parts[2]!, 'base64');
  if (salt.length < 8 || expected.length !== 32) return false;
  const digest = createHash('sha256').update(salt).update(password, 'utf8').digest();
  return timingSafeEqual(digest, expected);
}

const SCRYPT_HASH = /^scrypt\$(\d{1,8})\$(\d{1,3})\$(\d{1,3})\$([A-Za-z0-9+/]{16,88}={0,2})\$([A-Za-z0-9+/]{43,88}={0,2})$/;

/**
 * Why an imported `passwordHash` is refused, or undefined when it is an scrypt hash Rotor can verify: N a
 * power of two from 2^14 (no weaker than Rotor's own) to 2^20, r 1–32, p 1–16, salt ≥ 12 bytes, key ≥ 32.
 */
export function importedHashProblem(hash: string): string | undefined {
  const m = SCRYPT_HASH.exec(hash);
  if (!m) return 'must be an scrypt hash as Rotor stores it: scrypt$<N>$<r>$<p>$<salt base64>$<key base64>';
  const [n, r, p] = [Number(m[1]), Number(m[2]), Number(m[3])];
  if (n < 16_384 || n > 1 << 20 || (n & (n - 1)) !== 0) return 'N must be a power of two from 16384 to 1048576';
  if (r < 1 || r > 32 || p < 1 || p > 16) return 'r must be 1-32 and p 1-16';
  if (Buffer.from(m[4]!, 'base64').length < 12) return 'the salt must be at least 12 bytes';
  if (Buffer.from(m[5]!, 'base64').length < 32) return 'the key must be at least 32 bytes';
  return undefined;
}
