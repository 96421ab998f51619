// A user's traffic limit enforced across the fleet without Redis on the data path. Each daemon leases a
// slice of the user's remaining allowance from Redis, spends it locally (a sync subtraction per chunk) and
// asks for more when it runs low; what it spent moves from its lease to the user's `used` counter in the
// same Lua script that grants the next slice, so `used + Σ leases ≤ limit` holds in Redis at every moment.
//
// Overshoot bound (how far the fleet's total can pass the limit):
//   • Redis reachable by every daemon: none beyond the chunks in flight. A daemon stops a user when its
//     lease is spent, and leases never sum above what is left. In-flight: each connection may relay the
//     one chunk that crosses zero (≤ chunk size × the user's open connections on that daemon).
//   • A daemon that cannot reach Redis (Redis down or restarting, or this daemon partitioned) keeps serving
//     each user on what it holds: its lease, plus its share of what nobody held at its last sync
//     (free / live daemons, at least `offlineBytes`, at most `outageMaxBytes`), taken once per outage. With Redis down for everyone
//     the shares add up to what the user had left, so the fleet stays within the limit (give or take
//     `offlineBytes` per daemon for a user with less than that left) however long the outage lasts; a user
//     is refused only when its share runs out. A daemon partitioned from a Redis the others still reach
//     has its lease handed back after `aliveTtlMs` (its heartbeat expired) while it may still be spending
//     it, and the others may spend the free part it took a share of: ≤ sliceBytes + outageMaxBytes per
//     such daemon.
//   • While a refill is in flight, and only when the previous sync granted the whole lease asked for (the
//     fleet was not near the limit), a daemon lets the user overdraw its lease by up to lowWaterBytes (half
//     a slice by default), so a fast user is not cut for one Redis round trip; the refill reports the
//     overdraft as used. Other daemons spending the last of the allowance in that round trip is the only
//     way this passes the limit with Redis reachable: ≤ lowWaterBytes per daemon.
//   • A start takes its users' leases after ready (lendAtStart; 100,000 users' leases are ~1/3 of a start):
//     until a user's first lease arrives the daemon serves it from a start share, what its stored row said
//     was left (limit − used, read at the start) cut to offlineBytes; the leases are sent once the daemon
//     is ready (takeLeases), a user's ahead of the others as soon as a connection of it is admitted. The start share is this
//     daemon's own-decision share exactly as the offline allowance is (it counts as this outage's share: a
//     Redis found unreachable by the first lease adds nothing to it), and what was spent from it is reported
//     as used by the first lease, which is then cut from what is left. So a user whose remainder other
//     daemons hold leased can pass the limit by what it spends from the share: ≤ offlineBytes per daemon
//     that (re)started, once per start; no user is refused for its lease being on its way unless its row
//     said nothing was left. Serving from a share rather than holding connections until the lease arrives
//     keeps admission synchronous and Redis off the data path. With offlineBytes 0 nothing is lent: every
//     lease is taken before ready, as before.
//   So with N daemons: total ≤ limit + N × (lowWaterBytes + offlineBytes) + in-flight chunks with Redis
//   down for all; limit + N × lowWaterBytes + in-flight chunks while Redis is reachable (+ offlineBytes per
//   daemon started while the user was near its limit); a partition adds the per-daemon term above. When Redis comes back, each daemon's next sync moves everything it spent
//   (during the outage included) into `used`: the books are exact afterwards, only the enforcement was
//   approximate. If it came back empty, the same syncs rebuild usage and limits (see SYNC below).
//
// Choose sliceBytes ≥ 2 × (one user's peak rate through one daemon) × (Redis round trip + scheduling),
// so a refill (started at half a slice) lands before the slice is spent; 1 MiB is plenty on a LAN.
import { randomBytes } from 'node:crypto';
import type { AllowanceSource } from '../accounting/accounting.ts';
import { AllowanceShare, RefillRequests } from '../accounting/allowance-share.ts';
import type { Logger } from '../telemetry/logger.ts';
import type { UsageStore } from '../store/types.ts';
import { parseBatchId, type BatchId } from '../store/batch-marks.ts';
import type { AllowanceGrant, AllowanceStore, AllowanceSync } from '../store/fleet-state.ts';
import { InternalError } from '../errors/rotor-error.ts';

export interface AllowanceOptions {
  /** This daemon's identity, unique in the fleet. */
  instance: string;
  /** Most bytes of one user's allowance a daemon holds at a time. */
  sliceBytes: number;
  /** Refill when what is left of the lease falls to this; default sliceBytes / 2. */
  lowWaterBytes?: number;
  /** Least a daemon may spend per user on its own while Redis is unreachable (once per outage); default sliceBytes. */
  offlineBytes?: number;
  /**
   * Most a daemon may spend per user on its own in one outage: its share of what the user had left is cut
   * to this (what a daemon partitioned from a Redis the others still reach can pass the limit by). Default
   * 16 slices; never below offlineBytes.
   */
  outageMaxBytes?: number;
  /** The heartbeat's TTL: leases of a daemon silent this long go back to the fleet. Default 10 000 ms. */
  aliveTtlMs?: number;
  /** How often every user is synced (spent reported, exhausted users retried, heartbeat); default aliveTtlMs / 3. */
  syncEveryMs?: number;
  /** Distinguishes this process's reports from an earlier run's with the same instance id; default random. */
  epoch?: string;
  now?: () => number;
  logger?: Logger;
  /** Called when a user's allowance changes from exhausted to available or back (off the data path). */
  onChange?: (user: string, exhausted: boolean) => void;
}

/**
 * One user's allowance on this daemon: the data path's part (exhausted, spend) is accounting's AllowanceShare,
 * held below the gateway; this adds the fleet's books, kept off the data path.
 */
export class UserAllowance extends AllowanceShare {
  /** Cumulative bytes (spent and extra) Redis confirmed applying from this reporter (see SYNC). */
  acked = 0;
  /** Redis could not be reached at the last attempt. */
  offline = false;
  /** Non-traffic usage to move into `used` at the next sync (e.g. the platform counted more). */
  extra = 0;
  /** Whether this user's offline allowance was taken in the current outage. */
  offlineTaken = false;
  /** Last exhausted state told to onChange. */
  wasExhausted = true;
  /** The fleet's `used` for this user at the last sync, and the epoch of the Redis it came from ('' none). */
  lastUsed = 0;
  lastEpoch = '';
  /**
   * At the last sync: what nobody held of the user's allowance (limit − used − every lease; Infinity when
   * unlimited, 0 before any sync) and how many daemons were live. A daemon that loses Redis may spend its
   * share of that (free / daemons) on its own: the fleet then stays within the limit however long the
   * outage lasts, as long as nobody else reaches Redis meanwhile.
   */
  freeAtSync = 0;
  daemonsAtSync = 1;
  /**
   * A sync was started for it. A share made but never leased nor reported (a period user's share under its
   * bare name, whose traffic goes to the period's) has nothing for a round or the stop to sync.
   */
  tried = false;
}

/**
 * Users' syncs per script call (AllowanceStore.syncMany): one call of 200 users costs the daemon about what two
 * single syncs did, and Redis runs them back to back as separate calls would (a few ms per call).
 */
export const SYNC_BATCH = 200;
/**
 * Script calls a daemon keeps in flight at most; more syncs wait their turn, first come first served (see
 * pump). Two: Redis runs one while the daemon builds the next. What bounds the bytes and the work ahead of
 * a call's timeout is the users in flight, MAX_SYNCS_IN_FLIGHT: 400 users in two calls are ~80 KB, about what
 * the 64 single calls in flight before batching were.
 */
export const MAX_BATCHES_IN_FLIGHT = 2;
export const MAX_SYNCS_IN_FLIGHT = SYNC_BATCH * MAX_BATCHES_IN_FLIGHT;

/** One user's sync waiting for (or in) a batch. */
interface SyncJob {
  a: UserAllowance;
  want: number;
  final: boolean;
  resolve: () => void;
  reject: (err: unknown) => void;
}

export class AllowanceLeaser implements AllowanceSource {
  readonly instance: string;
  /** This process's reporter id in the acked hash: the instance id may be reused by the next run. */
  private readonly reporter: string;
  private readonly slice: number;
  private readonly lowWater: number;
  private readonly offlineBytes: number;
  private readonly outageMaxBytes: number;
  private readonly aliveTtlMs: number;
  private readonly now: () => number;
  private readonly logger: Logger | undefined;
  private readonly onChange: AllowanceOptions['onChange'];
  private readonly users = new Map<string, UserAllowance>();
  private readonly timer: NodeJS.Timeout;
  private readonly syncEveryMs: number;
  /** Shares that ran low on the data path: refilled here, in a task of their own (accounting/allowance-share.ts). */
  private readonly refills: RefillRequests;
  private closed = false;
  /** Redis could not be reached in the last round: the next one syncs every user (see syncAll). */
  private everyoneNext = false;
  /** The fleet's epoch as last seen (undefined before the first reply): a new one means Redis lost its data. */
  private epoch: string | undefined;
  /** Losses seen so far: a round compares it before and after, so overlapping rounds each see a loss. */
  private losses = 0;
  private readonly lostListeners: ((epoch: string) => void)[] = [];
  private candidates = 0;
  /** Syncs waiting for a batch, first come first served (from `head`), and the batches in flight. */
  private readonly queue: SyncJob[] = [];
  private head = 0;
  private batchesInFlight = 0;
  private pumpDue = false;
  /** Users lent a start share whose first lease waits its turn (lendAtStart), from `laterHead`; see topUp. */
  private readonly later: UserAllowance[] = [];
  private laterHead = 0;
  /** First leases lent and not yet settled, who waits for them (leasesTaken), and when the first was lent. */
  private lent = 0;
  private lentSince = 0;
  /** takeLeases was called: the lent users' first leases are sent (before it only those a connection asked for). */
  private leasing = false;
  private lentWaiters: (() => void)[] = [];

  constructor(
    private readonly store: AllowanceStore,
    options: AllowanceOptions,
  ) {
    if (!(options.sliceBytes > 0)) throw new InternalError('sliceBytes must be positive');
    this.instance = options.instance;
    this.reporter = `${options.instance}:${options.epoch ?? randomBytes(6).toString('hex')}`;
    this.slice = Math.floor(options.sliceBytes);
    this.lowWater = options.lowWaterBytes ?? Math.floor(this.slice / 2);
    this.offlineBytes = options.offlineBytes ?? this.slice;
    this.outageMaxBytes = Math.max(this.offlineBytes, options.outageMaxBytes ?? 16 * this.slice);
    this.aliveTtlMs = options.aliveTtlMs ?? 10_000;
    this.now = options.now ?? Date.now;
    this.logger = options.logger;
    this.onChange = options.onChange;
    this.syncEveryMs = options.syncEveryMs ?? Math.max(10, Math.floor(this.aliveTtlMs / 3));
    this.timer = setInterval(() => void this.syncAll(), this.syncEveryMs);
    this.refills = new RefillRequests(this.now, (share) => {
      if (!this.closed && share.syncing === undefined) void this.sync(share as UserAllowance, this.slice);
    });
    this.timer.unref();
  }

  /** The data path's handle for a user (the same object every time). */
  user(name: string): UserAllowance {
    let a = this.users.get(name);
    if (a === undefined) {
      a = new UserAllowance(name, this.lowWater, this.refills);
      this.users.set(name, a);
    }
    return a;
  }

  /**
   * Tops the user's lease up to one slice (reporting what was spent); resolves to the bytes this daemon may
   * now spend (Infinity: unlimited; 0: the fleet's allowance is used up). Never rejects: when Redis is
   * unreachable the offline allowance applies.
   */
  async acquire(user: string): Promise<number> {
    const a = this.user(user);
    await this.sync(a, this.slice);
    return a.available;
  }

  /**
   * A start's lease taken after ready: the user is served from its start share meanwhile (min(offlineBytes,
   * leftBytes), leftBytes being what the user had left by its stored row; see the top of this file for the
   * bound) and its first lease is queued after every sync waiting now; a connection admitted meanwhile moves
   * it ahead (AllowanceShare.wanted). False when nothing is lent (offlineBytes 0, or the user already synced
   * or syncing here): the caller takes the lease itself.
   */
  lendAtStart(user: string, leftBytes: number): boolean {
    if (this.offlineBytes <= 0 || this.closed) return false;
    const a = this.user(user);
    if (a.tried || a.pending || a.syncing !== undefined || a.spent > 0 || a.extra > 0) return false;
    a.pending = true;
    a.held = Math.min(this.offlineBytes, Math.max(0, Math.floor(leftBytes)));
    // The start share is this outage's own-decision share too: an unreachable Redis adds no second one.
    a.offlineTaken = true;
    if (this.lent++ === 0) this.lentSince = this.now();
    this.later.push(a);
    this.tell(a);
    if (this.leasing) this.schedulePump();
    return true;
  }

  /**
   * Starts sending the lent users' first leases (the daemon calls it once ready): sent during the start they
   * took the CPU the rest of the start needed, and the start was no sooner ready.
   */
  takeLeases(): void {
    if (this.leasing) return;
    this.leasing = true;
    if (this.lent > 0) this.lentSince = this.now();
    this.schedulePump();
  }

  /** Starts the lent users' first leases (takeLeases) and resolves once each has arrived or found Redis unreachable. */
  leasesTaken(): Promise<void> {
    this.takeLeases();
    if (this.lent === 0) return Promise.resolve();
    return new Promise((resolve) => this.lentWaiters.push(resolve));
  }

  /** A lent user's first sync settled: the share is the lease's (or the offline path's) from now on. */
  private firstSettled(a: UserAllowance): void {
    if (!a.pending) return;
    a.pending = false;
    if (--this.lent > 0) return;
    if (!this.closed)
      this.logger?.info({ ms: Math.round(this.now() - this.lentSince) }, "allowance: every user's first lease taken after the start");
    const waiters = this.lentWaiters;
    this.lentWaiters = [];
    for (const w of waiters) w();
  }

  /**
   * Usage that did not go through `spend` (e.g. adopted from the platform): moved into `used` at the next
   * sync, which this starts and awaits.
   */
  async report(user: string, usedBytes: number): Promise<void> {
    const a = this.user(user);
    if (usedBytes > 0) a.extra += Math.trunc(usedBytes);
    await this.sync(a, this.slice);
  }

  /** Reports what was spent and gives the unspent lease back to the fleet. */
  async release(user: string): Promise<void> {
    const a = this.users.get(user);
    if (a) await this.sync(a, 0);
  }

  /**
   * The timer's round (every syncEveryMs): syncs the users that need Redis — spending or extra usage to
   * report, a lease run low or out (retried: the fleet may have room again), offline — not every user: an
   * idle user holding its lease needs nothing but the heartbeat that keeps this daemon's leases its own, and
   * one script call (or a bare heartbeat when nobody is due) renews that for all. 10,000 users, a few
   * active: a few calls per round instead of 10,000. After a round in which Redis could not be reached the
   * next one syncs every user, so a Redis that came back empty has every user's usage and limit rebuilt.
   */
  async syncAll(): Promise<void> {
    const everyone = this.everyoneNext;
    const lossesBefore = this.losses;
    const due: UserAllowance[] = [];
    for (const a of this.users.values()) {
      if (!a.tried && a.spent <= 0 && a.extra <= 0) continue;
      if (everyone || a.offline || a.spent > 0 || a.extra > 0 || a.exhausted || a.available <= this.lowWater) due.push(a);
    }
    let reached = true;
    const heartbeat = async (): Promise<void> => {
      try {
        // Also reports the epoch (written if Redis has none): a loss is noticed within a round.
        const epoch = await this.store.heartbeat(this.instance, this.aliveTtlMs, this.now(), this.candidateEpoch);
        if (epoch !== undefined) this.sawEpoch(epoch);
      } catch {
        reached = false; // the connection logged it
      }
    };
    await Promise.all([
      ...due.map((a) => this.sync(a, a.exhausted || a.available <= this.lowWater ? this.slice : Math.max(0, a.held - a.spent))),
      ...(due.length === 0 ? [heartbeat()] : []),
    ]);
    // A loss seen while this round ran (by it or by a round overlapping it): every user is synced next, since
    // some of this round's syncs may have run before the loss. Rounds overlap (the timer's and an explicit one,
    // or one longer than the interval on a slow Redis), so a round only ever sets the flag for what it saw and
    // clears it only after an everyone round that saw neither a loss nor an unreachable Redis: a round that
    // saw nothing must not undo what an overlapping one asked for.
    const lost = this.losses !== lossesBefore;
    if (!reached || due.some((a) => a.offline) || lost) this.everyoneNext = true;
    else if (everyone) this.everyoneNext = false;
  }

  /**
   * A UsageStore for the accounting layer in fleet mode: its flush no longer adds traffic to `used` (each
   * sync does), only what it counted beyond the bytes that went through `spend` (adopted usage). A flush is taken
   * once by its batch id (`<writer><seq>`, written in order, src/store/batch-marks.ts): one taken and seen failing
   * (a sync that landed, then failed in its answer's handling) is written again as it was, and then only synced,
   * not reported again (before, the retry reported its whole delta, traffic included, a second time).
   */
  usageStore<S extends Pick<UsageStore, 'addUsage'>>(store: S): S {
    /** The last flush taken: its writer and number. */
    let mark: BatchId | undefined;
    const addUsage = async (deltas: { user: string; bytes: number }[], batchId?: string): Promise<void> => {
      const id = batchId === undefined ? undefined : parseBatchId(batchId);
      const again = id !== undefined && mark !== undefined && id.writer === mark.writer && id.seq <= mark.seq;
      if (id !== undefined && !again) mark = id;
      const waits: Promise<void>[] = [];
      for (const d of deltas) {
        if (again) {
          // Taken before: what it reported waits in the user's books (extra, or acked); the sync is what failed.
          waits.push(this.report(d.user, 0));
          continue;
        }
        const a = this.user(d.user);
        const beyond = d.bytes - a.unflushed;
        a.unflushed = 0;
        if (beyond > 0) waits.push(this.report(d.user, beyond));
      }
      await Promise.all(waits);
    };
    return new Proxy(store, { get: (target, prop, receiver) => (prop === 'addUsage' ? addUsage : Reflect.get(target, prop, receiver)) });
  }

  /** Stops the timer and gives every unspent lease back (best effort when Redis is down). */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.timer);
    // First leases not sent yet stay unsent: those users hold nothing in Redis (what they spent is synced below).
    for (let i = this.laterHead; i < this.later.length; i++) this.firstSettled(this.later[i]!);
    this.later.length = 0;
    this.laterHead = 0;
    const held = [...this.users.values()].filter((a) => a.tried || a.spent > 0 || a.extra > 0);
    await Promise.all(held.map((a) => this.sync(a, 0, true)));
  }

  private sync(a: UserAllowance, want: number, final = false): Promise<void> {
    if (a.syncing) return a.syncing.then(() => this.sync(a, want, final));
    const run = new Promise<void>((resolve, reject) => {
      this.queue.push({ a, want, final, resolve, reject });
      this.schedulePump();
    }).finally(() => {
      a.syncing = undefined;
    });
    a.syncing = run;
    return run;
  }

  /**
   * Sends the waiting syncs once the current task has queued all of its own: a start's or a round's loop over
   * every user fills whole batches instead of sending its first users one per call.
   */
  private schedulePump(): void {
    if (this.pumpDue) return;
    this.pumpDue = true;
    queueMicrotask(() => {
      this.pumpDue = false;
      this.pump();
    });
  }

  /**
   * Sends up to SYNC_BATCH waiting syncs per call while fewer than MAX_BATCHES_IN_FLIGHT calls are in flight
   * (FIFO). A round that syncs every user (a start, a rebuild after a loss, the stop) would otherwise send
   * 100,000 users at once, and each command's timeout runs from its send: the last ones would time out behind
   * the others, those users go offline, and the next round syncs everyone again.
   */
  private pump(): void {
    while (this.batchesInFlight < MAX_BATCHES_IN_FLIGHT && (this.topUp(), this.head < this.queue.length)) {
      const end = Math.min(this.queue.length, this.head + SYNC_BATCH);
      const jobs = this.queue.slice(this.head, end);
      this.head = end;
      if (this.head === this.queue.length) {
        this.queue.length = 0;
        this.head = 0;
      } else if (this.head >= 4096 && this.head * 2 >= this.queue.length) {
        // Drop what was sent once it is most of the array (a start's 100,000: not one shift per batch).
        this.queue.splice(0, this.head);
        this.head = 0;
      }
      this.batchesInFlight++;
      void this.syncBatch(jobs).finally(() => {
        this.batchesInFlight--;
        this.pump();
      });
    }
  }

  /**
   * Fills the queue up to one batch from the lent users' first leases once takeLeases was called: they go
   * after every sync asked for (a refill, a waiting connection's lease, a round), which so never waits behind
   * the whole start's.
   */
  private topUp(): void {
    while (this.leasing && this.queue.length - this.head < SYNC_BATCH && this.laterHead < this.later.length) {
      const a = this.later[this.laterHead++]!;
      if (a.pending && a.syncing === undefined) this.background(this.sync(a, this.slice));
    }
    if (this.laterHead === this.later.length) {
      this.later.length = 0;
      this.laterHead = 0;
    }
  }

  private background(run: Promise<void>): void {
    run.catch((err: unknown) => this.logger?.warn({ err }, 'allowance: a lease taken after the start failed'));
  }

  /** One script call for the jobs' users; each job settles with its user's outcome (never rejects itself). */
  private async syncBatch(jobs: readonly SyncJob[]): Promise<void> {
    const now = this.now();
    const newEpoch = this.candidateEpoch;
    const requests: AllowanceSync[] = new Array<AllowanceSync>(jobs.length);
    // What each request reports, taken now: bytes spent while the script runs stay in `spent` for the next.
    const taken = new Array<{ spent: number; extra: number; cumulative: number }>(jobs.length);
    for (let i = 0; i < jobs.length; i++) {
      const { a, want, final } = jobs[i]!;
      a.tried = true;
      const spent = a.spent;
      const extra = a.extra;
      // Not yet confirmed: everything since the last confirmed sync, a failed one's bytes included.
      const cumulative = a.acked + Math.max(0, Math.trunc(spent)) + extra;
      taken[i] = { spent, extra, cumulative };
      requests[i] = {
        instance: this.instance,
        user: a.user,
        reported: cumulative,
        want,
        aliveTtlMs: this.aliveTtlMs,
        now,
        seedLimit: a.seedLimit,
        seedUsed: a.lastUsed,
        seedEpoch: a.lastEpoch,
        reporter: this.reporter,
        acked: a.acked,
        final,
        newEpoch,
      };
    }
    let grants: AllowanceGrant[] | undefined;
    try {
      grants = await this.store.syncMany(requests);
    } catch {
      grants = undefined; // unreachable: the connection logged it
    }
    if (grants !== undefined && grants.length > 0) this.sawEpoch(grants[0]!.epoch);
    for (let i = 0; i < jobs.length; i++) {
      const job = jobs[i]!;
      try {
        const r = grants?.[i];
        if (r === undefined) this.unreachable(job.a);
        else this.granted(job.a, job.want, taken[i]!, r);
        job.resolve();
      } catch (err) {
        job.reject(err);
      }
    }
  }

  /** Redis could not be reached: serve on the offline allowance, once per user per outage. */
  private unreachable(a: UserAllowance): void {
    if (!a.offline)
      this.logger?.warn(
        { user: a.user, offlineBytes: this.outageShare(a) },
        "allowance: redis unreachable; serving this user on this instance's share of what it has left",
      );
    a.offline = true;
    a.quietUntil = this.now() + this.syncEveryMs;
    this.firstSettled(a);
    if (!a.offlineTaken && !a.unlimited) {
      a.offlineTaken = true;
      a.held += this.outageShare(a);
    }
    this.tell(a);
  }

  private granted(a: UserAllowance, want: number, taken: { spent: number; extra: number; cumulative: number }, r: AllowanceGrant): void {
    if (r.seeded)
      this.logger?.warn(
        { user: a.user, limitBytes: a.seedLimit, usedBytes: a.lastUsed },
        "allowance: redis had lost this user's usage (restarted empty?); rebuilt it from this instance's last view",
      );
    a.lastUsed = r.used;
    a.lastEpoch = r.epoch;
    a.freeAtSync = r.limit < 0 ? Infinity : Math.max(0, r.limit - r.used - r.others - r.held);
    a.daemonsAtSync = Math.max(1, r.daemons);
    // Bytes spent while the script ran stay in `spent`, to be reported next time.
    a.acked = taken.cumulative;
    a.spent -= taken.spent;
    a.extra -= taken.extra;
    a.unlimited = r.granted === -1;
    a.held = r.held;
    a.roomy = want > 0 && r.held >= want;
    a.offline = false;
    a.offlineTaken = false;
    a.quietUntil = r.granted === 0 && want > r.held ? this.now() + this.syncEveryMs : 0;
    this.firstSettled(a);
    this.tell(a);
  }

  /**
   * Called with the new epoch when Redis is found to have lost the fleet's data (restarted without
   * persistence, flushed): whoever holds shared state puts theirs back (users, sessions). Usage and limits
   * are rebuilt by the syncs themselves (see SYNC), every user's at the next round.
   */
  onDataLost(listener: (epoch: string) => void): void {
    this.lostListeners.push(listener);
  }

  /** The fleet's epoch as this daemon last saw it (undefined before the first sync or heartbeat). */
  get currentEpoch(): string | undefined {
    return this.epoch;
  }

  /**
   * A fresh id for the epoch key should Redis have none (never reused: a reused id would hide a loss): this
   * process's reporter id and a counter, not random bytes per sync (100,000 users' syncs at a start).
   */
  private get candidateEpoch(): string {
    return `${this.reporter}.${++this.candidates}`;
  }

  private sawEpoch(epoch: string): void {
    if (this.epoch === epoch) return;
    const before = this.epoch;
    this.epoch = epoch;
    if (before === undefined) return;
    this.losses++;
    this.logger?.warn(
      { epoch },
      'redis lost the fleet data (restarted without persistence, or flushed); rebuilding it from what this instance holds',
    );
    for (const l of this.lostListeners) {
      try {
        l(epoch);
      } catch (err) {
        this.logger?.warn({ err }, 'a rebuild after a redis data loss failed');
      }
    }
  }

  /** What a user may spend on its own once Redis is found unreachable (once per outage; see freeAtSync). */
  private outageShare(a: UserAllowance): number {
    const share = a.freeAtSync === Infinity ? 0 : Math.floor(a.freeAtSync / Math.max(1, a.daemonsAtSync));
    return Math.min(this.outageMaxBytes, Math.max(this.offlineBytes, share));
  }

  private tell(a: UserAllowance): void {
    const exhausted = a.exhausted;
    if (exhausted !== a.wasExhausted) {
      a.wasExhausted = exhausted;
      this.onChange?.(a.user, exhausted);
    }
  }
}
