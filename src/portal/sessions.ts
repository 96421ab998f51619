// Portal sessions, in this process's memory: a random token in an HttpOnly cookie (only its SHA-256 is kept as
// the key, so a dump of the table signs nobody in), a CSRF token for writes, an idle and an absolute expiry.
// The password the customer signed in with is kept beside it, in memory only, so the access generator can
// write complete endpoint lines; it goes with the session (sign-out, expiry, a password change).
// Bounded: at most `maxSessions` in all (the oldest go first) and `perUser` per customer.
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

export interface PortalSession {
  user: string;
  csrf: string;
  password: string;
  /** The stored hash the password was checked against: when it changes (a new password set anywhere), the session ends. */
  hash: string;
  /** The user's creation (UserView.createdAt) when it signed in: a name deleted and made again is another customer, whatever its hash. */
  born: string;
  createdAt: number;
  lastSeen: number;
}

export interface SessionOptions {
  idleMs: number;
  maxAgeMs: number;
  maxSessions?: number;
  perUser?: number;
  now?: () => number;
}

const key = (token: string) => createHash('sha256').update(token, 'utf8').digest('base64url');

/** Tokens are 32 random bytes, base64url: 43 characters of [A-Za-z0-9_-]. */
export const TOKEN_SHAPE = /^[A-Za-z0-9_-]{43}$/;

export class PortalSessions {
  /** Insertion order = creation order: the first key is the oldest session. */
  private readonly byKey = new Map<string, PortalSession>();
  private readonly now: () => number;

  constructor(private readonly options: SessionOptions) {
    this.now = options.now ?? Date.now;
  }

  get size(): number {
    return this.byKey.size;
  }

  /** A new session; answers the cookie's token (never stored) and the session. */
  create(user: string, password: string, hash = '', born = ''): { token: string; session: PortalSession } {
    const perUser = this.options.perUser ?? 20;
    const mine = [...this.byKey].filter(([, s]) => s.user === user);
    for (const [k] of mine.slice(0, Math.max(0, mine.length - perUser + 1))) this.byKey.delete(k);
    const max = this.options.maxSessions ?? 10_000;
    while (this.byKey.size >= max) this.byKey.delete(this.byKey.keys().next().value as string);
    const token = randomBytes(32).toString('base64url');
    const t = this.now();
    const session: PortalSession = { user, csrf: randomBytes(24).toString('base64url'), password, hash, born, createdAt: t, lastSeen: t };
    this.byKey.set(key(token), session);
    return { token, session };
  }

  /** The live session of a cookie token (its idle clock restarted), or undefined. */
  get(token: string | undefined): PortalSession | undefined {
    if (!token || !TOKEN_SHAPE.test(token)) return undefined;
    const k = key(token);
    const s = this.byKey.get(k);
    if (!s) return undefined;
    const t = this.now();
    if (t - s.lastSeen > this.options.idleMs || t - s.createdAt > this.options.maxAgeMs) {
      this.byKey.delete(k);
      return undefined;
    }
    s.lastSeen = t;
    return s;
  }

  drop(token: string): void {
    this.byKey.delete(key(token));
  }

  /** Ends every session of `user` but `keep` (a password change signs the others out). */
  dropUser(user: string, keep?: PortalSession): void {
    for (const [k, s] of this.byKey) if (s.user === user && s !== keep) this.byKey.delete(k);
  }

  /** Drops expired sessions (called now and then; get() checks on its own). */
  sweep(): void {
    const t = this.now();
    for (const [k, s] of this.byKey)
      if (t - s.lastSeen > this.options.idleMs || t - s.createdAt > this.options.maxAgeMs) this.byKey.delete(k);
  }
}

/** Constant-time comparison of a sent CSRF header with the session's. */
export function csrfMatches(sent: unknown, session: PortalSession): boolean {
  if (typeof sent !== 'string' || sent.length !== session.csrf.length) return false;
  return timingSafeEqual(Buffer.from(sent), Buffer.from(session.csrf));
}
