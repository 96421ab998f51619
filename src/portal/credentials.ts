// The portal's one password check: the proxy's own hashes (src/admission/password.ts format,
// scrypt$N$r$p$salt$hash), verified on the hashing threads so a sign-in never stalls the proxy's event loop.
// An unknown user costs the same scrypt as a known one (the answer's timing tells nothing); so does a wrong
// password for a generated one (kept as a digest, checked without scrypt when right).
import { DUMMY_HASH, verifyPasswordAsync } from '../admission/password.ts';

/** True when `password` is the one `stored` was made from; false for a malformed or absent hash. */
export async function checkPassword(password: string, stored: string | undefined): Promise<boolean> {
  // Through the process's bounded hash queue (src/admission/password.ts) at its own priority, after the proxy's
  // logins and every admin write, in turn with bulk imports: anonymous sign-ins never hold a reseller's password
  // write behind them, nor an import for long, and beyond the queue's bound they are shed at once (HashBusyError:
  // 503 AUTH_BUSY, "try again shortly").
  return (await verifyPasswordAsync(password, stored ?? DUMMY_HASH, 'portal')) && stored !== undefined;
}
