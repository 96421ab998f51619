// The portal's one password check: the proxy's own hashes (src/admission/password.ts format,
// scrypt$N$r$p$salt$hash), verified on libuv's thread pool so a sign-in never stalls the proxy's event loop.
// An unknown user costs the same scrypt as a known one (the answer's timing tells nothing); so does a wrong
// password for a generated one (kept as a digest, checked without scrypt when right).
import { DUMMY_HASH, verifyPasswordAsync } from '../admission/password.ts';

/** True when `password` is the one `stored` was made from; false for a malformed or absent hash. */
export async function checkPassword(password: string, stored: string | undefined): Promise<boolean> {
  // Through the process's bounded hash queue (src/admission/password.ts), behind the proxy's logins, never shed.
  return (await verifyPasswordAsync(password, stored ?? DUMMY_HASH, 'admin')) && stored !== undefined;
}
