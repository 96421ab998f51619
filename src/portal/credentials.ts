// The portal's one password check: the proxy's own hashes (src/users/password.ts format,
// scrypt$N$r$p$salt$hash), verified on libuv's thread pool so a sign-in never stalls the proxy's event loop.
// An unknown user costs the same scrypt as a known one (the answer's timing tells nothing). Hashes in another
// of the proxy's formats go to the proxy's own check.
import { DUMMY_HASH, verifyPassword, verifyPasswordAsync } from '../users/password.ts';

/** True when `password` is the one `stored` was made from; false for a malformed or absent hash. */
export async function checkPassword(password: string, stored: string | undefined): Promise<boolean> {
  // Another format of the proxy's (a cheap one, such as a generated password's digest): its own check.
  if (stored !== undefined && !stored.startsWith('scrypt$')) return verifyPassword(password, stored);
  // Through the process's bounded hash queue (src/users/password.ts), behind the proxy's logins, never shed.
  return (await verifyPasswordAsync(password, stored ?? DUMMY_HASH, 'admin')) && stored !== undefined;
}
