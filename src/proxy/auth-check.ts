// The proxy login: which user a (user name, password) pair proves, without ever blocking the event loop.
//   0. A (user name, password) pair answered before is answered again from a bounded LRU (cacheSize), its
//      parsed options with it: the steady state of every client, a Map look-up per connection or request.
//   1. Under it, a user's password verified before answers at once, whatever options its name carries: kept
//      per user (the digest of the password last verified, beside the user object the directory holds), not
//      per user name: what a customer's logins under however many names push out of the LRU costs the others
//      a parse and a digest, never a check, and a customer keeps working while its address or name is blocked.
//   2. A pair refused recently (bounded LRU of digests) is refused again without a check.
//   3. A blocked address or name (src/proxy/auth-guard.ts) is refused without a check; an address with too
//      many checks waiting is refused ('busy').
//   4. Otherwise the directory checks the password (scrypt on the thread pool behind a bounded queue,
//      src/admission/password.ts); an unknown name costs the same scrypt against a dummy hash.
// Every failure is answered late (AuthGuard.late) and counted; one reason text for every credential failure,
// whatever was wrong, so nobody learns which user names exist.
import { createHash, timingSafeEqual } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import { isRotorError } from '../errors/rotor-error.ts';
import type { Logger } from '../telemetry/logger.ts';
import type { Metrics } from '../telemetry/metrics.ts';
import { AuthGuard, type AuthFailureReason, type AuthSettings } from './auth-guard.ts';
import type { LocalUser, UserDirectory } from './types.ts';
import { parseUsername, type UsernameOptions } from './username.ts';

/** The one reason of a failed authentication. */
export const AUTH_FAILED = 'wrong user name or password';
const REASONS: Record<Exclude<AuthFailureReason, 'credentials'>, string> = {
  blocked_source: 'too many failed logins from this address; try again later',
  blocked_user: 'too many failed logins for this user name; try again later',
  busy: 'too many logins waiting; try again shortly',
};
const MAX_USERNAME_LENGTH = 1024;
const DUMMY_DIGEST = Buffer.alloc(32);

/** A user's password verified in this process: its digest, and the stored password it matched then. */
interface Proven {
  digest: Buffer;
  stored: string;
}

/** A (user name, password) pair that proved its user: the user object, its stored password then, the options. */
interface Answered {
  user: LocalUser;
  stored: string;
  options: UsernameOptions;
}

export type Authenticated = { ok: true; user: LocalUser; options: UsernameOptions } | { ok: false; reason: string };

function digest(text: string): Buffer {
  return createHash('sha256').update(text, 'utf8').digest();
}

export class Authenticator {
  readonly guard: AuthGuard;
  /**
   * One entry per user object the directory holds (gone with it: a changed user is a new object), so bounded by
   * the directory and evicted by nobody's logins.
   */
  private verified = new WeakMap<LocalUser, Proven>();
  /** The quick path over it: pairs answered lately (evicting one costs its client a parse and a digest). */
  private readonly answered: LRUCache<string, Answered>;
  /** Digests of pairs refused recently (user name, password): a client repeating one costs no check. */
  private readonly refused: LRUCache<string, true>;

  constructor(
    settings: AuthSettings,
    private readonly options: { metrics?: Metrics | undefined; logger?: Logger | undefined; now?: () => number } = {},
  ) {
    this.guard = new AuthGuard(settings, options);
    this.refused = new LRUCache({ max: Math.max(1, settings.cacheSize) });
    this.answered = new LRUCache({ max: Math.max(1, settings.cacheSize) });
  }

  /** Forget every verified password (the directory was swapped). */
  clear(): void {
    this.verified = new WeakMap();
    this.answered.clear();
  }

  /**
   * The user a pair proves. Synchronous for a pair verified before (and for a directory without `verify`,
   * which compares plain text); otherwise a Promise. `source` is the client's address (sourceKey).
   */
  check(users: UserDirectory, username: string, password: string, source: string): Authenticated | Promise<Authenticated> {
    const started = this.now();
    if (username.length > MAX_USERNAME_LENGTH) return this.fail(source, '', 'credentials', started);
    const key = `${username}\u0000${password}`;
    // A hit stands only while the directory still holds that very user with that very password.
    const hit = this.answered.get(key);
    if (hit !== undefined && users.get(hit.user.name) === hit.user && hit.user.password === hit.stored)
      return { ok: true, user: hit.user, options: hit.options };
    // Options are parsed before the user's proof is asked: it knows users, not names.
    const parsed = parseUsername(username, users);
    const name = parsed.ok ? parsed.user : userPrefix(username, users);
    const found = users.get(name);
    let proof: Buffer | undefined;
    if (found !== undefined) {
      // The password last verified for this very user object and its stored password: no check, block or not.
      const proven = this.verified.get(found);
      if (proven !== undefined && proven.stored === found.password) {
        proof = digest(password);
        if (timingSafeEqual(proof, proven.digest)) {
          if (!parsed.ok) return { ok: false, reason: parsed.reason };
          this.answered.set(key, { user: found, stored: found.password, options: parsed.options });
          return { ok: true, user: found, options: parsed.options };
        }
      }
    }
    // Keyed with the user's stored password too, so a pair refused before a password change is checked again.
    const refusedKey = digest(`${key}\u0000${found?.password ?? ''}`).toString('base64');
    if (this.refused.has(refusedKey)) return this.fail(source, name, 'credentials', started);
    const blocked = this.guard.blocked(source, name);
    if (blocked) return this.fail(source, name, blocked, started);
    if (users.verify === undefined) {
      // Plain-text passwords (tests, in-memory directories): compared as digests, so the time says nothing.
      const ok = timingSafeEqual(digest(password), found ? digest(found.password) : DUMMY_DIGEST) && found !== undefined;
      return this.finish(ok ? found : undefined, users, key, password, proof, refusedKey, parsed, source, name, started);
    }
    if (!this.guard.enter(source)) return this.fail(source, name, 'busy', started);
    let answer: boolean | Promise<boolean>;
    try {
      answer = users.verify(found, password);
    } catch (err) {
      this.guard.leave(source);
      return this.failed(err, source, name, started);
    }
    if (typeof answer === 'boolean') {
      this.guard.leave(source);
      return this.finish(answer ? found : undefined, users, key, password, proof, refusedKey, parsed, source, name, started);
    }
    return answer.then(
      (ok) => {
        this.guard.leave(source);
        // The user may have changed while its password was checked: take what the directory holds now, if it
        // still has the password that was checked.
        const now = found && users.get(found.name);
        const user = ok && now && now.password === found.password ? now : undefined;
        return this.finish(user, users, key, password, proof, refusedKey, parsed, source, name, started);
      },
      (err: unknown) => {
        this.guard.leave(source);
        return this.failed(err, source, name, started);
      },
    );
  }

  private finish(
    user: LocalUser | undefined,
    users: UserDirectory,
    key: string,
    password: string,
    /** digest(password), when the cache already took it */
    proof: Buffer | undefined,
    refusedKey: string,
    parsed: ReturnType<typeof parseUsername>,
    source: string,
    name: string,
    started: number,
  ): Authenticated | Promise<Authenticated> {
    if (!user) {
      this.refused.set(refusedKey, true);
      return this.fail(source, name, 'credentials', started);
    }
    if (users.get(user.name) !== user) return this.fail(source, name, 'credentials', started);
    this.verified.set(user, { digest: proof ?? digest(password), stored: user.password });
    // The name's own problem (an option misspelt) is told only to a client whose password proves the user.
    if (!parsed.ok) return { ok: false, reason: parsed.reason };
    this.answered.set(key, { user, stored: user.password, options: parsed.options });
    return { ok: true, user, options: parsed.options };
  }

  private failed(err: unknown, source: string, name: string, started: number): Authenticated | Promise<Authenticated> {
    if (isRotorError(err) && err.code === 'AUTH_BUSY') return this.fail(source, name, 'busy', started);
    this.options.logger?.error({ err }, 'password check failed unexpectedly');
    return this.fail(source, name, 'credentials', started);
  }

  private fail(source: string, name: string, reason: AuthFailureReason, started: number): Authenticated | Promise<Authenticated> {
    this.guard.failed(source, name, reason);
    const answer: Authenticated = { ok: false, reason: reason === 'credentials' ? AUTH_FAILED : REASONS[reason] };
    return this.guard.late(answer, started);
  }

  private now(): number {
    return (this.options.now ?? Date.now)();
  }
}

/** The longest leading part of a user name that is a known user ('' when none): what a failure is counted for. */
function userPrefix(raw: string, users: UserDirectory): string {
  const tokens = raw.split('-');
  for (let n = tokens.length - 1; n > 0; n--) {
    const name = tokens.slice(0, n).join('-');
    if (users.get(name)) return name;
  }
  // Unknown names are counted by their first part, the same way as known ones (a refusal tells nothing).
  return tokens[0] ?? '';
}
