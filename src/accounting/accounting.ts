// Per-user byte meters and limits (the gateway's MeterProvider). The data path only ever touches a
// UserMeter: `add` is two number adds, a sum and a compare that may set `exhausted`; nothing allocates, logs
// or awaits there. Everything slow happens off the data path: a timer takes what changed since the last
// flush and writes it to the store in one batch (at most one interval is lost on a crash; `close()` flushes
// the rest), and metrics are brought up to date at the same moment. Each batch carries an id the store takes in
// the same transaction (SQLite) or script (Redis) as the increments: a write that failed is written again as it
// was, before anything newer, and one that landed although its caller saw it fail (a reply lost past the
// timeout) is skipped by the store then, so no byte is counted twice. Modelled on gost's x/limiter/quota (the
// quota checked in memory, the store behind it) and x/internal/util/stats (report only what changed).
//
// Limit precedence: the config's `limitBytes` is the initial limit. An admin override (`setLimit`) is
// stored and wins over the config across restarts — until the config changes that user's `limitBytes`;
// then the new config value wins (and is stored). The config value last applied is remembered in the store's
// kv under `accounting.configLimit.<user>` to tell "config changed" from "admin overrode".
//
// In a fleet (an `allowance` given: src/fleet/allowance.ts AllowanceLeaser) the limit is the fleet's: each
// meter spends from this daemon's slice of the user's remaining allowance (a sync subtraction, no Redis on
// the data path) and is exhausted when the slice is, the flush goes through the leaser's usageStore (its
// syncs move traffic into the shared `used`; the flush adds only usage adopted from the platform), and after
// each flush `used` and `limit` are re-read from the shared store so GET /v1/users and the platform
// comparison see the fleet's totals and a limit set on another daemon.
//
// Quota periods (src/users/period.ts): a user whose quota is per `day`, `week` or `month` has its usage kept
// under the key `<user>@<periodKey>` (e.g. `alice@day:2026-11-24`), `total` under the plain name as before.
// So every period's usage stays in the store as history, a new period starts at 0 by itself, a restart finds
// the current period's row, and in a fleet every daemon leases from the same period row (the allowance is
// keyed the same way). The meter object the relays hold stays the same across a boundary: only its key,
// `used` and allowance change (rolled by the flush timer and by admission once `endsAt` has passed); the
// bytes not yet written for the old period are written to the old key. The user's limit stays on the plain
// name's row (and, in a fleet, is copied to the period row the allowance reads).
//
// A name deleted and made again is another customer (src/users/directory.ts): the new user's usage is kept
// under a key of its own, `<name>~<incarnation>` (its creation time), so it starts at 0 against its quota while
// the deleted customer's rows stay in the store as they were (history, never rewritten). `AccountingUser.usageKey`
// names that base key (default: the plain name, as for every user made before); the period rows are
// `<base>@<periodKey>`, the limit is on the base row. A meter that still holds the deleted user's key (this
// daemon's, or another daemon's of the fleet following the change) moves to the new key when the new user is
// applied: its unwritten bytes go to the old key, its fleet lease of the old key is given back, and the new
// key's stored usage (what other daemons already counted for the new customer) is read in.
import { batchIds } from '../store/batch-marks.ts';
import type { SettingsStore, UsageCursor, UsageRecord, UsageStore as UsageBackend } from '../store/types.ts';
import type { Metrics } from '../telemetry/metrics.ts';
import type { Logger } from '../telemetry/logger.ts';
import { UNLIMITED, checkLocalLimit } from './units.ts';
import { periodWindow, type QuotaPeriod } from './period.ts';
import { RotorError, InternalError } from '../errors/rotor-error.ts';
import type { AllowanceShare } from './allowance-share.ts';

/** The part of the store accounting uses. */
export type UsageStore = Pick<UsageBackend, 'addUsage' | 'listUsage' | 'setLimit'> &
  Partial<Pick<UsageBackend, 'getUsage' | 'getUsages' | 'setLimits' | 'usageChangedSince'>> &
  Pick<SettingsStore, 'kvGet' | 'kvSet'>;

/** A config user removed from the config (Accounting.rememberRemovedConfig): its record's creation time and incarnation. */
export interface RemovedConfigUser {
  createdAt: number;
  /** The record's incarnation (its usage key `<name>~<incarnation>`); absent: the plain name. */
  incarnation?: number;
}

/** What the gateway asks before it does any work for a connection (src/proxy/types.ts imports it). */
export type Admission = { ok: true } | { ok: false; reason: string };

/** One user's byte counter as the data path sees it: an add and a flag, nothing slower (src/proxy/types.ts imports it). */
export interface UserMeter {
  /** Set once the user's limit is reached; running connections close on their next chunk. */
  readonly exhausted: boolean;
  /**
   * Whether its connections can be cut (a byte limit, or a fleet allowance): the chunk that crosses the limit is
   * dropped, so relays keep node's 64 KiB reads for such a user instead of bulk reads (a cut within one of them).
   */
  readonly bounded: boolean;
  add(up: number, down: number): void;
}

/** The fleet's allowances (src/fleet/allowance.ts AllowanceLeaser implements it). */
export interface AllowanceSource {
  /** The user's share: data held here, which the fleet keeps up to date (accounting/allowance-share.ts). */
  user(name: string): AllowanceShare;
  /** Tops the user's slice up; never rejects. */
  acquire(user: string): Promise<number>;
  /** Reports spending and gives the unspent slice back. */
  release(user: string): Promise<void>;
  usageStore<S extends Pick<UsageBackend, 'addUsage'>>(store: S): S;
  /**
   * A start's lease taken after ready: the user is served from a bounded start share until its first lease
   * arrives, and the lease is queued behind the others (ahead of them once a connection waits). False: this
   * source lends nothing on its own (then the caller takes the lease before going on).
   */
  lendAtStart?(user: string, leftBytes: number): boolean;
  /** Starts the lent users' leases (once the daemon is ready). */
  takeLeases?(): void;
  /** Starts them too, and resolves once every lease lent at the start has arrived (or was found unreachable). */
  leasesTaken?(): Promise<void>;
}

/** A local user as accounting needs it (a subset of the config's users[]). */
export interface AccountingUser {
  name: string;
  /** bytes, both directions; -1 = unlimited */
  limitBytes: number;
  /** The quota's period; default 'total'. */
  period?: QuotaPeriod;
  /**
   * The store key the user's usage is kept under (its period rows: `<usageKey>@<periodKey>`); default the name.
   * A name made again after a delete has a key of its own (see the top of this file).
   */
  usageKey?: string;
}

/** The base key of a user's usage rows. */
const baseOf = (u: { name: string; usageKey?: string | undefined }): string => u.usageKey ?? u.name;
/** The user name a usage row's key belongs to (`<name>`, `<name>@<period>`, `<name>~<n>`, `<name>~<n>@<period>`). */
function nameOfKey(key: string): string {
  const at = key.indexOf('@');
  const head = at < 0 ? key : key.slice(0, at);
  const tilde = head.indexOf('~');
  return tilde < 0 ? head : head.slice(0, tilde);
}

/** A meter as background work reads it (the meter itself: live values). */
export interface MeterReading {
  readonly name: string;
  /** bytes relayed since this process started, per direction */
  readonly up: number;
  readonly down: number;
  /** usage of the current quota period */
  readonly used: number;
  readonly limit: number;
  /** 'total', or the current period's key */
  readonly periodKey: string;
  /** A user of the config or the directory (false: removed, or an unknown name counted anyway). */
  readonly configured: boolean;
}

/** One row of GET /v1/users. */
export interface UserUsage {
  name: string;
  usedBytes: number;
  limitBytes: number;
  activeConnections: number;
}

export interface LimitChange {
  user: string;
  limitBytes: number;
  /** config: set from the config (first sight or the config changed); admin: setLimit. */
  source: 'config' | 'admin';
}

export interface AccountingOptions {
  store: UsageStore;
  metrics?: Metrics;
  logger?: Logger;
  /** How often changed counters are written to the store; default 2000 ms. */
  flushIntervalMs?: number;
  /**
   * Add the metered bytes to rotor_proxy_bytes_total on each flush; default true. The daemon passes false:
   * its listeners already count every relayed byte there, and both counting doubled the metric.
   */
  countBytes?: boolean;
  /** Fleet mode: the shared allowance every meter spends from (see the top of this file). */
  allowance?: AllowanceSource;
  /** IANA zone quota periods are calendar periods in (config billing.timezone); default UTC. */
  timeZone?: string;
  /** Clock for quota periods; default Date.now. */
  now?: () => number;
  /**
   * Ids of the flushes' store writes, `<writer><seq>` with seq increasing (src/store/batch-marks.ts); default a
   * random writer name and 1, 2, 3, …
   */
  batchIds?: () => string;
}

export const DEFAULT_FLUSH_INTERVAL_MS = 2000;

function byUser(rows: readonly UsageRecord[]): Map<string, UsageRecord> {
  const out = new Map<string, UsageRecord>();
  // An indexed loop: no iterator result per row (a start reads ~170,000 rows at 100,000 users).
  for (let i = 0; i < rows.length; i++) out.set(rows[i]!.user, rows[i]!);
  return out;
}

/** One string per period key (`day:2026-11-27`) for every meter in it; bounded by the periods rolled through. */
const periodKeys = new Map<string, string>();
function sharedPeriodKey(key: string): string {
  const known = periodKeys.get(key);
  if (known !== undefined) return known;
  if (periodKeys.size >= 64) periodKeys.clear();
  periodKeys.set(key, key);
  return key;
}
const CONFIG_LIMIT_KEY = 'accounting.configLimit.';
/** A config user removed from the config, until it is put back or its name made again (RemovedConfigUser). */
const CONFIG_REMOVED_KEY = 'accounting.configRemoved.';
/** fromSnapshot's answer when the snapshot does not answer for a key: the store is asked. */
const UNREAD: unique symbol = Symbol('unread');
/** Users applied per batch (a start, an import, a period's roll): their limits written and fleet leases taken together. */
const UPSERT_BATCH = 1000;
/** How long a stop keeps trying to write the meters' last bytes when the store fails (a bound within the stop's budget). */
const CLOSE_RETRY_MS = 3000;
/** Users named in the log line of a stop that could not write every meter (the largest; the total covers all). */
const CLOSE_LOST_LISTED = 100;

/**
 * A flush's store write that failed: written again as it was (its id, its deltas) before anything newer. The
 * store may have taken it although the caller saw an error (a Redis reply lost past the command timeout); the
 * id makes the store skip it then, so its bytes are counted once.
 */
interface UnstoredFlush {
  id: string;
  deltas: { user: string; bytes: number }[];
}

/**
 * What applying a batch of users gathers instead of sending it per user, one round trip after another: the
 * limits to write (key → bytes), written in one call first, then the fleet leases to take (key → give this
 * daemon's old one back first), taken together (the leaser sends them a few hundred per script call).
 */
interface Batch {
  limits: Map<string, number>;
  leases: Map<string, boolean>;
  /** The start's batches: leases lent at once and taken after ready (lendAtStart), not awaited. */
  later: boolean;
}
const newBatch = (later = false): Batch => ({ limits: new Map(), leases: new Map(), later });

/** A reason a user is refused other than the byte limit (disabled account, empty balance), by cause. */
type Refusals = Map<string, string>;

class Meter implements UserMeter {
  /** Local mode: the limit is reached. */
  overLimit = false;
  /** Fleet mode: this daemon's share of the user's allowance; it alone decides `exhausted`. */
  allowance: AllowanceShare | null = null;
  /** bytes since this process started, per direction (for rotor_proxy_bytes_total) */
  up = 0;
  down = 0;
  /** total bytes used, as persisted plus what is not yet persisted */
  used: number;
  limit: number;
  /** `used` as last written to the store */
  persisted: number;
  reportedUp = 0;
  reportedDown = 0;
  active = 0;
  configured = false;
  /** Set by the config (setUsers) rather than the users directory (upsertUser). */
  fromConfig = false;
  refusals: Refusals | null = null;
  period: QuotaPeriod = 'total';
  /** 'total', or the current period's key (shared by every meter in that period: periodKeys). */
  periodKey = 'total';
  /** When the current period ends (Infinity for 'total'). */
  endsAt = Infinity;
  /** The base key of its usage rows: the name, or `<name>~<incarnation>` for a name made again (AccountingUser.usageKey). */
  base: string;
  /** In `changes` already (see Accounting.changeFeed). */
  changed = false;
  /**
   * The key whose stored usage is being read into `used` (null: loaded). While it is read the flush writes
   * nothing for this meter and the fleet re-read leaves it alone: `used` holds only what was counted since
   * the reset, and the stored figure is added once, when the read returns (see loadStored).
   */
  loading: string | null = null;
  /** The last read of `loading` failed: the next flush tries again. */
  loadFailed = false;

  constructor(
    readonly name: string,
    used: number,
    limit: number,
    /** Accounting's list of meters changed since its feeds last looked; shared by every meter. */
    private readonly changes: Meter[],
  ) {
    this.used = used;
    this.persisted = used;
    this.limit = limit;
    this.base = name;
    this.overLimit = limit !== UNLIMITED && used >= limit;
  }

  /**
   * The store key of the current period's usage: the base (the name) for 'total', else `<base>@<periodKey>`. Made when
   * asked (a flush, a roll) rather than kept: 100,000 period meters each held one as a chain of concatenated
   * strings (17 MiB of heap).
   */
  get key(): string {
    return this.periodKey === 'total' ? this.base : `${this.base}@${this.periodKey}`;
  }

  get exhausted(): boolean {
    return this.allowance === null ? this.overLimit : this.allowance.exhausted;
  }

  get bounded(): boolean {
    return this.allowance !== null || this.limit !== UNLIMITED;
  }

  add(up: number, down: number): void {
    const n = up + down;
    this.up += up;
    this.down += down;
    this.used += n;
    if (this.allowance !== null) this.allowance.spend(n);
    else if (this.limit !== UNLIMITED && this.used >= this.limit) this.overLimit = true;
    // Once per meter between two looks of the feeds, not per chunk: one flag test on the data path.
    if (!this.changed) this.touch();
  }

  /** Puts the meter on the changed list (its usage, limit or period moved). */
  touch(): void {
    if (this.changed) return;
    this.changed = true;
    this.changes.push(this);
  }

  recheck(): void {
    this.overLimit = this.limit !== UNLIMITED && this.used >= this.limit;
  }
}

/** Accounting failures callers branch on. */
export class AccountingError extends RotorError {
  declare readonly code: 'UNKNOWN_USER' | 'ACCOUNTING_CLOSED';
  constructor(code: 'UNKNOWN_USER' | 'ACCOUNTING_CLOSED', message: string) {
    super(code, message, { httpStatus: code === 'UNKNOWN_USER' ? 404 : 503 });
  }
}

// The gateway's MeterProvider (src/proxy/types.ts, above this folder, so not named here): src/main.ts plugs
// it in and test/accounting/meters.test.ts checks the fit.
export class Accounting {
  private readonly store: UsageStore;
  private readonly metrics: Metrics | undefined;
  private readonly logger: Logger | undefined;
  private readonly flushIntervalMs: number;
  private readonly countBytes: boolean;
  private readonly allowance: AllowanceSource | undefined;
  private readonly timeZone: string;
  private readonly now: () => number;
  /** Usage of periods that ended before it was written, written with the next flush. */
  private carry: { user: string; bytes: number }[] = [];
  /** Local mode: the flush whose write failed, written again (same id) before anything newer (UnstoredFlush). */
  private unstored: UnstoredFlush | undefined;
  private readonly batchIds: () => string;
  private readonly meters = new Map<string, Meter>();
  /**
   * Meters whose usage, limit or period moved since the feeds last looked (each at most once: Meter.changed).
   * Background work (the flush, the quota watcher, the per-user series, the platform limit sync) reads what
   * changed through a feed instead of walking every meter, so 10,000 idle users cost nothing per round.
   */
  private readonly changes: Meter[] = [];
  private readonly feeds: Set<Meter>[] = [];
  /** The flush's own feed. */
  private readonly unflushed: Set<Meter>;
  /** The earliest end of a meter's quota period: before it, the flush rolls nothing and walks nothing. */
  private nextBoundary = Infinity;
  /** Bumped when a user stops being configured (removed, or gone from the config): see changeFeed. */
  private removals = 0;
  /** Meters whose stored usage could not be read: the next flush reads again (see loadStored). */
  private readonly loadRetries = new Set<Meter>();
  private readonly limitListeners: ((change: LimitChange) => void)[] = [];
  /** The stored rows start() read, by key, until the first write (see upsertUsers). */
  private startRows: Map<string, UsageRecord> | undefined;
  /**
   * Snapshots read for some keys only (rowsOf), with the keys they answer for: a key asked that is not in
   * the map has no row; a key not asked is read from the store. A full listing's snapshot is not here.
   */
  private readonly partial = new WeakMap<ReadonlyMap<string, UsageRecord>, ReadonlySet<string>>();
  /** Fleet: where readFleet's last read of the usage change feed ended (undefined: read every row next). */
  private fleetCursor: UsageCursor | undefined;
  /**
   * Fleet: the start's read of every row when it came with the change feed's cursor (readFleet goes on from
   * that cursor), while the start applies it; `missed`: the keys of rows readFleet read since then and could
   * not give to a meter (none had that key yet, or it was loading). See fedFrom.
   */
  private startRead: { rows: ReadonlyMap<string, UsageRecord>; missed: Set<string>; applying: boolean } | undefined;
  /**
   * Fleet: meters readFleet reads by key next time, on top of the feed: made, re-keyed or loading since it last
   * read (a row written before that, while the meter was not there to take it or was being loaded from an
   * older read, is not in the feed again). Bounded by the meters.
   */
  private readonly recheck = new Set<Meter>();
  private timer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> | undefined;
  private closed = false;

  constructor(options: AccountingOptions) {
    this.allowance = options.allowance;
    // Fleet: traffic reaches the shared `used` through the leaser's syncs, not through addUsage.
    this.store = options.allowance ? options.allowance.usageStore(options.store) : options.store;
    this.metrics = options.metrics;
    this.logger = options.logger;
    this.flushIntervalMs = options.flushIntervalMs ?? DEFAULT_FLUSH_INTERVAL_MS;
    this.countBytes = options.countBytes ?? true;
    this.timeZone = options.timeZone ?? 'UTC';
    this.now = options.now ?? Date.now;
    this.batchIds = options.batchIds ?? batchIds();
    if (!(this.flushIntervalMs > 0)) throw new InternalError('flushIntervalMs must be positive');
    this.unflushed = this.newFeed();
  }

  /** Loads every stored counter and limit, applies the configured users and starts the flush timer. */
  async start(users: readonly AccountingUser[]): Promise<LimitChange[]> {
    let stored: Map<string, UsageRecord>;
    if (this.allowance && this.store.usageChangedSince !== undefined && this.store.getUsages !== undefined) {
      // Read with the change feed's cursor: the first flushes read what was written since this read, not
      // every row again while the start is still applying them (a restart at 20,000 users read ~33,000 rows
      // twice, the second time with every meter's metrics set on top).
      const r = await this.store.usageChangedSince(undefined);
      stored = byUser(r.rows);
      this.fleetCursor = r.cursor;
      if (r.cursor !== undefined) this.startRead = { rows: stored, missed: new Set(), applying: false };
    } else stored = byUser(await this.store.listUsage());
    stored.forEach((rec) => {
      // Period rows (`user@period`) are history or the current period, read when the user is applied; so are the
      // rows of a name made again (`user~n`).
      if (rec.user.includes('@') || rec.user.includes('~')) return;
      this.entry(rec.user, rec.usedBytes, rec.limitBytes, this.fedFrom(stored, rec.user));
    });
    // Kept for the directory's upsertUsers right after (the start's stored users) until anything is written.
    this.startRows = stored;
    const changes = await this.applyUsers(users, stored);
    if (!this.timer && !this.closed) {
      this.timer = setInterval(() => void this.flush(), this.flushIntervalMs);
      this.timer.unref();
    }
    return changes;
  }

  /**
   * Applies the configured users (at start and on reload): new users start at their stored usage; limits
   * follow the precedence described at the top of this file. Users no longer configured are refused
   * (their counters stay in the store). Returns the limits that changed.
   */
  async setUsers(users: readonly AccountingUser[], known?: UsageRecord[]): Promise<LimitChange[]> {
    if (known !== undefined) return this.applyUsers(users, byUser(known));
    // Without a snapshot, only the configured users' rows are read: the start's snapshot while nothing was
    // written since, else their rows by key in one read (a fleet's restart at 20,000 users listed every row
    // a second time here: ~0.5 s and its garbage), else one by one; a store with neither is listed whole.
    if (this.startRows !== undefined) return this.applyUsers(users, this.startRows);
    if (this.store.getUsages) return this.applyUsers(users, await this.rowsOf(users));
    return this.applyUsers(users, this.allowance || !this.store.getUsage ? byUser(await this.store.listUsage()) : undefined);
  }

  private async applyUsers(users: readonly AccountingUser[], records: Map<string, UsageRecord> | undefined): Promise<LimitChange[]> {
    const changes: LimitChange[] = [];
    const wanted = new Set<string>();
    for (const u of users) {
      checkLocalLimit(u.limitBytes, `users.${u.name}.limitBytes`);
      wanted.add(u.name);
      // A config user counts under its name, or under a key of its own when the directory gave it one (a config
      // user made under a deleted customer's name: another customer, see the top of this file).
      const base = baseOf(u);
      const lastConfig = await this.store.kvGet<number>(CONFIG_LIMIT_KEY + u.name);
      const rec = records !== undefined ? records.get(base) : await this.store.getUsage?.(base);
      let limit: number;
      if (lastConfig === u.limitBytes && rec !== undefined) {
        limit = rec.limitBytes;
      } else {
        limit = u.limitBytes;
        if (rec === undefined || rec.limitBytes !== limit) await this.writeLimit(base, limit);
        await this.store.kvSet(CONFIG_LIMIT_KEY + u.name, u.limitBytes);
      }
      const m = this.entry(u.name, rec?.usedBytes ?? 0, limit, this.fedFrom(records, base), base);
      // A meter left on another key (an API user's own key, a name made again and deleted since; or the deleted
      // customer's plain name under a config user of its own) moves to this user's.
      if (m.base !== base) {
        await this.rebase(m, base);
        await this.enterBase(m, u.period ?? 'total', records);
      }
      m.configured = true;
      m.fromConfig = true;
      await this.applyPeriod(m, u.period ?? 'total', records);
      if (m.limit !== limit) {
        m.limit = limit;
        m.recheck();
        changes.push({ user: u.name, limitBytes: limit, source: 'config' });
      } else if (lastConfig !== u.limitBytes) {
        changes.push({ user: u.name, limitBytes: limit, source: 'config' });
      }
      this.metrics?.userLimitBytes.set({ user: u.name }, m.limit);
      this.metrics?.userUsedBytes.set({ user: u.name }, m.used);
      m.touch();
    }
    if (this.allowance) {
      const changed = new Set(changes.map((c) => c.user));
      await Promise.all(
        [...wanted].map(async (name) => {
          const m = this.meters.get(name)!;
          const a = this.allowance!.user(m.key);
          a.seedLimit = m.limit;
          a.seedUsed = records?.get(m.key)?.usedBytes ?? 0;
          // A changed limit: give the old slice back first so the new one is cut from the new limit.
          if (changed.has(name)) await this.allowance!.release(m.key);
          await this.allowance!.acquire(m.key);
        }),
      );
    }
    // forEach over every meter (100,000 at a start): no iterator result per meter.
    this.meters.forEach((m) => {
      if (m.configured && m.fromConfig && !wanted.has(m.name)) {
        m.configured = false;
        m.fromConfig = false;
        this.removals++;
        this.metrics?.userLimitBytes.remove({ user: m.name });
        this.metrics?.userUsedBytes.remove({ user: m.name });
      }
    });
    for (const c of changes) this.emit(c);
    return changes;
  }

  /**
   * A user of the users directory (API-made, or a config user's record): its limit and period are the
   * record's (no config precedence), applied at once. The usage already stored for it is kept.
   */
  async upsertUser(u: AccountingUser): Promise<void> {
    await this.upsert(u);
  }

  /**
   * Many users of the users directory at once (the start's stored users): one read of the stored usage for
   * all of them instead of one or two reads per user (100,000 users: seconds of a restart).
   */
  async upsertUsers(users: readonly AccountingUser[], options: { leasesAfter?: boolean } = {}): Promise<void> {
    // The start's read when nothing was written since (one read of 160,000 rows, not two). Else, when the
    // store reads rows by key, each batch's own rows (an import of 1,000 users into 100,000: 2,000 rows, not
    // the 200,000 a listing reads); else one listing for all.
    const snapshot = this.startRows ?? (this.store.getUsages ? undefined : byUser(await this.store.listUsage()));
    this.startRows = undefined;
    const start = this.startRead !== undefined && snapshot === this.startRead.rows ? this.startRead : undefined;
    if (start !== undefined) start.applying = true;
    try {
      await this.upsertBatches(users, snapshot, options.leasesAfter === true);
    } finally {
      // Applied: the start's read is not needed any more (nor kept: 100,000 users' rows).
      if (start !== undefined && this.startRead === start) this.startRead = undefined;
    }
  }

  private async upsertBatches(
    users: readonly AccountingUser[],
    snapshot: Map<string, UsageRecord> | undefined,
    later: boolean,
  ): Promise<void> {
    // Each user's limit write and lease (a round trip each in a fleet) are gathered per batch and sent together
    // (100,000 users one round trip after another: minutes).
    for (let from = 0; from < users.length; from += UPSERT_BATCH) {
      const to = Math.min(users.length, from + UPSERT_BATCH);
      const records = snapshot ?? (await this.batchRows(users.slice(from, to)));
      const batch = newBatch(later);
      for (let i = from; i < to; i++) await this.upsert(users[i] as AccountingUser, records, batch);
      await this.applyBatch(batch);
    }
  }

  /** The stored rows the users' upserts read (each name, and its current period's key), in one read. */
  private async rowsOf(
    users: readonly { name: string; period?: QuotaPeriod; usageKey?: string | undefined }[],
  ): Promise<Map<string, UsageRecord>> {
    const now = this.now();
    const keys: string[] = [];
    for (const u of users) {
      const base = baseOf(u);
      keys.push(base);
      const period = u.period ?? 'total';
      if (period !== 'total') keys.push(`${base}@${periodWindow(period, this.timeZone, now).key}`);
    }
    const rows = byUser(await this.store.getUsages!(keys));
    this.partial.set(rows, new Set(keys));
    return rows;
  }

  /**
   * rowsOf, or undefined when that read failed: each upsert then reads its own rows, one round trip each, as
   * before batching (a read of 1,666 rows timed out once at 59,000 users under load 8; one batch of an
   * import is not failed for it).
   */
  private async batchRows(users: readonly AccountingUser[]): Promise<Map<string, UsageRecord> | undefined> {
    try {
      return await this.rowsOf(users);
    } catch (err) {
      this.logger?.warn({ err, users: users.length }, "could not read a batch of users' stored usage; reading it user by user");
      return undefined;
    }
  }

  /** A stored row from the snapshot when it answers for the key (undefined: no row), else UNREAD (read it). */
  private fromSnapshot(key: string, records: ReadonlyMap<string, UsageRecord> | undefined): UsageRecord | undefined | typeof UNREAD {
    if (records !== undefined) {
      const asked = this.partial.get(records);
      if (asked === undefined || asked.has(key)) return records.get(key);
    }
    return UNREAD;
  }

  /** Writes a batch's limits in one call, then takes its leases together (see Batch). */
  private async applyBatch(batch: Batch): Promise<void> {
    if (batch.limits.size > 0) {
      this.startRows = undefined;
      const limits = [...batch.limits].map(([user, limitBytes]) => ({ user, limitBytes }));
      if (this.store.setLimits) await this.store.setLimits(limits);
      else for (const l of limits) await this.store.setLimit(l.user, l.limitBytes);
    }
    if (!this.allowance || batch.leases.size === 0) return;
    const waits: Promise<void>[] = [];
    for (const [key, release] of batch.leases) {
      // A start's lease comes after ready (see lendAtStart): the user is served from its start share meanwhile.
      // A changed limit gives the old slice back first, so it is taken now as before (rare at a start).
      if (batch.later && !release && this.lendAtStart(key)) continue;
      waits.push(this.lease(key, release));
    }
    if (waits.length > 0) await Promise.all(waits);
  }

  /** Lends `key`'s start share from what its meter last saw left (see AllowanceSource.lendAtStart). */
  private lendAtStart(key: string): boolean {
    const lend = this.allowance?.lendAtStart;
    if (lend === undefined) return false;
    const m = this.meterOfKey(key);
    if (m === undefined) return false;
    const left = m.limit === UNLIMITED ? Infinity : m.limit - m.used;
    return lend.call(this.allowance, key, left);
  }

  /** Starts taking the leases a start lent (upsertUsers' leasesAfter): the daemon calls it once ready. */
  takeLeases(): void {
    this.allowance?.takeLeases?.();
  }

  /** Starts them (takeLeases) and resolves once they have all arrived. */
  leasesTaken(): Promise<void> {
    return this.allowance?.leasesTaken?.() ?? Promise.resolve();
  }

  /**
   * A limit to write: into the batch when there is one (written before its leases; nothing to wait for), else
   * now (the write's promise).
   */
  private limitWrite(key: string, limitBytes: number, batch: Batch | undefined): Promise<void> | undefined {
    if (batch === undefined) return this.writeLimit(key, limitBytes);
    this.startRows = undefined;
    batch.limits.set(key, limitBytes);
    return undefined;
  }

  /** Gives back this daemon's lease of `key` first when asked (a changed limit), then takes a fresh one. */
  private async lease(key: string, release: boolean): Promise<void> {
    if (release) await this.allowance!.release(key);
    await this.allowance!.acquire(key);
  }

  /**
   * `records`: stored usage rows (see stored). `batch`: the limits to write and fleet leases to take, sent
   * together by the caller; without it, sent here.
   */
  private async upsert(u: AccountingUser, records?: Map<string, UsageRecord>, batch?: Batch): Promise<void> {
    checkLocalLimit(u.limitBytes, `users.${u.name}.limitBytes`);
    const base = baseOf(u);
    const known = this.meters.get(u.name);
    // A meter on another key: the name was deleted and made again (another customer); it starts over on its key.
    const rebased = known !== undefined && known.base !== base;
    // Configured before this call (not only read from the store at the start): see the lease below.
    const wasConfigured = known?.configured === true && !rebased;
    let rec: UsageRecord | undefined;
    if (known === undefined || rebased) {
      const snap = this.fromSnapshot(base, records);
      rec = snap !== UNREAD ? snap : await this.store.getUsage?.(base);
    }
    if (rebased) await this.rebase(known, base);
    const m = this.entry(u.name, rec?.usedBytes ?? 0, u.limitBytes, this.fedFrom(records, base), base);
    m.configured = true;
    // A known meter compares its own limit; a new one writes the limit unless the stored row already holds it
    // (comparing `rec` for a known meter made every PATCH look like a limit change: a spurious allowance
    // release/acquire and a platform limit sync each time).
    const limitChanged = known !== undefined && !rebased ? m.limit !== u.limitBytes : rec === undefined || rec.limitBytes !== u.limitBytes;
    const periodChanged = m.period !== (u.period ?? 'total');
    // A start's users (a snapshot answering, a batch gathering the writes) go through here without waiting on
    // anything: no promise per step and user (100,000 users' upserts allocated ~2 KB each in suspended steps).
    if (limitChanged) {
      m.limit = u.limitBytes;
      const write = this.limitWrite(base, u.limitBytes, batch);
      if (write !== undefined) await write;
    } else if (rebased) m.limit = u.limitBytes;
    if (rebased) {
      const entered = this.enterBase(m, u.period ?? 'total', records, batch);
      if (entered !== undefined) await entered;
    } else if (periodChanged || known === undefined) {
      const applied = this.applyPeriod(m, u.period ?? 'total', records, batch);
      if (applied !== undefined) await applied;
    }
    m.recheck();
    m.touch();
    if (this.allowance) {
      const a = this.allowance.user(m.key);
      a.seedLimit = m.limit;
      // A changed limit, or a configured user's changed period: the old slice goes back first so the new one
      // is cut from the new limit. A meter new to this process (or only read from the store at its start) got
      // its period row written and leased by its roll: a restart takes one lease per user, not three.
      const renew = limitChanged || (periodChanged && wasConfigured);
      if (renew && m.periodKey !== 'total' && records?.get(m.key)?.limitBytes !== m.limit) {
        const write = this.limitWrite(m.key, m.limit, batch);
        if (write !== undefined) await write;
      }
      if (batch) batch.leases.set(m.key, renew || batch.leases.get(m.key) === true);
      else await this.lease(m.key, renew);
    }
    if (limitChanged && known !== undefined && !rebased) this.emit({ user: u.name, limitBytes: u.limitBytes, source: 'admin' });
  }

  /**
   * A meter left on a deleted customer's key (the name is made again, see the top of this file) moved to the new
   * customer's base key, at 0: its unwritten bytes go to the old key with the next flush, its fleet lease of the
   * old key is given back (its spending synced there), a read of the old key in flight is dropped. Its period and
   * stored usage are then entered by enterBase.
   */
  private async rebase(m: Meter, base: string): Promise<void> {
    const old = m.key;
    if (m.loading === null) {
      const delta = m.used - m.persisted;
      if (delta !== 0) this.carry.push({ user: old, bytes: delta });
    }
    m.loading = null;
    m.loadFailed = false;
    this.loadRetries.delete(m);
    m.base = base;
    m.used = 0;
    m.persisted = 0;
    m.period = 'total';
    m.periodKey = 'total';
    m.endsAt = Infinity;
    m.overLimit = false;
    if (this.allowance) {
      await this.allowance.release(old);
      m.allowance = this.allowance.user(m.key);
      this.recheck.add(m);
    }
    m.touch();
    this.logger?.debug({ user: m.name, from: old, to: base }, 'user name made again: its usage is counted under a key of its own');
  }

  /** A rebased meter's period, and what is stored under its new key (other daemons' counts of the new customer). */
  private enterBase(m: Meter, period: QuotaPeriod, records?: Map<string, UsageRecord>, batch?: Batch): Promise<void> | undefined {
    m.period = period;
    if (period === 'total') return this.loadStored(m, m.key, records);
    m.endsAt = -Infinity;
    return this.rollNow(m, records, batch);
  }

  /** Every limit Accounting writes: the start's snapshot of the rows is stale from then on. */
  private writeLimit(user: string, limitBytes: number): Promise<void> {
    this.startRows = undefined;
    return this.store.setLimit(user, limitBytes);
  }

  /** The user is gone (deleted): refused from now on; its stored usage stays as history. */
  removeUser(name: string): void {
    const m = this.meters.get(name);
    if (!m) return;
    m.configured = false;
    m.fromConfig = false;
    this.removals++;
    this.metrics?.userLimitBytes.remove({ user: name });
    this.metrics?.userUsedBytes.remove({ user: name });
  }

  /**
   * The names among `names` that have usage history here or in the store (a meter, or a stored row under the
   * plain name: every user ever applied has one, its limit): a user made under such a name is another customer
   * than the one who used it, and gets a usage key of its own (src/users/directory.ts). One read for all.
   */
  async withHistory(names: readonly string[]): Promise<Set<string>> {
    const out = new Set<string>();
    const unknown: string[] = [];
    for (const n of names) {
      if (this.meters.has(n)) out.add(n);
      else unknown.push(n);
    }
    if (unknown.length === 0) return out;
    if (this.store.getUsages) {
      for (const r of await this.store.getUsages(unknown)) out.add(r.user);
    } else if (this.store.getUsage) {
      for (const n of unknown) if ((await this.store.getUsage(n)) !== undefined) out.add(n);
    } else {
      const wanted = new Set(unknown);
      for (const r of await this.store.listUsage()) if (wanted.has(r.user)) out.add(r.user);
    }
    return out;
  }

  /**
   * A config user removed from the config (a reload without it): which customer it was, so the same user put back
   * by a later config continues under the same usage key (its usage, its quota, a limit set on it through the API)
   * instead of counting from 0 as a name made again after DELETE /v1/users/:name does. One write per removal.
   */
  async rememberRemovedConfig(name: string, who: RemovedConfigUser): Promise<void> {
    await this.store.kvSet(CONFIG_REMOVED_KEY + name, who);
  }

  /** The config users removed from the config among `names` (names deleted and not made again since): one read each. */
  async removedConfig(names: readonly string[]): Promise<Map<string, RemovedConfigUser>> {
    const out = new Map<string, RemovedConfigUser>();
    for (const n of names) {
      const who = await this.store.kvGet<RemovedConfigUser | null>(CONFIG_REMOVED_KEY + n);
      if (who !== undefined && who !== null && typeof who.createdAt === 'number') out.set(n, who);
    }
    return out;
  }

  /** The name is another customer's now (put back, or made again through the API): the removed config user is forgotten. */
  async forgetRemovedConfig(name: string): Promise<void> {
    await this.store.kvSet(CONFIG_REMOVED_KEY + name, null);
  }

  /** The base key the user's usage is kept under now (its name, or its own key), undefined when unknown. */
  usageBaseOf(user: string): string | undefined {
    return this.meters.get(user)?.base;
  }

  /** Whether the user's usage is kept under a key of its own (a name made again: AccountingUser.usageKey). */
  hasOwnUsageKey(user: string): boolean {
    const m = this.meters.get(user);
    return m !== undefined && m.base !== m.name;
  }

  /** The quota period of a user (undefined when unknown). */
  periodOf(user: string): QuotaPeriod | undefined {
    return this.meters.get(user)?.period;
  }

  /** The current period's key of a user ('total' for a lifetime quota). */
  periodKeyOf(user: string): string | undefined {
    return this.meters.get(user)?.periodKey;
  }

  /** Every configured user's counters, for the bounded per-user metric series (src/users/series.ts). */
  *snapshot(): IterableIterator<MeterReading> {
    for (const m of this.meters.values()) if (m.configured) yield m;
  }

  /**
   * A consumer's view of what changed: each call of the returned function gives the meters (configured or
   * not: check `configured`) whose usage, limit or period moved since its previous call; the first call gives
   * every meter. The values are live (the meters themselves), read them at once. `removals()` counts users
   * that stopped being configured, for a consumer that keeps a choice among users (a removed user never shows
   * up as a change).
   */
  changeFeed(): { take: () => MeterReading[]; removals: () => number } {
    // Registered at its first take, which gives every meter (meters are never dropped): until then nothing is
    // gathered for it (a start made three feeds of 100,000 meters each before ready, and a feed nobody takes,
    // such as the per-user series' without a scrape, kept its set full).
    let feed: Set<Meter> | undefined;
    return {
      take: () => {
        this.fanOut();
        if (feed === undefined) {
          feed = this.newFeed();
          return [...this.meters.values()];
        }
        const out = [...feed];
        feed.clear();
        return out;
      },
      removals: () => this.removals,
    };
  }

  private newFeed(): Set<Meter> {
    const feed = new Set<Meter>();
    this.feeds.push(feed);
    return feed;
  }

  /** Hands the changed meters to every feed and clears the list. */
  private fanOut(): void {
    const changes = this.changes;
    if (changes.length === 0) return;
    for (const m of changes) {
      m.changed = false;
      for (const f of this.feeds) f.add(m);
    }
    changes.length = 0;
  }

  /**
   * Sets the meter's period and moves it to the period containing now (see the top of this file). Returns what
   * to wait for, or undefined when it is done (the snapshot answered and the batch took the writes).
   */
  private applyPeriod(m: Meter, period: QuotaPeriod, records?: Map<string, UsageRecord>, batch?: Batch): Promise<void> | undefined {
    if (m.period === period && m.periodKey !== 'total') return undefined;
    if (m.period !== period) {
      // A different period: usage not yet written belongs to the row it was counted under.
      const delta = m.used - m.persisted;
      if (delta !== 0) this.carry.push({ user: m.key, bytes: delta });
      // The carry owns those bytes now: roll() must not carry them a second time.
      m.persisted = m.used;
      m.period = period;
      m.endsAt = -Infinity;
      if (period === 'total') {
        m.periodKey = 'total';
        m.endsAt = Infinity;
        m.used = 0;
        m.persisted = 0;
        if (this.allowance) m.allowance = this.allowance.user(m.key);
        return this.loadStored(m, m.key, records);
      }
    }
    return this.rollNow(m, records, batch);
  }

  /** Moves a period meter to the period containing now, if it is not there yet. `batch`: see upsert. */
  private async roll(m: Meter, records?: Map<string, UsageRecord>, batch?: Batch): Promise<void> {
    await this.rollNow(m, records, batch);
  }

  /** roll, returning what to wait for, or undefined when it is done (see applyPeriod). */
  private rollNow(m: Meter, records?: Map<string, UsageRecord>, batch?: Batch): Promise<void> | undefined {
    if (m.period === 'total') return undefined;
    const now = this.now();
    const w = periodWindow(m.period, this.timeZone, now);
    m.endsAt = w.endsAt;
    if (w.endsAt < this.nextBoundary) this.nextBoundary = w.endsAt;
    const key = `${m.base}@${w.key}`;
    if (key === m.key) return undefined;
    m.touch();
    const delta = m.used - m.persisted;
    if (delta !== 0 && m.periodKey !== 'total') this.carry.push({ user: m.key, bytes: delta });
    m.periodKey = sharedPeriodKey(w.key);
    m.used = 0;
    m.persisted = 0;
    if (this.allowance) {
      const a = this.allowance.user(key);
      a.seedLimit = m.limit;
      a.seedUsed = 0;
      m.allowance = a;
    }
    m.recheck();
    // What earlier runs (or other daemons) already counted in this period.
    const loading = this.loadStored(m, key, records);
    if (loading !== undefined) return loading.then(() => this.rolled(m, key, records, batch));
    return this.rolled(m, key, records, batch);
  }

  /** A roll's limit write and lease once the period's stored usage is in (see rollNow). */
  private rolled(
    m: Meter,
    key: string,
    records: Map<string, UsageRecord> | undefined,
    batch: Batch | undefined,
  ): Promise<void> | undefined {
    if (this.allowance && m.key === key) {
      // A snapshot of the rows that already holds this limit for the period needs no write (every restart).
      const write = records?.get(key)?.limitBytes !== m.limit ? this.limitWrite(key, m.limit, batch) : undefined;
      if (write !== undefined || batch === undefined) return this.leaseRolled(m, key, write, batch);
      batch.leases.set(key, batch.leases.get(key) === true);
    }
    this.logger?.debug({ user: m.name, period: m.period, key: m.periodKey }, 'quota period started');
    return undefined;
  }

  private async leaseRolled(m: Meter, key: string, write: Promise<void> | undefined, batch: Batch | undefined): Promise<void> {
    await write;
    if (batch) batch.leases.set(key, batch.leases.get(key) === true);
    else await this.allowance!.acquire(key);
    this.logger?.debug({ user: m.name, period: m.period, key: m.periodKey }, 'quota period started');
  }

  /**
   * A boundary's rolls (midnight: every day user at once), UPSERT_BATCH at a time: the new periods' rows read
   * in one read, their limits written in one call, their fleet leases taken together, not each a round trip
   * after the previous one. A failed read leaves each roll to read its own row (loadStored retries).
   */
  private async rollMany(due: readonly Meter[]): Promise<void> {
    for (let from = 0; from < due.length; from += UPSERT_BATCH) {
      const part = due.slice(from, from + UPSERT_BATCH);
      let records: Map<string, UsageRecord> | undefined;
      if (this.store.getUsages) {
        try {
          records = await this.rowsOf(part.map((m) => ({ name: m.name, period: m.period, usageKey: m.base })));
        } catch (err) {
          this.logger?.warn({ err, users: part.length }, 'could not read the new quota periods; reading them one by one');
        }
      }
      const batch = newBatch();
      for (const m of part) {
        const rolled = this.rollNow(m, records, batch);
        if (rolled !== undefined) await rolled;
      }
      await this.applyBatch(batch);
    }
  }

  /**
   * Adds the usage stored under `key` (earlier runs', other daemons') to a meter just reset to 0 for it,
   * exactly once. `used` was set to 0 before the read; while the read is in flight traffic keeps counting,
   * and the flush timer keeps running. So: the flush writes nothing for a loading meter (a delta written
   * before the read would be read back and counted twice) and the fleet re-read skips it (it SETS `used`
   * to the shared figure; adding the read's figure to that doubled it: issue 15's 2× after a restart).
   * In a fleet the shared row already holds what this daemon's syncs moved there, so `used` is that row
   * plus what is not yet synced, as readFleet computes it. A failed read is retried by the next flush.
   */
  private loadStored(m: Meter, key: string, records?: Map<string, UsageRecord>): Promise<void> | undefined {
    m.loading = key;
    if (this.allowance && !this.fedFrom(records, key)) this.recheck.add(m);
    m.loadFailed = false;
    // A snapshot of every row answers without a read (a key it lacks has no row yet), and without a promise.
    const snap = this.fromSnapshot(key, records);
    if (snap !== UNREAD) {
      this.loaded(m, key, snap);
      return undefined;
    }
    return this.loadFromStore(m, key);
  }

  private async loadFromStore(m: Meter, key: string): Promise<void> {
    let rec: UsageRecord | undefined;
    try {
      rec = await this.store.getUsage?.(key);
    } catch (err) {
      if (m.loading === key) {
        m.loadFailed = true;
        this.loadRetries.add(m);
      }
      this.logger?.warn({ err, user: m.name, key }, 'could not read the stored usage of the quota period; retrying with the next flush');
      return;
    }
    this.loaded(m, key, rec);
  }

  /** The stored usage of `key` read (rec undefined: no row): the meter's base, unless it moved on meanwhile. */
  private loaded(m: Meter, key: string, rec: UsageRecord | undefined): void {
    // A later roll or period change moved the meter on: its own load sets the base.
    if (m.key !== key || m.loading !== key) return;
    m.loading = null;
    const stored = rec?.usedBytes ?? 0;
    if (m.allowance !== null) {
      m.used = stored + m.allowance.spent;
      m.persisted = m.used;
      m.allowance.seedUsed = stored;
    } else {
      m.used += stored;
      m.persisted += stored;
    }
    m.recheck();
    // Usage moved (the quota watcher looks again), and what was counted while reading is still to write.
    m.touch();
  }

  admit(user: string): Admission {
    const m = this.meters.get(user);
    if (m === undefined || !m.configured) return { ok: false, reason: `unknown user ${user}` };
    // Its first lease is still on its way (taken after ready): asked for ahead of the others.
    if (m.allowance !== null && m.allowance.pending) m.allowance.wanted();
    if (m.endsAt <= this.now()) {
      void this.roll(m).catch((err: unknown) =>
        this.logger?.warn({ err, user }, 'could not start the new quota period; the flush retries'),
      );
    }
    if (m.exhausted) return { ok: false, reason: `traffic limit of user ${user} reached (${m.limit} bytes)` };
    if (m.refusals !== null) {
      for (const reason of m.refusals.values()) return { ok: false, reason };
    }
    return { ok: true };
  }

  /** The user's meter; the same object for every connection of the user. */
  meter(user: string): UserMeter {
    // A user the gateway let through is always known; an unknown one still gets counted, never dropped.
    return this.meters.get(user) ?? this.entry(user, 0, UNLIMITED);
  }

  connectionOpened(user: string): void {
    const m = this.meters.get(user) ?? this.entry(user, 0, UNLIMITED);
    m.active += 1;
  }

  connectionClosed(user: string): void {
    const m = this.meters.get(user);
    if (m !== undefined && m.active > 0) m.active -= 1;
  }

  /**
   * Admin override of a user's limit (PUT /v1/users/:name/limit): stored, applied at once (lifts
   * `exhausted` when the user is now under it, sets it when over).
   */
  async setLimit(user: string, limitBytes: number): Promise<UserUsage> {
    checkLocalLimit(limitBytes);
    const m = this.meters.get(user);
    if (m === undefined || !m.configured) throw new AccountingError('UNKNOWN_USER', `unknown user ${user}`);
    await this.writeLimit(m.base, limitBytes);
    m.limit = limitBytes;
    m.recheck();
    m.touch();
    if (this.allowance) {
      if (m.key !== m.base) await this.writeLimit(m.key, limitBytes);
      this.allowance.user(m.key).seedLimit = limitBytes;
      await this.allowance.release(m.key);
      await this.allowance.acquire(m.key);
    }
    this.metrics?.userLimitBytes.set({ user }, limitBytes);
    this.logger?.info({ user, limitBytes }, 'user traffic limit set');
    this.emit({ user, limitBytes, source: 'admin' });
    return this.row(m);
  }

  /**
   * Usage the platform reports for the user (GetProxyUserInfo `useFlow`, bytes). Rotor never under-counts:
   * when the platform has seen more than Rotor, Rotor adopts the platform's number. Returns true if it did.
   */
  adoptUsage(user: string, usedBytes: number): boolean {
    const m = this.meters.get(user);
    // While the stored figure is being read `used` is partial: compare at the next sync instead.
    if (m === undefined || m.loading !== null || !Number.isFinite(usedBytes) || usedBytes <= m.used) return false;
    this.logger?.info(
      { user, localBytes: m.used, platformBytes: usedBytes },
      'platform reports more usage than counted locally; adopting it',
    );
    m.used = usedBytes;
    m.recheck();
    m.touch();
    return true;
  }

  /** Refuses the user's new connections for a cause (e.g. 'account', 'balance') with a reason; null lifts it. */
  setRefusal(user: string, cause: string, reason: string | null): void {
    const m = this.meters.get(user) ?? this.entry(user, 0, UNLIMITED);
    if (reason === null) {
      m.refusals?.delete(cause);
      if (m.refusals?.size === 0) m.refusals = null;
    } else {
      (m.refusals ??= new Map()).set(cause, reason);
    }
  }

  /** The limit in force for a user (undefined when unknown). */
  limitOf(user: string): number | undefined {
    return this.meters.get(user)?.limit;
  }

  /** Bytes used by a configured user now, 0 when unknown (no allocation: a paged sort reads 100,000 of them). */
  usedOf(user: string): number {
    const m = this.meters.get(user);
    return m?.configured ? m.used : 0;
  }

  get(user: string): UserUsage | undefined {
    const m = this.meters.get(user);
    return m?.configured ? this.row(m) : undefined;
  }

  /** GET /v1/users: every configured user. */
  list(): UserUsage[] {
    const out: UserUsage[] = [];
    for (const m of this.meters.values()) if (m.configured) out.push(this.row(m));
    return out.sort((a, b) => a.name.localeCompare(b.name));
  }

  /** Called with every limit change (config or admin), e.g. by the platform-side limit sync. */
  onLimitChange(listener: (change: LimitChange) => void): void {
    this.limitListeners.push(listener);
  }

  /** Writes what changed since the last flush; concurrent calls share one write. */
  flush(): Promise<void> {
    if (this.flushing) return this.flushing.then(() => this.flushOnce());
    return this.flushOnce();
  }

  /** Stops the timer and flushes everything (graceful shutdown loses nothing). */
  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    this.closed = true;
    // The stop's flush is the last: a failed one (a store blip, SQLITE_BUSY behind an import or a backup) is tried
    // again a few times within CLOSE_RETRY_MS, and what still cannot be written is logged by user, so an operator
    // can apply it; before, it was dropped while the log said "will retry".
    let wait = 50;
    const until = this.now() + CLOSE_RETRY_MS;
    await this.flush();
    while (this.unwritten() && this.now() + wait <= until) {
      await new Promise((resolve) => setTimeout(resolve, wait));
      wait *= 2;
      await this.flush();
    }
    if (this.unwritten()) {
      const lost = this.unwrittenBytes();
      this.logger?.error(
        { users: lost.length, bytes: lost.reduce((n, d) => n + d.bytes, 0), byUser: lost.slice(0, CLOSE_LOST_LISTED) },
        'traffic counters not written at stop: these bytes are missing from the stored usage',
      );
    }
  }

  /** Whether metered bytes are still waiting for a store write. */
  private unwritten(): boolean {
    return this.unstored !== undefined || this.carry.length > 0 || this.unflushed.size > 0;
  }

  /** What a stop could not write, by store key (a user, or a user's period), largest first. */
  private unwrittenBytes(): { user: string; bytes: number }[] {
    const byKey = new Map<string, number>();
    for (const d of this.unstored?.deltas ?? []) byKey.set(d.user, (byKey.get(d.user) ?? 0) + d.bytes);
    for (const d of this.carry) byKey.set(d.user, (byKey.get(d.user) ?? 0) + d.bytes);
    for (const m of this.unflushed) if (m.used !== m.persisted) byKey.set(m.key, (byKey.get(m.key) ?? 0) + m.used - m.persisted);
    return [...byKey].map(([user, bytes]) => ({ user, bytes })).sort((a, b) => b.bytes - a.bytes);
  }

  private flushOnce(): Promise<void> {
    if (this.flushing) return this.flushing;
    const run = this.writeChanges().finally(() => {
      this.flushing = undefined;
    });
    this.flushing = run;
    return run;
  }

  private async writeChanges(): Promise<void> {
    const now = this.now();
    if (now >= this.nextBoundary) {
      // A period ended for some meter (a day boundary, not every flush): roll those, find the next end.
      this.nextBoundary = Infinity;
      const due: Meter[] = [];
      for (const m of this.meters.values()) {
        if (m.endsAt <= now) due.push(m);
        else if (m.endsAt < this.nextBoundary) this.nextBoundary = m.endsAt;
      }
      await this.rollMany(due);
    }
    for (const m of [...this.loadRetries]) {
      this.loadRetries.delete(m);
      if (m.loadFailed && m.loading !== null) await this.loadStored(m, m.loading);
    }
    await this.writeDeltas();
    if (this.allowance) await this.readFleet();
  }

  /**
   * Fleet mode: the shared totals (every daemon's traffic) and limit (maybe set on another daemon). Only the
   * rows written since the last read (the store's usage change feed) and those of the meters in `recheck`:
   * a flush's cost follows the traffic, not the number of users (100,000 users: every row every 2 s was ~200
   * round trips and 100,000 records). Every row when the feed cannot tell (the first read, Redis lost data).
   */
  private async readFleet(): Promise<void> {
    const feed = this.store.usageChangedSince !== undefined && this.store.getUsages !== undefined;
    // Asked before the read: a meter made while it is in flight is read by key next time.
    const asked = feed ? [...this.recheck] : [];
    this.recheck.clear();
    // The start's read is applied (or given up for reads by key): nothing is made from it any more.
    if (this.startRead !== undefined && !this.startRead.applying && this.startRows === undefined) this.startRead = undefined;
    let records: UsageRecord[];
    let full = true;
    try {
      if (feed) {
        const r = await this.store.usageChangedSince!(this.fleetCursor);
        records = r.rows;
        full = r.full;
        this.fleetCursor = r.cursor;
        if (!full) {
          const keys: string[] = [];
          for (const m of asked) {
            if (m.loading === null) keys.push(m.key);
            else this.recheck.add(m); // its load sets it; read once more after
          }
          if (keys.length > 0) records = records.concat(await this.store.getUsages!(keys));
        }
      } else {
        records = await this.store.listUsage();
      }
    } catch {
      for (const m of asked) this.recheck.add(m);
      return; // the shared store is down: already logged; keep the last view
    }
    for (const rec of records) {
      const m = this.meterOfKey(rec.user);
      if (m === undefined || m.allowance === null || m.loading !== null) this.startRead?.missed.add(rec.user);
      if (m === undefined || m.allowance === null) continue;
      // A meter whose stored figure is being read gets it from loadStored (setting it here too doubled it); a
      // row written after that read began is then read again by key.
      if (m.loading !== null) {
        this.recheck.add(m);
        continue;
      }
      // Not yet synced spending is ours on top of the shared figure.
      const used = rec.usedBytes + m.allowance.spent;
      if (used !== m.used || rec.limitBytes !== m.limit) m.touch();
      m.used = used;
      m.persisted = m.used;
      m.limit = rec.limitBytes;
      m.allowance.seedLimit = rec.limitBytes;
      m.allowance.seedUsed = rec.usedBytes;
      if (m.configured) {
        this.metrics?.userUsedBytes.set({ user: m.name }, m.used);
        this.metrics?.userLimitBytes.set({ user: m.name }, m.limit);
      }
    }
  }

  /** The meter whose current store key is `key` (`<name>` or `<name>@<periodKey>`), without a walk of every meter. */
  private meterOfKey(key: string): Meter | undefined {
    const m = this.meters.get(nameOfKey(key));
    return m !== undefined && m.key === key ? m : undefined;
  }

  private async writeDeltas(): Promise<void> {
    // A flush whose write failed goes first, as it was: nothing newer is written before it (its id would not
    // cover bytes added to it, and a later write of the same bytes under another id would count them twice).
    this.fanOut();
    const unstored = this.unstored;
    if (unstored !== undefined) {
      try {
        this.startRows = undefined;
        await this.store.addUsage(unstored.deltas, unstored.id);
      } catch (err) {
        this.logger?.warn({ err, users: unstored.deltas.length, batch: unstored.id }, 'could not persist traffic counters; will retry');
        return;
      }
      if (this.unstored === unstored) this.unstored = undefined;
    }
    const carried = this.carry;
    this.carry = [];
    const deltas: { user: string; bytes: number }[] = [...carried];
    const targets: { m: Meter; to: number }[] = [];
    this.fanOut();
    const changed = [...this.unflushed];
    this.unflushed.clear();
    for (const m of changed) {
      const dUp = m.up - m.reportedUp;
      const dDown = m.down - m.reportedDown;
      if (this.countBytes && dUp > 0) this.metrics?.bytesTotal.inc({ user: m.name, direction: 'up' }, dUp);
      if (this.countBytes && dDown > 0) this.metrics?.bytesTotal.inc({ user: m.name, direction: 'down' }, dDown);
      m.reportedUp = m.up;
      m.reportedDown = m.down;
      // Its stored figure is being read: a delta written now could be read back and counted twice. Kept for
      // the flush after the read (which also touches the meter).
      if (m.loading !== null) {
        this.unflushed.add(m);
        continue;
      }
      const used = m.used;
      if (used !== m.persisted) {
        deltas.push({ user: m.key, bytes: used - m.persisted });
        targets.push({ m, to: used });
        if (m.configured) this.metrics?.userUsedBytes.set({ user: m.name }, used);
      }
    }
    if (deltas.length === 0) return;
    // The bytes are this write's from now on, whatever its outcome: a reset or a period's roll meanwhile counts
    // only what came after (before, it carried them to the old key a second time), and a failed write is kept
    // whole and written again under its id (see UnstoredFlush). In a fleet the write is the leaser's usageStore
    // (its syncs and reports move the bytes, never the store's addUsage), which takes a batch id once too: a
    // flush it took but that was seen failing was folded into the next flush's deltas and reported twice.
    for (const t of targets) t.m.persisted = t.to;
    const batch: UnstoredFlush = { id: this.batchIds(), deltas };
    try {
      this.startRows = undefined;
      await this.store.addUsage(deltas, batch.id);
    } catch (err) {
      this.unstored = batch;
      this.logger?.warn({ err, users: deltas.length, batch: batch.id }, 'could not persist traffic counters; will retry');
    }
  }

  /**
   * Fleet: whether the usage feed covers what `records` said of `key`: the start's read (taken with the
   * feed's cursor), and no row of that key written since was read by readFleet while no meter could take it.
   * Every later write of the row is in the feed's next answer, which finds the meter by its key: a meter made
   * or loaded from that read needs no read by key (recheck). Before, every meter was read again by key at the
   * first flush after a start (20,000 users: ~33,000 rows, and every meter's metrics set).
   */
  private fedFrom(records: ReadonlyMap<string, UsageRecord> | undefined, key: string): boolean {
    const start = this.startRead;
    return start !== undefined && records === start.rows && !start.missed.has(key);
  }

  /** `fed`: its figures come from a read the usage feed covers (see fedFrom). */
  private entry(name: string, used: number, limit: number, fed = false, base = name): Meter {
    let m = this.meters.get(name);
    if (m === undefined) {
      m = new Meter(name, used, limit, this.changes);
      m.base = base;
      if (this.allowance) {
        m.allowance = this.allowance.user(m.key);
        if (!fed) this.recheck.add(m);
      }
      this.meters.set(name, m);
      m.touch();
    }
    return m;
  }

  private row(m: Meter): UserUsage {
    return { name: m.name, usedBytes: m.used, limitBytes: m.limit, activeConnections: m.active };
  }

  private emit(change: LimitChange): void {
    for (const l of this.limitListeners) {
      try {
        l(change);
      } catch (err) {
        this.logger?.warn({ err, user: change.user }, 'limit listener failed');
      }
    }
  }
}
