// The users directory: user records in the store (SQLite, or Redis shared by a fleet) mirrored in memory,
// which is all the proxy's hot path reads. Its records live in the gateway's table (src/admission/users.ts:
// login, refusal, each user's live limits), which the gateway reads below it; the admin routes change them here.
//
// Creation is journaled like orders (src/orders/placer.ts): the record is written first in state `creating`
// (the intent), then the platform sub account and its limit are made (src/users/sub-account.ts, which reads
// before it writes), then the record becomes `ready`. A crash between the platform call and the last write
// leaves the intent; `resume()` (at start and on every sweep) runs the platform step again — it finds the sub
// account made the first time — and finishes: one consistent user. A platform refusal removes the intent and
// comes back to the client with the platform's code; an unknown outcome (unreachable) keeps it for the sweep.
//
// Passwords: the store keeps only the scrypt hash. Hashing costs ~40-60 ms on the thread pool, so it is paid
// once per user and process: a verified password's SHA-256 is remembered in memory (never stored) and a later
// check of that password is one digest and a constant-time compare; any other password costs a full scrypt,
// like an unknown name (equal work: timing tells nothing). The router's credential cache and back-off
// (src/proxy/auth-*.ts) sit in front of that. Changing a user swaps its LocalUser object, which invalidates
// the router's cached pairs for it.
//
// Config users (`users:` in the config) are records too (source 'config'): at start and reload the config's
// fields win for them; config users no longer in the config are removed. API users survive restarts and
// reloads. In a fleet each daemon follows the others' changes through the store's version counter
// (usersChangedSince) every `followMs`.
import { timingSafeEqual } from 'node:crypto';
import type { Accounting, AccountingUser, RemovedConfigUser } from '../accounting/accounting.ts';
import { isRetryable, PlatformError } from '../platform/errors.ts';
import type { LocalUser } from '../proxy/types.ts';
import { StoreConflictError } from '../store/errors.ts';
import type { StoredUser, UserStore, UserWrite } from '../store/types.ts';
import type { Logger } from '../telemetry/logger.ts';
import { UserChangedError, UserExistsError, UserNotFoundError, UserPendingError } from './errors.ts';
import { DueQueue } from './due-queue.ts';
import type { UserLimiter } from '../admission/limiter.ts';
import { UserTable, type UserRow } from '../admission/users.ts';
import { checkUserPort, checkUserTls, type PortCheckOptions } from './port-check.ts';
import { NameIndex, pageOf, PAGE_DEFAULT, type UserSort } from './listing.ts';
import { generatePassword, hashGeneratedPassword, hashPasswordAsync, passwordDigest, verifyPasswordAsync } from '../admission/password.ts';
import { expiryOf, readStoredData, usageKeyOf, type CreateUserInput, type UserData, type UserPatch, type UserView } from './record.ts';
import { checkProducts } from './product-check.ts';
import type { SubAccountPort } from './sub-account.ts';
import { InternalError } from '../errors/rotor-error.ts';

/** Unfinished creations a resume runs at once by default (config accounts.batchConcurrency's default). */
const RESUME_CONCURRENCY = 64;
/** A resume makes its finished creations ready this many at a time (a batch's rows per request). */
const RESUME_WRITE_EVERY = 1000;
/**
 * Fleet: how long another daemon's intents are left to it before a resume here takes them (its batch of 1,000
 * against a platform 100 ms away takes ~2 s; its own sweep retries every 5 s).
 */
const FOLLOWED_INTENT_GRACE_MS = 60_000;

/** A config `users:` entry as the directory takes it (src/config/schema.ts UserConfig). */
export interface ConfigUserInput extends Partial<
  Omit<
    UserData,
    | 'name'
    | 'source'
    | 'createdAt'
    | 'mainAccount'
    | 'rules'
    | 'listen'
    | 'expiresAt'
    | 'pricePerGb'
    | 'requestRules'
    | 'instances'
    | 'products'
  >
> {
  name: string;
  password: string;
  mainAccount: string;
  limitBytes?: number;
  /** Shapes of src/users/schemas.ts (the config's); stored as given. */
  rules?: unknown;
  /** src/users/request-rules-schema.ts's shape (the config's); stored as given. */
  requestRules?: unknown;
  listen?: { port: number; allowIps: readonly string[] } | null | undefined;
  expiresAt?: string | null | undefined;
  pricePerGb?: number | null | undefined;
  instances?: readonly string[] | null | undefined;
  products?: readonly string[] | null | undefined;
}

/** A user's record in memory: the gateway's row (src/admission/users.ts) and what only the directory reads. */
interface Entry extends UserRow<LocalUser> {
  data: UserData;
  version: number;
}

/** One row of Users.createMany: createHashed's arguments. */
export interface HashedCreation {
  fields: Omit<CreateUserInput, 'password'>;
  hash: string;
  digest: Buffer | null;
}

export interface UserListQuery {
  /** Names starting with this. */
  prefix?: string;
  enabled?: boolean;
  source?: 'config' | 'api';
  period?: string;
  /** Page size; default 100 (src/users/listing.ts). */
  limit?: number;
  /** The previous page's `next` (a name, or `<usedBytes>:<name>` for sort=usage). */
  after?: string;
  /** name (default, ascending) or usage (usedBytes descending, then name). */
  sort?: UserSort;
}

export interface UsersOptions {
  store: UserStore;
  accounting: Accounting;
  platform: SubAccountPort;
  /** The productNo a user with product '' draws from (resolved at start). */
  defaultProduct?: () => string;
  logger?: Logger;
  now?: () => number;
  /** Fleet: follow the other daemons' changes this often (ms); 0 = not at all (one daemon). */
  followMs?: number;
  /** Retry unfinished creations this often; default 5000 ms. */
  sweepMs?: number;
  /**
   * How many unfinished creations a resume runs at once (config accounts.batchConcurrency, as a batch's rows);
   * their platform calls go through the sub accounts' window (src/users/sub-account.ts). Default 64.
   */
  resumeConcurrency?: number;
  /** Called after users were added, changed or removed (names), off the data path. */
  onChange?: (names: string[], removed: string[]) => void;
  /** Checks a new or changed `listen.port` before the write (src/users/port-check.ts); absent = none. */
  ports?: PortCheckOptions;
}

export class Users {
  /** The gateway's view (Router's UserDirectory, the gate's rows); its map is the directory's records. */
  readonly table = new UserTable<LocalUser, Entry>();
  private readonly entries = this.table.rows;
  /** The names in order, for paged listing (src/users/listing.ts). */
  private readonly index = new NameIndex(() => this.entries.keys());
  private readonly store: UserStore;
  private readonly accounting: Accounting;
  private readonly platform: SubAccountPort;
  private readonly logger: Logger | undefined;
  private readonly now: () => number;
  private readonly defaultProduct: () => string;
  private readonly onChange: UsersOptions['onChange'];
  private version = 0;
  private timers: NodeJS.Timeout[] = [];
  private resuming: Promise<void> | undefined;
  private following: Promise<void> | undefined;
  private closed = false;
  /** Creations running in a request now (the sweep leaves them alone). */
  private readonly creating = new Set<string>();
  // Kept as users change so the periodic rounds look at what matters, not at every user: the intents (state
  // 'creating') the sweep resumes, the users marked for metric series, the expiries not yet come.
  private readonly intents = new Set<string>();
  /**
   * Fleet: the intents another daemon wrote, when this one first saw them (follow). That daemon is making them
   * (a batch of 1,000 is written as intents, then made ready together): they are left to it for
   * FOLLOWED_INTENT_GRACE_MS, and resumed here only if they stay intents longer (the daemon stopped or could not
   * reach the platform). A subset of `intents`.
   */
  private readonly followedIntents = new Map<string, number>();
  private markedNames = new Set<string>();
  private readonly expiries = new DueQueue();
  private readonly expiredListeners: ((user: string, expiresAt: number) => void)[] = [];

  constructor(private readonly options: UsersOptions) {
    this.store = options.store;
    this.accounting = options.accounting;
    this.platform = options.platform;
    this.logger = options.logger;
    this.now = options.now ?? Date.now;
    this.defaultProduct = options.defaultProduct ?? (() => '');
    this.onChange = options.onChange;
  }

  // ── the gateway's view ──

  get(name: string): LocalUser | undefined {
    return this.table.get(name);
  }

  /** The password check of the proxy's login (src/admission/users.ts UserTable.verify). */
  verify(user: LocalUser | undefined, password: string): boolean | Promise<boolean> {
    return this.table.verify(user, password);
  }

  /** The user's live limiter, made on first use with the record's rate and cap; undefined for an unknown name. */
  limiter(name: string): UserLimiter | undefined {
    return this.table.limiter(name);
  }

  /** Limiters made so far (users admitted at least once since start and not removed). */
  get limitersHeld(): number {
    return this.table.limitersHeld;
  }

  /** Why a known user may not connect now (disabled, expired), or undefined. */
  refusal(name: string, now: number): string | undefined {
    return this.table.refusal(name, now);
  }

  /** Users marked for per-user metric series (a new Set object whenever the set changes; do not modify). */
  marked(): Set<string> {
    return this.markedNames;
  }

  /**
   * Called once per (user, expiry) when the expiry comes (or at start for one already past), after the
   * user's running connections were closed; for the `user.expired` event.
   */
  onExpired(listener: (user: string, expiresAt: number) => void): void {
    this.expiredListeners.push(listener);
  }

  /** Every ready user as the gateway sees it (balances, limit sync, whitelist). */
  locals(): LocalUser[] {
    const out: LocalUser[] = [];
    // forEach, not for-of: no iterator result per entry (a start lists 100,000 users a few times).
    this.entries.forEach((e) => {
      if (e.state === 'ready') out.push(e.local);
    });
    return out;
  }

  get size(): number {
    return this.entries.size;
  }

  /** Every record as held here, hash included (a fleet puts them back into a Redis that lost them). */
  held(): StoredUser[] {
    const out: StoredUser[] = [];
    for (const e of this.entries.values())
      out.push({ name: e.data.name, data: e.data, passwordHash: e.hash, state: e.state, version: e.version, updatedAt: 0 });
    return out;
  }

  // ── lifecycle ──

  /** Loads every stored user, seeds the config's, applies them to accounting, starts the sweeps. */
  async start(configUsers: readonly ConfigUserInput[]): Promise<void> {
    const { changed, version } = await this.store.usersChangedSince(0);
    this.version = version;
    for (const s of changed) this.install(s);
    await this.seed(configUsers);
    // A start never fails on the catalogue (the platform may have dropped a product while the daemon was down):
    // an unknown product of a config user is logged, naming its key, and refused when a connection names it.
    void this.checkConfigProducts(configUsers).catch((err: unknown) =>
      this.logger?.error({ err }, 'a config user names a product the catalogue does not hold (refused when a connection names it)'),
    );
    // One read of the stored usage for every stored user (not one per user: 100,000 users restart in seconds).
    const stored: AccountingUser[] = [];
    this.entries.forEach((e) => {
      if (e.state === 'ready' && e.data.source === 'api') stored.push(accountingUser(e.data));
    });
    // In a fleet their leases come after ready (Accounting.upsertUsers leasesAfter; src/fleet/allowance.ts):
    // 100,000 users' leases were a third of a restart; each user is served from a bounded start share meanwhile.
    await this.accounting.upsertUsers(stored, { leasesAfter: true });
    // The names' order for paged listing, sorted now rather than by the first GET /v1/users.
    this.index.all();
    const sweepMs = this.options.sweepMs ?? 5000;
    this.timers.push(setInterval(() => void this.resume(), sweepMs));
    // Expiry closes the user's running connections (admission refuses new ones by itself).
    this.timers.push(setInterval(() => this.expireRunning(), 1000));
    if (this.options.followMs) this.timers.push(setInterval(() => void this.follow(), this.options.followMs));
    for (const t of this.timers) t.unref();
    void this.resume();
  }

  /**
   * The config users' `products` against the catalogue: throws UnknownProductError naming `users.<n>.products.<i>`
   * (a reload asks it before anything changes, and is refused); a catalogue that cannot be read passes, logged.
   */
  async checkConfigProducts(configUsers: readonly ConfigUserInput[]): Promise<void> {
    await Promise.all(configUsers.map((u, n) => checkProducts(this.platform, u.products, `users.${n}.products`, this.logger, u.name)));
  }

  /**
   * Applies the config's users (start and SIGHUP): config fields win for them; config users gone from the
   * config are removed. Their limits go through Accounting.setUsers (its config/admin precedence).
   */
  async seed(configUsers: readonly ConfigUserInput[]): Promise<void> {
    const wanted = new Set(configUsers.map((u) => u.name));
    const removed: string[] = [];
    // The config users gone from the config, found without copying every entry (100,000 users at a start).
    const gone: string[] = [];
    this.entries.forEach((e, name) => {
      if (e.data.source === 'config' && !wanted.has(name)) gone.push(name);
    });
    for (const name of gone) {
      const e = this.entries.get(name);
      // Removed from the file is not DELETE /v1/users/:name: the same user put back (an edit and its revert, a typo
      // fixed) is the same customer, and continues under the same usage key (seed's `back` below). Remembered before
      // the delete, so no tombstone of a config removal is without it.
      if (e) await this.accounting.rememberRemovedConfig(name, { createdAt: e.data.createdAt, ...incarnationField(e.data.incarnation) });
      await this.store.deleteUser(name);
      this.uninstall(name);
      // Removed from the file is deleted: its open connections end, as DELETE /v1/users/:name ends them.
      if (e) this.stopRunning(e, 'deleted');
      removed.push(name);
    }
    // A config user new to the store under a name that was deleted and has usage history is another customer, as
    // a user made again through the API is (newRecord): its usage gets a key of its own, from its creation time,
    // kept in its record across restarts. A name without a tombstone keeps its plain key (a store from before
    // users were records holds the config users' usage rows under their names, and they are those customers').
    // Except a config user removed from the config and put back (`back`): the same customer, its key and creation
    // time as they were, so its usage counts against its quota as before and a limit set through the API stays.
    const now = this.now();
    const { reused, back } = await this.reusedNames(configUsers.filter((u) => !this.entries.has(u.name)).map((u) => u.name));
    const incarnationOf = (name: string): number | undefined => {
      const before = this.entries.get(name);
      if (before !== undefined) return before.data.incarnation;
      const was = back.get(name);
      if (was !== undefined) return was.incarnation;
      return reused.has(name) ? now : undefined;
    };
    await this.accounting.setUsers(
      configUsers.map((u) => {
        const usageKey = usageKeyOf({ name: u.name, incarnation: incarnationOf(u.name) });
        return {
          name: u.name,
          limitBytes: u.quota?.bytes ?? u.limitBytes ?? -1,
          period: u.quota?.period ?? 'total',
          ...(usageKey !== undefined ? { usageKey } : {}),
        };
      }),
    );
    for (const u of configUsers) {
      const before = this.entries.get(u.name);
      const limit = this.accounting.limitOf(u.name) ?? u.quota?.bytes ?? u.limitBytes ?? -1;
      const incarnation = incarnationOf(u.name);
      const data: UserData = {
        ...defaults(),
        ...(before?.data ?? {}),
        ...stripUndefined({ ...u, password: undefined, limitBytes: undefined }),
        name: u.name,
        quota: { bytes: limit, period: u.quota?.period ?? 'total' },
        source: 'config',
        createdAt: before?.data.createdAt ?? back.get(u.name)?.createdAt ?? now,
        ...(incarnation !== undefined && incarnation > 0 ? { incarnation } : {}),
      } as UserData;
      // The password this process verified against the stored hash (the last seed's, or a login's) needs no scrypt:
      // a reload of 10,000 unchanged config users made 10,000 checks on the hash threads the logins wait for.
      const digest = passwordDigest(u.password);
      const known = before?.verified != null && before.verified.length === digest.length && timingSafeEqual(before.verified, digest);
      const hash =
        before && (known || (await verifyPasswordAsync(u.password, before.hash, 'admin')))
          ? before.hash
          : await hashPasswordAsync(u.password);
      if (before && before.state === 'ready' && hash === before.hash && same(before.data, data)) {
        before.verified = digest;
        continue;
      }
      // The config's users are reconciled with the platform by the accounts component, not journaled here.
      const stored = await this.store.putUser({ name: u.name, data, passwordHash: hash, state: 'ready' });
      const e = this.install(stored);
      e.verified = digest;
      // `enabled: false` in the file ends the user's open connections, as PATCH {enabled: false} does.
      if (before?.data.enabled && !e.data.enabled) this.stopRunning(e, 'disabled');
    }
    // Put back: remembered no more (a DELETE /v1/users/:name of it later, and the config again, is another customer).
    for (const name of back.keys()) await this.accounting.forgetRemovedConfig(name);
    this.onChange?.(
      configUsers.map((u) => u.name),
      removed,
    );
  }

  /**
   * Among `names` (no record here), the deleted ones: `back`, config users removed from the config (the same
   * customers, put back); `reused`, the others with usage history (made again, another customer).
   */
  private async reusedNames(names: readonly string[]): Promise<{ reused: Set<string>; back: Map<string, RemovedConfigUser> }> {
    if (names.length === 0) return { reused: new Set(), back: new Map() };
    const deleted = await this.store.deletedAmong(names);
    if (deleted.size === 0) return { reused: deleted, back: new Map() };
    const back = await this.accounting.removedConfig([...deleted]);
    const others = [...deleted].filter((n) => !back.has(n));
    return { reused: others.length > 0 ? await this.accounting.withHistory(others) : new Set(), back };
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const t of this.timers) clearInterval(t);
    this.timers = [];
    await Promise.allSettled([this.resuming, this.following]);
    for (const e of this.entries.values()) e.limiter?.close();
  }

  // ── admin operations ──

  async create(input: CreateUserInput): Promise<UserView> {
    const existing = this.entries.get(input.name);
    if (existing) throw new UserExistsError(input.name, existing.state === 'creating');
    checkUserTls(this.options.ports, input.listen);
    await this.checkPort(input.name, input.listen?.port);
    await checkProducts(this.platform, input.products, 'products', this.logger, input.name);
    const generated = input.password === undefined;
    const password = input.password ?? generatePassword();
    const { password: _omit, ...fields } = input;
    // A generated password (144 random bits) needs no slow hash (src/admission/password.ts).
    const hash = generated ? hashGeneratedPassword(password) : await hashPasswordAsync(password);
    try {
      await this.createHashed(fields, hash, passwordDigest(password));
    } catch (err) {
      // Kept as an intent the next sweep finishes: the answer carries the password it will have (nobody else
      // would ever get it).
      if (err instanceof UserPendingError && generated) err.withPassword(password);
      throw err;
    }
    const view = this.view(input.name)!;
    return generated ? { ...view, password } : view;
  }

  /**
   * A creation whose password is already hashed (create, and the batch path src/users/bulk.ts): the journal's
   * intent, the platform step, the record made ready. `digest`: the password's SHA-256 when known here.
   * `quiet`: no info line per user (a batch logs one for all).
   */
  async createHashed(
    fields: Omit<CreateUserInput, 'password'>,
    hash: string,
    digest: Buffer | null,
    options: { quiet?: boolean } = {},
  ): Promise<void> {
    const existing = this.entries.get(fields.name);
    if (existing) throw new UserExistsError(fields.name, existing.state === 'creating');
    checkUserTls(this.options.ports, fields.listen);
    const data = await this.newRecord(fields);
    let stored: StoredUser;
    try {
      stored = await this.store.putUser({ name: fields.name, data, passwordHash: hash, state: 'creating' }, { ifAbsent: true });
    } catch (err) {
      if (err instanceof StoreConflictError) throw new UserExistsError(fields.name);
      throw err;
    }
    this.install(stored).verified = digest;
    this.creating.add(fields.name);
    try {
      await this.finishCreation(stored, { fresh: true, quiet: options.quiet === true });
    } finally {
      this.creating.delete(fields.name);
    }
  }

  /**
   * Many creations whose passwords are already hashed (the batch path, src/users/bulk.ts), each as
   * createHashed makes one, but with one store transaction for all the intents and one for all the records
   * made ready (not two commits per user), the platform step `concurrency` rows at a time, and one change
   * notice for all. Each row fails alone: the answer holds, per row, undefined (made) or what it failed with.
   */
  async createMany(rows: readonly HashedCreation[], options: { concurrency: number }): Promise<unknown[]> {
    const failures: unknown[] = new Array<unknown>(rows.length).fill(undefined);
    const intents: { at: number; data: UserData }[] = [];
    // Each row's products against the catalogue (each productNo read once: the catalogue caches it).
    const productChecks = await Promise.all(
      rows.map(({ fields }) =>
        checkProducts(this.platform, fields.products, 'products', this.logger, fields.name).catch((err: unknown) => err),
      ),
    );
    for (let at = 0; at < rows.length; at++) {
      const { fields } = rows[at]!;
      const existing = this.entries.get(fields.name);
      if (existing) {
        failures[at] = new UserExistsError(fields.name, existing.state === 'creating');
        continue;
      }
      if (productChecks[at] !== undefined) {
        failures[at] = productChecks[at];
        continue;
      }
      try {
        checkUserTls(this.options.ports, fields.listen);
      } catch (err) {
        failures[at] = err;
        continue;
      }
      intents.push({ at, data: { ...fields, source: 'api', createdAt: this.now() } });
    }
    // Names made again (deleted before): each new customer gets its own usage key (newRecord), one read for all.
    const reused = intents.length > 0 ? await this.accounting.withHistory(intents.map((i) => i.data.name)) : new Set<string>();
    for (const i of intents) if (reused.has(i.data.name)) i.data.incarnation = i.data.createdAt;
    for (const name of reused) await this.accounting.forgetRemovedConfig(name);
    const written = await this.putMany(
      intents.map(({ at, data }) => ({ user: { name: data.name, data, passwordHash: rows[at]!.hash, state: 'creating' }, ifAbsent: true })),
    );
    const pending: { at: number; stored: StoredUser; data: UserData }[] = [];
    written.forEach((w, i) => {
      const { at, data } = intents[i]!;
      if (w instanceof StoreConflictError) failures[at] = new UserExistsError(data.name);
      else {
        this.install(w).verified = rows[at]!.digest;
        this.creating.add(data.name);
        pending.push({ at, stored: w, data });
      }
    });
    try {
      const done: typeof pending = [];
      let next = 0;
      const worker = async (): Promise<void> => {
        while (next < pending.length) {
          const p = pending[next++]!;
          try {
            await this.platformStep(p.stored.name, p.data, { fresh: true, quiet: true });
            done.push(p);
          } catch (err) {
            failures[p.at] = err;
          }
        }
      };
      await Promise.all(Array.from({ length: Math.max(1, Math.min(options.concurrency, pending.length)) }, worker));
      await this.makeReady(done.map((d) => d.stored));
    } finally {
      for (const p of pending) this.creating.delete(p.stored.name);
    }
    return failures;
  }

  /**
   * The last write of creations whose platform step ended: one store unit for all the records made ready, their
   * accounting as one batch, one change notice. A record changed meanwhile (another daemon finished or removed
   * it) is taken as stored. `said`: an info line per user made ready. Returns how many were made ready here.
   */
  private async makeReady(done: readonly StoredUser[], said?: string): Promise<number> {
    const ready = await this.putMany(
      done.map((stored) => ({
        user: { name: stored.name, data: stored.data, passwordHash: stored.passwordHash, state: 'ready' },
        ifVersion: stored.version,
      })),
    );
    const written: StoredUser[] = [];
    for (let i = 0; i < done.length; i++) {
      const r = ready[i]!;
      if (r instanceof StoreConflictError) await this.takeStored(done[i]!.name);
      else written.push(r);
    }
    return this.takeReady(written, said);
  }

  /**
   * Records made ready in the store, taken here: installed, their accounting as one batch (rows read, limits
   * written, fleet leases taken together, as applyAccounting does for an API user, not one round trip after
   * another per user: 20,000 users on Redis took 93 s), one change notice. Returns how many were taken.
   */
  private async takeReady(records: readonly StoredUser[], said?: string): Promise<number> {
    const names: string[] = [];
    const made: AccountingUser[] = [];
    for (const r of records) {
      const e = this.install(r);
      if (e.state === 'ready') made.push(accountingUser(e.data));
      names.push(r.name);
    }
    await this.accounting.upsertUsers(made);
    if (said !== undefined) for (const user of names) this.logger?.info({ user }, said);
    if (names.length > 0) this.onChange?.(names, []);
    return names.length;
  }

  /**
   * Intents written without the check of newRecord (`rotor users import --store` writes them offline): those whose
   * name has usage history get their incarnation now, in the ready write. An intent newRecord made already carries
   * its answer (a name without history has no usage row before its ready write).
   */
  private async reusedIntents(intents: StoredUser[]): Promise<StoredUser[]> {
    const unchecked = intents.filter((s) => {
      const d = s.data as Partial<UserData> | null;
      return typeof d === 'object' && d !== null && d.source === 'api' && d.incarnation === undefined;
    });
    if (unchecked.length === 0) return intents;
    const reused = await this.accounting.withHistory(unchecked.map((s) => s.name));
    if (reused.size === 0) return intents;
    for (const name of reused) await this.accounting.forgetRemovedConfig(name);
    return intents.map((s) => {
      if (!reused.has(s.name)) return s;
      const d = s.data as UserData;
      if (d.incarnation !== undefined || typeof d.createdAt !== 'number' || d.createdAt <= 0) return s;
      return { ...s, data: { ...d, incarnation: d.createdAt } };
    });
  }

  /** The writes as one unit of the store (one transaction or script). */
  private async putMany(writes: readonly UserWrite[]): Promise<(StoredUser | StoreConflictError)[]> {
    return writes.length === 0 ? [] : this.store.putUsers(writes);
  }

  /** A creation finished (or deleted) by someone else meanwhile: take what the store says. */
  private async takeStored(name: string): Promise<void> {
    const now = await this.store.getUser(name);
    if (now) this.install(now);
    else this.uninstall(name);
  }

  /**
   * A creation's platform step: a refusal removes the intent, an unknown outcome keeps it (both rethrown). A
   * system error (code 500) still answered after the retries is no refusal: the platform was strained (many
   * creations at once, a batch's or a resume's), and the next sweep runs the step again.
   */
  private async platformStep(name: string, data: UserData, options: { fresh?: boolean; quiet?: boolean }): Promise<void> {
    try {
      await this.platform.ensure(data, options);
    } catch (err) {
      if (err instanceof PlatformError && !isRetryable(err)) {
        // A refusal: the user does not come to be.
        await this.store.deleteUser(name).catch(() => false);
        this.uninstall(name);
        this.logger?.warn({ user: name, platformCode: err.platformCode }, 'user not created: the platform refused its sub account');
      } else {
        this.logger?.warn({ user: name, err }, 'user creation unfinished (platform outcome unknown); it will be resumed');
        throw new UserPendingError(name, err);
      }
      throw err;
    }
  }

  /** The platform step and the last write of a creation (also run by resume). */
  private async finishCreation(stored: StoredUser, options: { fresh?: boolean; quiet?: boolean } = {}): Promise<void> {
    const data = readStoredData(stored.name, stored.data);
    if (!data) throw new InternalError(`stored user ${stored.name} is unreadable`);
    await this.platformStep(stored.name, data, options);
    let ready: StoredUser;
    try {
      ready = await this.store.putUser(
        { name: stored.name, data: stored.data, passwordHash: stored.passwordHash, state: 'ready' },
        { ifVersion: stored.version },
      );
    } catch (err) {
      if (!(err instanceof StoreConflictError)) throw err;
      await this.takeStored(stored.name);
      return;
    }
    const e = this.install(ready);
    await this.applyAccounting(e);
    if (options.quiet !== true) this.logger?.info({ user: stored.name }, 'user created');
    this.onChange?.([stored.name], []);
  }

  /**
   * Finishes every creation left unfinished (a crash, the platform unreachable, `rotor users import --store`):
   * `resumeConcurrency` intents at a time, each read again from the store and its platform step run (through the
   * sub accounts' window, as a batch's rows), and the records made ready RESUME_WRITE_EVERY at a time (one store
   * unit, one accounting batch, one change notice) while the next ones' steps run. One after another, 100,000
   * intents against a platform 20 ms away took ~45 min. An intent stays one until its ready write: a step
   * whose outcome is unknown, a failed write or a stop (close takes no new intent) leaves it for the next sweep
   * or start, whose step reads before it writes.
   */
  resume(): Promise<void> {
    if (this.resuming || this.closed) return this.resuming ?? Promise.resolve();
    const run = this.resumeAll().finally(() => {
      this.resuming = undefined;
    });
    this.resuming = run;
    return run;
  }

  private async resumeAll(): Promise<void> {
    // Only the intents known here (loaded at start, or followed from the fleet): no scan of every user.
    const names: string[] = [];
    const now = this.now();
    for (const name of this.intents) {
      if (this.creating.has(name)) continue;
      const seen = this.followedIntents.get(name);
      if (seen === undefined || now - seen >= FOLLOWED_INTENT_GRACE_MS) names.push(name);
    }
    if (names.length === 0) return;
    const started = this.now();
    let finished = 0;
    let done: StoredUser[] = [];
    /** Records found ready in the store while held 'creating' here (below). */
    const landed: StoredUser[] = [];
    let writing: Promise<void> = Promise.resolve();
    let writesInFlight = 0;
    const write = (): void => {
      const these = done;
      done = [];
      if (these.length === 0) return;
      writesInFlight++;
      writing = writing.then(async () => {
        try {
          finished += await this.makeReady(await this.reusedIntents(these), 'unfinished user creation resumed and finished');
        } catch (err) {
          this.logger?.warn({ err, users: these.length }, 'resumed user creations not written ready; the next sweep resumes them');
        } finally {
          writesInFlight--;
        }
      });
    };
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < names.length && !this.closed) {
        // One set written while the next is made, no more, whichever worker filled it: a store slower than the
        // platform holds every worker back rather than queueing finished creations in memory.
        while (done.length >= RESUME_WRITE_EVERY) {
          if (writesInFlight === 0) write();
          else await writing;
        }
        const s = await this.store.getUser(names[next++]!).catch(() => undefined);
        if (!s || this.creating.has(s.name)) continue;
        if (s.state !== 'creating') {
          // Ready in the store, still 'creating' here: a ready write of this daemon's that landed though it was
          // seen failing (a Redis script runs to its end past the client's command timeout). Taken as stored.
          const held = this.entries.get(s.name);
          if (s.state === 'ready' && held?.state === 'creating' && held.version < s.version) landed.push(s);
          continue;
        }
        try {
          // An unreadable record throws here (and is logged).
          const e = this.install(s);
          // Created first, as a batch's rows: the platform refuses a sub account's name twice (10061, then read),
          // so one made before the crash is found, and an intent `rotor users import --store` wrote costs one
          // call fewer than a read before the creation.
          await this.platformStep(s.name, e.data, { fresh: true, quiet: true });
        } catch {
          // logged by install or platformStep; the next sweep tries again
          continue;
        }
        done.push(s);
      }
    };
    const concurrency = Math.max(1, Math.min(this.options.resumeConcurrency ?? RESUME_CONCURRENCY, names.length));
    await Promise.all(Array.from({ length: concurrency }, worker));
    write();
    await writing;
    if (landed.length > 0) {
      try {
        finished += await this.takeReady(landed, 'user creation found finished in the store and taken');
      } catch (err) {
        this.logger?.warn({ err, users: landed.length }, 'user creations found finished could not be taken; the next sweep tries again');
      }
    }
    // A sweep that finished none says nothing more (each intent left was logged with why).
    if (finished > 0)
      this.logger?.info({ resumed: finished, intents: names.length, ms: this.now() - started }, 'unfinished user creations resumed');
  }

  async patch(name: string, patch: UserPatch): Promise<UserView> {
    const e = this.require(name);
    checkUserTls(this.options.ports, patch.listen);
    if (patch.listen && patch.listen.port !== e.data.listen?.port) await this.checkPort(name, patch.listen.port);
    await checkProducts(this.platform, patch.products, 'products', this.logger, name);
    const data: UserData = { ...e.data, ...stripUndefined(patch) } as UserData;
    const stored = await this.write(e, data, e.hash);
    const next = this.install(stored);
    next.verified = e.verified;
    await this.applyAccounting(next);
    if (!next.data.enabled && e.data.enabled) this.stopRunning(next, 'disabled');
    if (platformFieldsChanged(e.data, data))
      await this.platform
        .ensure(data)
        .catch((err: unknown) => this.logger?.warn({ user: name, err }, 'platform side of a user change failed; the limit sync retries'));
    this.onChange?.([name], []);
    return this.view(name)!;
  }

  async setLimit(name: string, limitBytes: number): Promise<UserView> {
    const e = this.require(name);
    return this.patch(name, { quota: { bytes: limitBytes, period: e.data.quota.period } });
  }

  async remove(name: string): Promise<void> {
    this.require(name);
    await this.store.deleteUser(name);
    const e = this.entries.get(name);
    this.uninstall(name);
    if (e) this.stopRunning(e, 'deleted');
    this.onChange?.([], [name]);
    this.logger?.info({ user: name }, 'user deleted');
  }

  /** Sets the password, or makes one up (then returned once). */
  async setPassword(name: string, password?: string): Promise<UserView> {
    const e = this.require(name);
    const next = password ?? generatePassword();
    const stored = await this.write(e, e.data, password === undefined ? hashGeneratedPassword(next) : await hashPasswordAsync(next));
    this.install(stored).verified = passwordDigest(next);
    const view = this.view(name)!;
    return password === undefined ? { ...view, password: next } : view;
  }

  view(name: string): UserView | undefined {
    const e = this.entries.get(name);
    if (!e) return undefined;
    const usage = this.accounting.get(name);
    const { createdAt, incarnation: _incarnation, ...data } = e.data;
    return {
      ...data,
      usedBytes: usage?.usedBytes ?? 0,
      limitBytes: e.data.quota.bytes,
      activeConnections: usage?.activeConnections ?? 0,
      periodKey: this.accounting.periodKeyOf(name) ?? 'total',
      state: e.state,
      createdAt: new Date(createdAt).toISOString(),
    };
  }

  /** One page of users (src/users/listing.ts): `next` is the cursor of the page after, `total` every match. */
  async list(query: UserListQuery = {}): Promise<{ items: UserView[]; next: string | null; total: number }> {
    const { enabled, source, period } = query;
    const page = await pageOf(
      this.index,
      {
        filtered: enabled !== undefined || source !== undefined || period !== undefined,
        keep: (name) => {
          const d = this.entries.get(name)?.data;
          // Removed while the page was read (the pass yields): not listed.
          if (d === undefined) return false;
          return (
            (enabled === undefined || d.enabled === enabled) &&
            (source === undefined || d.source === source) &&
            (period === undefined || d.quota.period === period)
          );
        },
        usedBytes: (name) => this.accounting.usedOf(name),
      },
      { prefix: query.prefix, after: query.after, sort: query.sort, limit: query.limit ?? PAGE_DEFAULT },
    );
    return { items: page.names.flatMap((name) => this.view(name) ?? []), next: page.next, total: page.total };
  }

  /**
   * Since when the records and usage rows of this name are this user's (epoch ms): the creation time of a user
   * made under a name that was deleted before (another customer used it until then), 0 for the name's first
   * user (its whole history). Undefined for an unknown name.
   */
  historySince(name: string): number | undefined {
    const d = this.entries.get(name)?.data;
    return d === undefined ? undefined : (d.incarnation ?? 0);
  }

  // ── internals ──

  /**
   * A new API user's record. A name with usage history (deleted and made again: another customer) gets an
   * incarnation, its creation time: its usage is kept under a key of its own, so it starts at 0 against its quota,
   * and its portal shows nothing from before it; the deleted customer's usage, records and rollups stay as they
   * were, for the reseller's bill (src/users/record.ts UserData.incarnation).
   */
  private async newRecord(fields: Omit<CreateUserInput, 'password'>): Promise<UserData> {
    const createdAt = this.now();
    const reused = (await this.accounting.withHistory([fields.name])).has(fields.name);
    // A config user removed from the config under this name is not put back by the config now: forgotten.
    if (reused) await this.accounting.forgetRemovedConfig(fields.name);
    return { ...fields, source: 'api', createdAt, ...(reused ? { incarnation: createdAt } : {}) };
  }

  /** PortInUseError when `port` is taken (another user's, the daemon's own, another process's). */
  private async checkPort(name: string, port: number | undefined): Promise<void> {
    const ports = this.options.ports;
    if (!ports || port === undefined || port === 0) return;
    await checkUserPort(ports, name, port, (p) => {
      for (const e of this.entries.values()) if (e.data.listen?.port === p && e.data.name !== name) return e.data.name;
      return undefined;
    });
  }

  private require(name: string): Entry {
    const e = this.entries.get(name);
    if (!e || e.state !== 'ready') throw new UserNotFoundError(name);
    return e;
  }

  private async write(e: Entry, data: UserData, hash: string): Promise<StoredUser> {
    try {
      return await this.store.putUser({ name: e.data.name, data, passwordHash: hash, state: e.state }, { ifVersion: e.version });
    } catch (err) {
      if (!(err instanceof StoreConflictError)) throw err;
      // Another daemon changed it: take its version, so the client's retry applies to what is there.
      const now = await this.store.getUser(e.data.name);
      if (now) this.install(now);
      throw new UserChangedError(e.data.name);
    }
  }

  /** Puts a stored record in memory (new LocalUser object; the limiter is kept across changes). */
  private install(s: StoredUser): Entry {
    const data = readStoredData(s.name, s.data);
    if (!data) {
      this.logger?.error({ user: s.name }, 'stored user record is unreadable; ignored');
      throw new InternalError(`stored user ${s.name} is unreadable`);
    }
    const before = this.entries.get(s.name);
    if (before === undefined) this.index.added(s.name);
    const limiter = before?.limiter ?? null;
    if (limiter !== null) {
      limiter.setRate(data.rateBytesPerSec);
      limiter.maxConnections = data.maxConnections;
    }
    const local: LocalUser = {
      name: s.name,
      password: s.passwordHash,
      mainAccount: data.mainAccount,
      product: data.product === '' ? this.defaultProduct() : data.product,
      draw: data.draw,
      sessTime: data.sessTime,
      limitBytes: data.quota.bytes,
      rules: data.rules,
      requestRules: data.requestRules.length > 0 ? data.requestRules : null,
      expiresAt: data.expiresAt,
      listen: data.listen,
      pricePerGb: data.pricePerGb,
      instances: data.instances,
      products: data.products,
      // Sets, made once per record change: asked on every -instance- and -product- connection (a list of up to
      // 1,000 instanceNos was scanned per connection).
      rights: {
        instances: data.instances === null ? null : new Set(data.instances),
        products: data.products === null ? null : new Set(data.products),
      },
    };
    const e: Entry = {
      data,
      hash: s.passwordHash,
      state: s.state,
      version: s.version,
      local,
      limiter,
      expiresAt: expiryOf(data),
      verified: before && before.hash === s.passwordHash ? before.verified : null,
    };
    this.entries.set(s.name, e);
    if (e.state === 'creating') this.intents.add(s.name);
    else {
      this.intents.delete(s.name);
      this.followedIntents.delete(s.name);
    }
    if (data.metrics !== (before?.data.metrics ?? false)) this.setMarked(s.name, data.metrics);
    if (e.expiresAt !== null && e.expiresAt !== before?.expiresAt) this.expiries.push(e.expiresAt, s.name);
    return e;
  }

  private setMarked(name: string, marked: boolean): void {
    const next = new Set(this.markedNames);
    if (marked) next.add(name);
    else next.delete(name);
    this.markedNames = next;
  }

  private uninstall(name: string): void {
    const e = this.table.remove(name);
    if (!e) return;
    this.index.removed(name);
    this.intents.delete(name);
    this.followedIntents.delete(name);
    if (e.data.metrics) this.setMarked(name, false);
    this.accounting.removeUser(name);
  }

  private async applyAccounting(e: Entry): Promise<void> {
    if (e.state !== 'ready') return;
    if (
      e.data.source === 'config' &&
      this.accounting.periodOf(e.data.name) === e.data.quota.period &&
      this.accounting.usageBaseOf(e.data.name) === (usageKeyOf(e.data) ?? e.data.name)
    ) {
      // Limit precedence stays Accounting's (setUsers); an admin change is its setLimit.
      if (this.accounting.limitOf(e.data.name) !== e.data.quota.bytes) await this.accounting.setLimit(e.data.name, e.data.quota.bytes);
      return;
    }
    await this.accounting.upsertUser(accountingUser(e.data));
  }

  private stopRunning(e: Entry, why: string): void {
    const n = e.limiter?.stopAll() ?? 0;
    if (n > 0) this.logger?.info({ user: e.data.name, connections: n, why }, "closed the user's open connections");
  }

  /** Expiries that came: close the user's running connections (admission refuses new ones by itself). */
  private expireRunning(): void {
    for (const due of this.expiries.popDue(this.now())) {
      const e = this.entries.get(due.name);
      // A stale entry: the user is gone, or its expiry changed since (the new one is queued too).
      if (e === undefined || e.expiresAt !== due.at) continue;
      if ((e.limiter?.running ?? 0) > 0) this.stopRunning(e, 'expired');
      for (const l of this.expiredListeners) l(due.name, due.at);
    }
  }

  /** Fleet: applies what other daemons wrote since the last look (every `followMs`; a look already running is shared). */
  follow(): Promise<void> {
    if (this.following || this.closed) return this.following ?? Promise.resolve();
    const run = (async () => {
      const { changed, deleted, version } = await this.store.usersChangedSince(this.version);
      const names: string[] = [];
      for (const s of changed) {
        const before = this.entries.get(s.name);
        if (before && before.version >= s.version) continue;
        const e = this.install(s);
        if (e.state === 'creating' && !this.followedIntents.has(s.name)) this.followedIntents.set(s.name, this.now());
        // Deleted and made again between two looks (the tombstone below is older than this record): another
        // customer under the name, so the deleted one's connections here end now, as its delete would end them,
        // before they count on the new customer's meter.
        if (before !== undefined && before.data.createdAt !== e.data.createdAt) this.stopRunning(before, 'deleted');
        await this.applyAccounting(e);
        if (before?.data.enabled && !e.data.enabled) this.stopRunning(e, 'disabled');
        names.push(s.name);
      }
      const removed: string[] = [];
      for (const name of deleted) {
        const e = this.entries.get(name);
        if (!e) continue;
        // A tombstone older than our copy is a delete followed by a re-create we already have.
        const current = await this.store.getUser(name);
        if (current) continue;
        this.uninstall(name);
        this.stopRunning(e, 'deleted');
        removed.push(name);
      }
      this.version = version;
      if (names.length + removed.length > 0) this.onChange?.(names, removed);
    })()
      .catch((err: unknown) => this.logger?.warn({ err }, 'could not follow user changes; retrying'))
      .finally(() => {
        this.following = undefined;
      });
    this.following = run;
    return run;
  }
}

/** A record as accounting takes it: its limit, period and usage key. */
function accountingUser(d: UserData): AccountingUser {
  const usageKey = usageKeyOf(d);
  return { name: d.name, limitBytes: d.quota.bytes, period: d.quota.period, ...(usageKey !== undefined ? { usageKey } : {}) };
}

function defaults(): Omit<UserData, 'name' | 'mainAccount' | 'source' | 'createdAt'> {
  return {
    product: '',
    draw: 'pwd',
    sessTime: 5,
    quota: { bytes: -1, period: 'total' },
    rateBytesPerSec: 0,
    maxConnections: 0,
    expiresAt: null,
    enabled: true,
    pricePerGb: null,
    listen: null,
    rules: { denyPorts: [], denyHosts: [], allowPorts: [], allowHosts: [] },
    requestRules: [],
    metrics: false,
    instances: null,
    products: null,
  };
}

/** `{ incarnation }` when the record has one (a name made again), else nothing. */
function incarnationField(incarnation: number | undefined): { incarnation?: number } {
  return incarnation !== undefined && incarnation > 0 ? { incarnation } : {};
}

function stripUndefined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}

/** Equal as JSON, whatever the key order. */
function same(a: unknown, b: unknown): boolean {
  const canonical = (v: unknown): string =>
    JSON.stringify(v, (_k, x: unknown) =>
      x && typeof x === 'object' && !Array.isArray(x)
        ? Object.fromEntries(Object.entries(x as Record<string, unknown>).sort(([p], [q]) => (p < q ? -1 : 1)))
        : x,
    );
  return canonical(a) === canonical(b);
}

function platformFieldsChanged(a: UserData, b: UserData): boolean {
  return a.mainAccount !== b.mainAccount || a.product !== b.product || a.quota.bytes !== b.quota.bytes || a.quota.period !== b.quota.period;
}
