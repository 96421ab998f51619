// Bearer token check for /v1. Both sides are hashed first so the comparison is constant-time whatever
// the lengths (timingSafeEqual itself needs equal lengths and would leak the token's length otherwise).
import { createHash, timingSafeEqual } from 'node:crypto';

const digest = (s: string) => createHash('sha256').update(s, 'utf8').digest();

/**
 * The admin token in force. A reload replaces its value (a leaked token rotated by SIGHUP stops opening the API
 * at once); whether a token is required at all is decided once, at start.
 */
export class AdminToken {
  private want: Buffer | undefined;

  constructor(token: string | undefined) {
    this.want = token ? digest(token) : undefined;
  }

  /** Whether a token is configured (no token = every request passes). */
  get isSet(): boolean {
    return this.want !== undefined;
  }

  /** Takes a new value; an empty one is refused (turning the token off needs a restart). Returns whether it was taken. */
  replace(token: string | undefined): boolean {
    if (!token || this.want === undefined) return false;
    this.want = digest(token);
    return true;
  }

  /** Whether an `Authorization` header value carries the token. */
  check(header: string | undefined): boolean {
    const want = this.want;
    if (want === undefined) return true;
    if (typeof header !== 'string') return false;
    const m = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(header);
    if (!m) return false;
    return timingSafeEqual(digest(m[1] as string), want);
  }
}
