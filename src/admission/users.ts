// The users as the gateway reads them, and its admission: one row per user, written by the users directory
// (src/users/directory.ts keeps its records in this table's map) and read here, below the gateway, at every
// login (UserTable) and admission (UserGate). So a connection's login and admission call nothing above the
// gateway: the directory hands the data down, the gateway reads it (docs/architecture.md, "As it runs").
import { timingSafeEqual } from 'node:crypto';
import type { Accounting, Admission, UserMeter } from '../accounting/accounting.ts';
import { UserLimiter, type RelayLimiter } from './limiter.ts';
import { DUMMY_HASH, passwordDigest, verifyPasswordAsync } from './password.ts';

/** What admission reads of a user's record (src/users/record.ts UserData has these fields and more). */
export interface AdmissionData {
  readonly enabled: boolean;
  /** RFC 3339, as configured (named in the refusal) */
  readonly expiresAt: string | null;
  readonly rateBytesPerSec: number;
  readonly maxConnections: number;
}

/** One user's row. `U` is the user as the router sees it (src/proxy/types.ts LocalUser). */
export interface UserRow<U> {
  /** 'creating': journaled but not yet on the platform; the gateway does not know the user. */
  state: 'creating' | 'ready';
  /** What the router sees; a new object on every change (invalidates the router's credential cache). */
  local: U;
  /** The stored password hash (src/admission/password.ts). */
  hash: string;
  /** SHA-256 of the password last verified (or set) in this process; memory only. */
  verified: Buffer | null;
  data: AdmissionData;
  /** expiresAt in ms, or null */
  expiresAt: number | null;
  /** Made on the user's first admission (limiter()): most stored users never connect to this daemon. */
  limiter: UserLimiter | null;
}

export class UserTable<U extends { readonly name: string }, R extends UserRow<U> = UserRow<U>> {
  /** The rows by name; the users directory writes them. */
  readonly rows = new Map<string, R>();
  private limiters = 0;

  get(name: string): U | undefined {
    const e = this.rows.get(name);
    return e !== undefined && e.state === 'ready' ? e.local : undefined;
  }

  /**
   * The password check of the proxy's login (Router.authenticate). A password already verified in this
   * process answers at once; anything else costs one scrypt on the hashing threads (password.ts), an unknown
   * user (`undefined`) the same scrypt against a dummy hash, so the time taken tells nobody which names exist.
   * Rejects with HashBusyError when too many checks wait.
   */
  verify(user: U | undefined, password: string): boolean | Promise<boolean> {
    const e = user === undefined ? undefined : this.rows.get(user.name);
    if (e === undefined || e.local !== user) return verifyPasswordAsync(password, DUMMY_HASH).then(() => false);
    const d = passwordDigest(password);
    if (e.verified !== null && timingSafeEqual(d, e.verified)) return true;
    const hash = e.hash;
    return verifyPasswordAsync(password, hash).then((ok) => {
      // The user may have changed while hashing: the answer stands only for the record it was checked against.
      const now = this.rows.get(user!.name);
      if (!ok || now === undefined || now.hash !== hash) return false;
      now.verified = d;
      return true;
    });
  }

  /** The user's live limiter, made on first use with the record's rate and cap; undefined for an unknown name. */
  limiter(name: string): UserLimiter | undefined {
    const e = this.rows.get(name);
    if (e === undefined) return undefined;
    if (e.limiter === null) {
      e.limiter = new UserLimiter(name);
      e.limiter.setRate(e.data.rateBytesPerSec);
      e.limiter.maxConnections = e.data.maxConnections;
      this.limiters++;
    }
    return e.limiter;
  }

  /** Limiters made so far (users admitted at least once since start and not removed). */
  get limitersHeld(): number {
    return this.limiters;
  }

  /** Why a known user may not connect now (disabled, expired), or undefined. */
  refusal(name: string, now: number): string | undefined {
    const e = this.rows.get(name);
    if (e === undefined) return undefined;
    if (!e.data.enabled) return `user ${name} is disabled`;
    if (e.expiresAt !== null && now >= e.expiresAt) return `user ${name} expired at ${e.data.expiresAt ?? ''}`;
    return undefined;
  }

  /** Removes a user's row: its limiter's timers stop and its paused relays are woken. */
  remove(name: string): R | undefined {
    const e = this.rows.get(name);
    if (e === undefined) return undefined;
    this.rows.delete(name);
    if (e.limiter !== null) {
      this.limiters--;
      e.limiter.close();
    }
    return e;
  }
}

// The admission seam (src/proxy/types.ts MeterProvider): the users' rows (above, written by the users
// directory) in front of accounting, both below the gateway, so admission calls nothing above it. One object
// the listeners consult once per connection, in this order — disabled, expired (the record), quota and account
// refusals (accounting), then a connection slot (maxConnections). The slot is reserved in the same synchronous
// step that admits, so the cap is exact however many clients race; it becomes the connection's at
// connectionOpened. Per chunk the relay only sees the meter (accounting) and the limiter (rate, stop on
// disable/delete).
// In a fleet maxConnections is per daemon (each daemon counts its own connections).
export class UserGate {
  constructor(
    private readonly users: UserTable<{ readonly name: string }>,
    private readonly accounting: Accounting,
    private readonly now: () => number = Date.now,
  ) {}

  admit(user: string): Admission {
    const now = this.now();
    const refused = this.users.refusal(user, now);
    if (refused !== undefined) return { ok: false, reason: refused };
    const a = this.accounting.admit(user);
    if (!a.ok) return a;
    const limiter = this.users.limiter(user);
    if (limiter !== undefined && !limiter.reserve(now))
      return { ok: false, reason: `user ${user} has reached its ${limiter.maxConnections} concurrent connections` };
    return a;
  }

  meter(user: string): UserMeter {
    return this.accounting.meter(user);
  }

  connectionOpened(user: string): void {
    this.accounting.connectionOpened(user);
    this.users.limiter(user)?.opened();
  }

  connectionClosed(user: string): void {
    this.accounting.connectionClosed(user);
    this.users.limiter(user)?.closed();
  }

  limiter(user: string): RelayLimiter | undefined {
    return this.users.limiter(user);
  }
}
