// Bearer token check for /v1. Both sides are hashed first so the comparison is constant-time whatever
// the lengths (timingSafeEqual itself needs equal lengths and would leak the token's length otherwise).
import { createHash, timingSafeEqual } from 'node:crypto';

const digest = (s: string) => createHash('sha256').update(s, 'utf8').digest();

/** A checker for `Authorization` header values; undefined token = everything passes. */
export function bearerChecker(token: string | undefined): (header: string | undefined) => boolean {
  if (!token) return () => true;
  const want = digest(token);
  return (header) => {
    if (typeof header !== 'string') return false;
    const m = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(header);
    if (!m) return false;
    return timingSafeEqual(digest(m[1] as string), want);
  };
}
