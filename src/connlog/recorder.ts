// The connection log's running part: mints a context per accepted connection (the one id that the
// listeners, the router, the log lines, the live list and the record share), keeps the live list, and turns
// each ended context into a record on a bounded queue that a timer drains in batches to the store and the
// file. Nothing here runs per chunk: a context costs one object (threaded into the live list) for the connection's life,
// its record is built once at the end, and the queue never blocks a listener: when it is full the oldest
// record is dropped and counted (rotor_connlog_dropped_total).
//
// Billing must not depend on when a connection ends or when the daemon stops, so open connections are
// checkpointed (every checkpointMs): the bytes relayed since the last checkpoint go into that hour's and
// day's rollups, and the connection's record is written as `open` with its bytes so far (the end replaces
// it). They are also checkpointed at every hour boundary of the recorder's clock (a timer armed for it; the
// first connection opened or ended, or checkpoint, past it if the timer is late or the clock jumped), their
// bytes so far counted in the hour that ends: bytes relayed before midnight are in that day's row, not the
// next's, give or take what is relayed between the boundary and that checkpoint (the timer's lateness:
// milliseconds, more on a stalled event loop). A connection still open when the drain of a stop ends is
// recorded as `shutdown`, with its bytes up to the cut. A SIGKILL therefore loses at most one checkpoint interval of an open connection's bytes, and one
// flush interval of ended connections' records. From the stop's start the open connections are checkpointed
// at once and then about every second of the drain, so a SIGKILL during the drain (a stop whose grace is
// shorter than the drain) loses about a second of their bytes.
//
// A store write that fails (a Redis command past its timeout, a Redis restart, a full disk) loses nothing: the
// batch (its records, the checkpoints' `open` records and the rollup increments taken with them) is kept as it
// was and written again, after a back-off, before anything newer; the records ended meanwhile wait on the
// queue (still bounded by queueMax: what falls off is counted, and its bytes stay in the rollups). Each batch
// carries an id the store writes with it in the same unit of work, so a write that landed but was seen
// failing (its answer lost past the command timeout) is skipped when written again: no byte billed twice. At
// close the store is tried again for up to closeRetryMs before what is left is logged, with its bytes.
// A unit holds at most batchSize records, batchSize checkpoints and 2 × batchSize rollup rows (an hour and a day
// row for batchSize users): the rest waits for the next unit of the same write. A failure that is not the
// store's (a RangeError or TypeError of our own code, a Redis script's runtime error, SQLite refusing the data:
// writing the same unit again fails the same way; a unit the store refuses before writing it, STORE_INVALID) is
// not retried as it was: the unit is split in two, each written at once, down to one record or row, which is then
// left out and logged with its bytes. The stores write a unit whole or not at all (SQLite's transaction; the Redis
// script checks everything before its first write), so no half adds what the failed unit had written.
import { randomBytes } from 'node:crypto';
import type { Logger } from '../telemetry/logger.ts';
import type { Metrics } from '../telemetry/metrics.ts';
import { periodStart, UsageFold } from '../store/connection-log-rollup.ts';
import { batchIds } from '../store/batch-marks.ts';
import { LiveList, type Listed } from './live-list.ts';
import { OpenByUser, UserListed } from './by-user.ts';
import { RefusalTally } from './refusals.ts';
import {
  isFailure,
  type ByteCounters,
  type Closer,
  type ConnectionContext,
  type ConnectionEnd,
  type ConnectionLogStore,
  type ConnectionRecord,
  type ConnectionRecorder,
  type LiveConnection,
  type RecordSink,
  type UsageRollup,
} from './types.ts';

export interface ConnectionLogOptions {
  /** Where records and rollups are kept; absent: no store sink (log.access.store false). */
  store?: ConnectionLogStore | undefined;
  /** Further sinks (the JSON-lines file). */
  sinks?: RecordSink[];
  /** false: records carry no target (log.access.targets). Default true. */
  targets?: boolean;
  /** false: records carry no client address (log.access.clients). Default true. */
  clients?: boolean;
  /** How often queued records are written. Default 1000 ms: a SIGKILL loses at most this batch. */
  flushIntervalMs?: number;
  /**
   * How often open connections' bytes so far go into the rollups and their `open` records into the store
   * (log.access.checkpointMs). Default 60000 ms: what a SIGKILL can lose of an open connection's bytes.
   */
  checkpointMs?: number;
  /** Records written per batch; a full batch is written without waiting for the timer. Default 500. */
  batchSize?: number;
  /**
   * A failed store write is tried again after firstMs, doubling up to maxMs (defaults 1000 and 15000 ms); at
   * close, for up to closeMs more (default 3000 ms) before what is left is logged as lost.
   */
  retry?: { firstMs?: number; maxMs?: number; closeMs?: number };
  /** How often open connections are checkpointed while a stop drains them. Default 1000 ms. */
  stopCheckpointMs?: number;
  /** Records waiting at most; beyond it the oldest are dropped. Default 50000. */
  queueMax?: number;
  /**
   * Refusals before authentication are counted per source and result, one record per window (refusals.ts):
   * the window (log.access.refusalWindowMs, default 60000 ms) and the sources counted per window at most.
   */
  refusals?: { windowMs?: number; maxSources?: number };
  /** Connection ids (tests inject a sequence). Default: a per-process random prefix and a counter. */
  ids?: () => string;
  now?: () => number;
  metrics?: Metrics;
  logger?: Logger;
}

/** Ids unique across restarts and daemons without a random draw per connection. */
export function connectionIds(): () => string {
  const prefix = randomBytes(6).toString('base64url');
  let n = 0;
  return () => `${prefix}${(++n).toString(36)}`;
}

const NO_BYTES: ByteCounters = { up: 0, down: 0 };
const HOUR_MS = 3_600_000;

/** A store write that failed: written again as it was (same id, same content) before anything newer. */
interface Unstored {
  id: string;
  /** The checkpoints' `open` records first, then the batch's. */
  records: ConnectionRecord[];
  /** How many of `records` are checkpoints (the rest are ended connections' records). */
  checkpoints: number;
  usage: UsageRollup[];
  attempts: number;
}

/** Bytes both ways and records: what a message about records not (yet) stored says. */
interface Tally {
  records: number;
  bytesUp: number;
  bytesDown: number;
}

class Context extends UserListed implements ConnectionContext, Listed<Context> {
  session: string | null = null;
  target: string | null = null;
  node: string | null = null;
  exit: string | null = null;
  bytes: ByteCounters | null = null;
  closer: Closer | null = null;
  retries = 0;
  hedges = 0;
  rule: string | null = null;
  /** DELETE /v1/connections/:id asked for the end: an `ok` record says `killed`. */
  killed = false;
  /** Bytes already added to the rollups by checkpoints. */
  savedUp = 0;
  savedDown = 0;
  /** Neighbours in the live list (live-list.ts). */
  prevLive: Context | null = null;
  nextLive: Context | null = null;
  private ended = false;

  constructor(
    readonly id: string,
    seq: number,
    byUser: OpenByUser,
    readonly listener: string,
    readonly startedAt: number,
    readonly client: string | null,
    private readonly log: ConnectionLog,
  ) {
    super(seq, byUser);
  }

  end(outcome: ConnectionEnd): void {
    if (this.ended) return;
    this.ended = true;
    this.leaveUserList();
    this.log.ended(this, outcome);
  }
}

export class ConnectionLog implements ConnectionRecorder {
  /** Open connections, oldest first (not a Map: live-list.ts says why). */
  private readonly live = new LiveList<Context>();
  /** The open connections of each user that has one (by-user.ts): one user's live list is its own connections' walk. */
  private readonly byUser = new OpenByUser();
  /** Connections opened so far (Context.seq). */
  private opened = 0;
  /** Ended connections' records not yet written to the store (the store's queue; empty without a store). */
  private queue: ConnectionRecord[] = [];
  /** Records not yet written to the sinks (the file); empty without sinks. */
  private sinkQueue: ConnectionRecord[] = [];
  /**
   * Store writes that failed, oldest first, written again before anything newer; empty while the store takes
   * writes. One unit normally; the halves of a unit split after a failure of its own (see the top) until written.
   */
  private unstored: Unstored[] = [];
  /** When (performance.now()) the failed write is due again, and the timer that brings it. */
  private retryAt = 0;
  private retryTimer: NodeJS.Timeout | undefined = undefined;
  private readonly retryFirstMs: number;
  private readonly retryMaxMs: number;
  private readonly closeRetryMs: number;
  /** The store writes' ids: this writer's name and an increasing number (src/store/batch-marks.ts). */
  private readonly batchIds = batchIds();
  /** Records the full queue dropped since the last flush said so. */
  private readonly dropped: Tally = { records: 0, bytesUp: 0, bytesDown: 0 };
  /** Checkpoints while a stop drains (stopping()). */
  private stopTimer: NodeJS.Timeout | undefined = undefined;
  private readonly store: ConnectionLogStore | undefined;
  private readonly sinks: RecordSink[];
  private readonly targets: boolean;
  private readonly clients: boolean;
  private readonly batchSize: number;
  private readonly queueMax: number;
  private readonly ids: () => string;
  private readonly now: () => number;
  /** Armed while records wait (the first queued arms it): an idle daemon has no flush timer. */
  private flushTimer: NodeJS.Timeout | undefined = undefined;
  private readonly flushMs: number;
  private readonly checkpointTimer: NodeJS.Timeout | undefined;
  /** The next hour boundary (epoch ms, the recorder's clock) at which open connections are checkpointed. */
  private nextHour = Infinity;
  private hourTimer: NodeJS.Timeout | undefined = undefined;
  /** Rollup increments not yet written (checkpoints' bytes, ended connections' remainders). */
  private readonly usage = new UsageFold();
  /** Open connections' checkpoint records not yet written, by id (the latest wins). */
  private snapshots = new Map<string, ConnectionRecord>();
  /** Set by stopping(): connections cut by the stop from this time on are recorded as `shutdown`. */
  private cutAt: number | undefined;
  private readonly refusals: RefusalTally | undefined;
  private writing: Promise<void> | null = null;
  private soon = false;
  private closed = false;

  constructor(private readonly options: ConnectionLogOptions = {}) {
    this.store = options.store;
    this.sinks = options.sinks ?? [];
    this.targets = options.targets ?? true;
    this.clients = options.clients ?? true;
    this.batchSize = Math.max(1, options.batchSize ?? 500);
    this.queueMax = Math.max(this.batchSize, options.queueMax ?? 50_000);
    this.ids = options.ids ?? connectionIds();
    this.now = options.now ?? Date.now;
    this.flushMs = options.flushIntervalMs ?? 1000;
    this.retryFirstMs = Math.max(1, options.retry?.firstMs ?? 1000);
    this.retryMaxMs = Math.max(this.retryFirstMs, options.retry?.maxMs ?? 15_000);
    this.closeRetryMs = Math.max(0, options.retry?.closeMs ?? 3000);
    if (this.recording) {
      this.refusals = new RefusalTally({
        emit: (record) => this.enqueue(this.redacted(record)),
        now: this.now,
        ...options.refusals,
      });
    }
    if (this.store) {
      this.checkpointTimer = setInterval(() => this.checkpoint(), Math.max(10, options.checkpointMs ?? 60_000));
      this.checkpointTimer.unref();
      this.nextHour = periodStart(this.now(), 'hour') + HOUR_MS;
      this.armHour();
    }
  }

  /** The timer for the next hour boundary, by the recorder's clock. */
  private armHour(): void {
    clearTimeout(this.hourTimer);
    this.hourTimer = setTimeout(onHourTimer, Math.max(1, Math.min(HOUR_MS, this.nextHour - this.now())), this);
    this.hourTimer.unref();
  }

  /** The hour timer fired: checkpoints when the boundary has come (a timer early by the clock's steps waits again). */
  hourDue(): void {
    this.hourTimer = undefined;
    if (this.closed) return;
    const now = this.now();
    if (now >= this.nextHour) this.pastHour(now);
    else this.armHour();
  }

  /**
   * The clock passed the hour boundary: open connections' bytes so far go into the hour (and day) that ended
   * (a checkpoint as of 1 ms before the boundary); the next boundary's timer is armed.
   */
  private pastHour(now: number): void {
    const at = this.nextHour - 1;
    this.nextHour = periodStart(now, 'hour') + HOUR_MS;
    this.checkpointAt(at, now);
    if (!this.closed) this.armHour();
  }

  /** Whether records are kept anywhere (else only the live list and the ids serve). */
  get recording(): boolean {
    return this.store !== undefined || this.sinks.length > 0;
  }

  open(listener: string, client?: string | null): ConnectionContext {
    const now = this.now();
    // Past an hour boundary whose timer is late: the open connections' bytes go into the hour that ended first.
    if (now >= this.nextHour) this.pastHour(now);
    const ctx = new Context(this.ids(), ++this.opened, this.byUser, listener, now, client ?? null, this);
    this.live.add(ctx);
    return ctx;
  }

  /** Users with an open connection (the per-user lists held). */
  get openUsers(): number {
    return this.byUser.size;
  }

  /** Context.end lands here. */
  ended(ctx: Context, outcome: ConnectionEnd): void {
    if (!this.recording || this.closed) {
      this.live.remove(ctx);
      return;
    }
    const now = this.now();
    // Past an hour boundary whose timer is late: this connection's bytes so far (it is still listed) and every
    // open one's go into the hour that ended, before its end puts the rest in the new one.
    if (now >= this.nextHour) this.pastHour(now);
    this.live.remove(ctx);
    if (this.refusals?.take(ctx, outcome)) return;
    const bytes = ctx.bytes ?? NO_BYTES;
    let result = outcome.result;
    let reason = outcome.result === 'ok' && ctx.killed ? 'killed' : (outcome.reason ?? null);
    if (this.cutAt !== undefined && now >= this.cutAt && isCut(outcome, ctx)) {
      result = 'shutdown';
      reason = 'open when the drain of the stop ended';
    }
    const record: ConnectionRecord = {
      id: ctx.id,
      user: ctx.user,
      session: ctx.session,
      listener: ctx.listener,
      node: ctx.node,
      bytesUp: outcome.up ?? bytes.up,
      bytesDown: outcome.down ?? bytes.down,
      startedAt: ctx.startedAt,
      durationMs: Math.max(0, now - ctx.startedAt),
      result,
      reason,
      retries: ctx.retries,
      hedges: ctx.hedges,
    };
    this.optional(record, ctx);
    if (ctx.rule !== null) record.rule = ctx.rule;
    if (this.store) {
      // Only connections that lived past a checkpoint have one (no hash of the id for every other record).
      if (this.snapshots.size > 0) this.snapshots.delete(ctx.id);
      // What the checkpoints have not yet counted, in the period the connection ended in.
      if (record.user !== null) {
        this.usage.add(record.user, now, record.bytesUp - ctx.savedUp, record.bytesDown - ctx.savedDown, 1, isFailure(result) ? 1 : 0);
      }
    }
    this.enqueue(record);
  }

  /**
   * A record onto the bounded queues (the oldest dropped when full: a failed write kept for its retry counts
   * towards the store's bound); a full batch is written soon.
   */
  enqueue(record: ConnectionRecord): void {
    if (this.closed) return;
    let full = false;
    if (this.store) {
      const held = this.unstored.length === 0 ? 0 : heldRecords(this.unstored);
      if (this.queue.length + held >= this.queueMax && this.queue.length > 0) this.drop(this.queue.shift()!);
      this.queue.push(record);
      // While a failed write waits for its retry, its timer writes the store: no batch is due before.
      full = this.queue.length >= this.batchSize && this.unstored.length === 0;
    }
    if (this.sinks.length > 0) {
      if (this.sinkQueue.length >= this.queueMax) this.drop(this.sinkQueue.shift()!);
      this.sinkQueue.push(record);
      full ||= this.sinkQueue.length >= this.batchSize;
    }
    // Written within flushMs of the first record queued (a checkpoint writes its own at once).
    if (this.flushTimer === undefined && this.recording) this.armFlush();
    if (full && !this.soon) {
      this.soon = true;
      setImmediate(() => {
        this.soon = false;
        void this.flushWhenDue();
      });
    }
  }

  /** A record the full queue lets go: counted, its bytes told by the next flush (they stay in the rollups). */
  private drop(record: ConnectionRecord): void {
    this.options.metrics?.connlogDropped.inc();
    this.dropped.records++;
    this.dropped.bytesUp += record.bytesUp;
    this.dropped.bytesDown += record.bytesDown;
  }

  private armFlush(): void {
    this.flushTimer = setTimeout(onFlushTimer, this.flushMs, this);
    this.flushTimer.unref();
  }

  /** The flush timer fired: records queued from now on arm the next one. */
  flushDue(): void {
    this.flushTimer = undefined;
    void this.flushWhenDue();
  }

  /**
   * Open connections' bytes since their last checkpoint into the rollups (at the current hour), and their
   * `open` records to the store; then a write. Runs every checkpointMs; cost: one pass over the live list.
   */
  checkpoint(): void {
    if (!this.store || this.closed) return;
    const now = this.now();
    if (now >= this.nextHour) this.pastHour(now);
    this.checkpointAt(now, now);
  }

  /** checkpoint() with the bytes counted at `at` (the rollups' period) and the records' duration to `now`. */
  private checkpointAt(at: number, now: number): void {
    if (!this.store || this.closed) return;
    let changed = false;
    for (const c of this.live) {
      const bytes = c.bytes;
      if (c.user === null || bytes === null) continue;
      const up = bytes.up - c.savedUp;
      const down = bytes.down - c.savedDown;
      if (up === 0 && down === 0) continue;
      this.usage.add(c.user, at, up, down, 0, 0);
      c.savedUp = bytes.up;
      c.savedDown = bytes.down;
      this.snapshots.set(c.id, this.openRecord(c, now));
      changed = true;
    }
    if (changed) void this.flushWhenDue();
  }

  private openRecord(c: Context, now: number): ConnectionRecord {
    const record: ConnectionRecord = {
      id: c.id,
      user: c.user,
      session: c.session,
      listener: c.listener,
      node: c.node,
      bytesUp: c.savedUp,
      bytesDown: c.savedDown,
      startedAt: c.startedAt,
      durationMs: Math.max(0, now - c.startedAt),
      result: 'open',
      reason: 'open at the last checkpoint',
      retries: c.retries,
      hedges: c.hedges,
    };
    this.optional(record, c);
    return record;
  }

  /** A counted refusals' record without what log.access.targets / clients leave out. */
  private redacted(record: ConnectionRecord): ConnectionRecord {
    if (!this.targets) delete record.target;
    if (!this.clients) delete record.client;
    return record;
  }

  /** The fields a record or live item carries only when known or not redacted (exit, target, client). */
  private optional(item: LiveConnection, c: Context): void {
    if (c.exit !== null) item.exit = c.exit;
    if (this.targets) item.target = c.target;
    if (this.clients) item.client = c.client;
  }

  /**
   * The daemon is stopping and gives open connections `drainMs` to finish: those its listeners cut after
   * that are recorded as `shutdown` (their bytes up to the cut), not as ended by the client or the relay.
   */
  stopping(drainMs: number): void {
    this.cutAt = this.now() + Math.max(0, drainMs);
    // Open connections checkpointed now and about every second until close(): a SIGKILL during the drain (a
    // grace shorter than drainMs) costs about a second of their bytes, settled `lost` by the next start.
    if (!this.store || this.closed || this.stopTimer !== undefined) return;
    this.checkpoint();
    this.stopTimer = setInterval(() => this.checkpoint(), Math.max(10, this.options.stopCheckpointMs ?? 1000));
    this.stopTimer.unref();
  }

  /**
   * Live connections with their bytes so far, oldest first; `user`: only that user's (its own list: the portal's
   * poll walks that customer's connections, not every open one), at most `max`.
   */
  active(user?: string, max = Infinity): LiveConnection[] {
    const now = this.now();
    const out: LiveConnection[] = [];
    if (user !== undefined) {
      for (let c = this.byUser.first(user); c !== null && out.length < max; c = c.nextOfUser) out.push(this.liveItem(c as Context, now));
      return out;
    }
    for (const c of this.live) {
      if (out.length >= max) break;
      out.push(this.liveItem(c, now));
    }
    return out;
  }

  private liveItem(c: Context, now: number): LiveConnection {
    const bytes = c.bytes ?? NO_BYTES;
    const item: LiveConnection = {
      id: c.id,
      user: c.user,
      session: c.session,
      listener: c.listener,
      node: c.node,
      bytesUp: bytes.up,
      bytesDown: bytes.down,
      startedAt: c.startedAt,
      durationMs: Math.max(0, now - c.startedAt),
    };
    this.optional(item, c);
    return item;
  }

  /** Ends one live connection now; false when no such connection is live (or it cannot be closed yet). */
  kill(id: string): boolean {
    const c = this.live.find((l) => l.id === id);
    if (!c?.closer) return false;
    c.killed = true;
    const closer = c.closer;
    if (typeof closer === 'function') closer();
    else if ('stop' in closer) closer.stop();
    else closer.destroy();
    return true;
  }

  /** Records waiting to be written (to the store, or without one to the sinks), a failed write's included. */
  get pending(): number {
    if (!this.store) return this.sinkQueue.length;
    return this.queue.length + heldRecords(this.unstored);
  }

  /**
   * Writes everything queued, a batch at a time; resolves when written (or failed and kept for a retry: a
   * failed write is tried again at once here). `refusals`: the refusals counted so far in the current window
   * are written first (their window ends now).
   */
  async flush(options?: { refusals?: boolean }): Promise<void> {
    if (options?.refusals) this.refusals?.flush();
    await this.write(true);
  }

  /** The timers' flush: a failed write waits for its back-off (its own timer brings it). */
  private flushWhenDue(): Promise<void> {
    return this.write(false);
  }

  private async write(retryNow: boolean): Promise<void> {
    while (this.writing) await this.writing;
    const run = this.writeAll(retryNow);
    this.writing = run;
    try {
      await run;
    } finally {
      this.writing = null;
    }
  }

  private async writeAll(retryNow: boolean): Promise<void> {
    if (this.dropped.records > 0) {
      this.options.logger?.error(
        { ...this.dropped },
        'connection records dropped: the queue was full (log.access.queueMax); their bytes are in the usage rollups all the same',
      );
      this.dropped.records = this.dropped.bytesUp = this.dropped.bytesDown = 0;
    }
    if (this.store) await this.writeStore(this.store, retryNow);
    while (this.sinkQueue.length > 0) {
      const batch = this.take(this.sinkQueue);
      this.sinkQueue = batch.rest;
      await this.writeSinks(batch.taken);
    }
  }

  /** Up to batchSize pending checkpoints, taken off the pending ones. */
  private takeSnapshots(): ConnectionRecord[] {
    if (this.snapshots.size <= this.batchSize) {
      const all = [...this.snapshots.values()];
      this.snapshots = new Map();
      return all;
    }
    const some: ConnectionRecord[] = [];
    for (const [id, record] of this.snapshots) {
      some.push(record);
      this.snapshots.delete(id);
      if (some.length === this.batchSize) break;
    }
    return some;
  }

  /** The first batchSize records of `queue`, and the rest. */
  private take(queue: ConnectionRecord[]): { taken: ConnectionRecord[]; rest: ConnectionRecord[] } {
    if (queue.length <= this.batchSize) return { taken: queue, rest: [] };
    return { taken: queue.slice(0, this.batchSize), rest: queue.slice(this.batchSize) };
  }

  /** The failed writes first (when due), then batches until the queue, the checkpoints and the rollups are written. */
  private async writeStore(store: ConnectionLogStore, retryNow: boolean): Promise<void> {
    while (this.unstored.length > 0) {
      if (!retryNow && performance.now() < this.retryAt) return;
      if (!(await this.attempt(store, this.unstored.shift()!))) return;
    }
    while (this.queue.length > 0 || this.snapshots.size > 0 || this.usage.size > 0) {
      const batch = this.take(this.queue);
      this.queue = batch.rest;
      // The checkpoints first: a batch's final record of the same connection then replaces its `open` one (a
      // connection that ends drops its pending checkpoint, so none is in a later unit than its end). At most
      // batchSize of them per unit: a stop checkpoints every open connection each second of its drain, and one
      // unit of 50,000 would be one long Redis script or SQLite transaction.
      const snapshots = this.takeSnapshots();
      const unit: Unstored = {
        id: this.batchIds(),
        records: snapshots.length > 0 ? [...snapshots, ...batch.taken] : batch.taken,
        checkpoints: snapshots.length,
        // An hour and a day row per user: as many users per unit as records.
        usage: this.usage.take(2 * this.batchSize),
        attempts: 0,
      };
      if (!(await this.attempt(store, unit))) return;
      // The halves of a unit split after a failure of its own, before anything newer.
      while (this.unstored.length > 0) if (!(await this.attempt(store, this.unstored.shift()!))) return;
    }
  }

  /**
   * One write of `unit` to the store (not in `unstored`); false when it failed as a store does (an outage): then
   * it is kept first in `unstored`, due again after a back-off. A failure of its own (see the top) puts its two
   * halves there instead, due at once, or leaves a unit of one record or row out (logged): true.
   */
  private async attempt(store: ConnectionLogStore, unit: Unstored): Promise<boolean> {
    const metrics = this.options.metrics;
    const logger = this.options.logger;
    unit.attempts++;
    try {
      const refused = await store.append(unit.records, unit.usage, unit.id);
      clearTimeout(this.retryTimer);
      this.retryTimer = undefined;
      metrics?.connlogWritten.inc({ sink: 'store' }, unit.records.length - unit.checkpoints - refused);
      if (refused > 0) {
        metrics?.connlogDropped.inc(refused);
        logger?.error({ records: refused }, 'connection records refused by the store (a required field without a value)');
      }
      if (unit.attempts > 1) logger?.info({ ...tallyOf(unit), attempts: unit.attempts }, 'connection records stored after a retry');
      return true;
    } catch (err) {
      if (notTransient(err)) return this.split(unit, err);
      // The data path never waits for the store: the batch waits here instead, as it was (same id).
      this.unstored.unshift(unit);
      const backoff = Math.min(this.retryMaxMs, this.retryFirstMs * 2 ** Math.min(20, unit.attempts - 1));
      this.retryAt = performance.now() + backoff;
      if (!this.closed) {
        clearTimeout(this.retryTimer);
        this.retryTimer = setTimeout(onRetryTimer, backoff, this);
        this.retryTimer.unref();
      }
      logger?.error(
        { err, ...tallyOf(unit), attempts: unit.attempts, retryInMs: backoff },
        'connection records could not be stored; kept and written again later',
      );
      return false;
    }
  }

  /**
   * A unit the store failed for a reason of its own: its halves (new ids: nothing of the unit was written — SQLite
   * rolled it back, a RangeError, TypeError or STORE_INVALID comes before anything is sent, and the Redis script
   * checks all it can fail on before its first write) go first in `unstored`, due at once; a unit of one record
   * or row is left out, logged with its bytes. True: go on.
   */
  private split(unit: Unstored, err: unknown): boolean {
    const logger = this.options.logger;
    const size = unit.records.length + unit.usage.length;
    if (size <= 1) {
      const lost = tallyOf(unit);
      this.options.metrics?.connlogDropped.inc(lost.records);
      logger?.error(
        { err, ...lost, checkpoints: unit.checkpoints, rollups: unit.usage },
        'a connection record or usage row the store failed to take for a reason of its own (not an outage): left out of the log and the bill',
      );
      return true;
    }
    // Checkpoints stay before the records they precede; both halves hold something.
    const r = Math.ceil(unit.records.length / 2);
    const u = Math.floor(unit.usage.length / 2);
    const first: Unstored = {
      id: this.batchIds(),
      records: unit.records.slice(0, r),
      checkpoints: Math.min(unit.checkpoints, r),
      usage: unit.usage.slice(0, u),
      attempts: 0,
    };
    const second: Unstored = {
      id: this.batchIds(),
      records: unit.records.slice(r),
      checkpoints: Math.max(0, unit.checkpoints - r),
      usage: unit.usage.slice(u),
      attempts: 0,
    };
    // The store takes a writer's batches in the order of their numbers (batch-marks.ts): the units waiting behind
    // (halves of an earlier split; none was tried yet, only the first unit ever is) get numbers after the halves'.
    for (const later of this.unstored) later.id = this.batchIds();
    this.unstored.unshift(first, second);
    logger?.error(
      { err, records: unit.records.length, rollups: unit.usage.length },
      'connection records could not be stored for a reason of their own (not an outage); written again in two halves',
    );
    return true;
  }

  /** The retry timer fired: the back-off is over (a timer may fire a fraction of a millisecond before retryAt). */
  retryDue(): void {
    this.retryTimer = undefined;
    void this.write(true);
  }

  private async writeSinks(batch: ConnectionRecord[]): Promise<void> {
    for (const sink of this.sinks) {
      try {
        await sink.write(batch);
        this.options.metrics?.connlogWritten.inc({ sink: 'file' }, batch.length);
      } catch (err) {
        this.options.logger?.error({ err, records: batch.length }, 'connection records could not be written to the file');
      }
    }
  }

  /**
   * Last flush (after the listeners closed, so every connection has its record; one still live here, whose
   * listener never ended it, is recorded as `shutdown` with its bytes so far), then the sinks. A store that
   * fails is tried again for up to closeRetryMs; what it never took is logged with its bytes.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    clearTimeout(this.flushTimer);
    this.flushTimer = undefined;
    if (this.checkpointTimer) clearInterval(this.checkpointTimer);
    clearTimeout(this.hourTimer);
    clearInterval(this.stopTimer);
    this.cutAt ??= this.now();
    for (const c of [...this.live]) c.end({ result: 'ok', reason: 'stopped' });
    this.refusals?.close();
    await this.flush();
    const deadline = performance.now() + this.closeRetryMs;
    for (let wait = 100; this.unstored.length > 0 && performance.now() < deadline; wait *= 2) {
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, Math.min(wait, deadline - performance.now()))));
      await this.flush();
    }
    this.closed = true;
    clearTimeout(this.flushTimer);
    this.flushTimer = undefined;
    clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    clearTimeout(this.hourTimer);
    if (this.unstored.length > 0) this.reportLost(this.unstored);
    for (const sink of this.sinks) await sink.close().catch(() => undefined);
  }

  /**
   * What the store never took at close, said once, with the bytes per user (the hour rollups' increments, so
   * that an operator can apply them by hand): the failed write and everything queued behind it.
   */
  private reportLost(unstored: readonly Unstored[]): void {
    const lost: Tally = { records: this.queue.length, bytesUp: 0, bytesDown: 0 };
    let checkpoints = this.snapshots.size;
    const usage: UsageRollup[] = [];
    for (const unit of unstored) {
      const t = tallyOf(unit);
      lost.records += t.records;
      lost.bytesUp += t.bytesUp;
      lost.bytesDown += t.bytesDown;
      checkpoints += unit.checkpoints;
      usage.push(...unit.usage);
    }
    const byUser = new Map<string, { bytesUp: number; bytesDown: number }>();
    let bytesUp = 0;
    let bytesDown = 0;
    for (const u of [usage, this.usage.take()].flat()) {
      if (u.granularity !== 'hour') continue;
      const row = byUser.get(u.user) ?? { bytesUp: 0, bytesDown: 0 };
      row.bytesUp += u.bytesUp;
      row.bytesDown += u.bytesDown;
      byUser.set(u.user, row);
      bytesUp += u.bytesUp;
      bytesDown += u.bytesDown;
    }
    this.options.metrics?.connlogDropped.inc(lost.records);
    this.options.logger?.error(
      {
        records: lost.records,
        checkpoints,
        rollups: { bytesUp, bytesDown },
        users: Object.fromEntries([...byUser].slice(0, MAX_USERS_REPORTED)),
        usersLeftOut: Math.max(0, byUser.size - MAX_USERS_REPORTED),
      },
      'connection records and usage the store did not take before the stop: lost from the bill (the bytes per user are these)',
    );
  }
}

/** Users named in the log line of what a stop could not store (the totals count them all). */
const MAX_USERS_REPORTED = 1000;

/** The ended connections' records held by failed writes. */
function heldRecords(units: readonly Unstored[]): number {
  let n = 0;
  for (const u of units) n += u.records.length - u.checkpoints;
  return n;
}

/**
 * A store failure that writing the same unit again repeats (not an outage: Redis gone, a timeout, a full disk):
 * an error of our own code (a RangeError — a stack overflow — TypeError, ReferenceError or SyntaxError), a Redis
 * script's runtime error (a reply `ERR ... user_script ...`; OOM, READONLY, LOADING and the like are the server's
 * state and do pass), or SQLite refusing the data itself (a constraint, a value too big or of the wrong type).
 * Looked for in the error and its causes (the store wraps what it caught).
 */
export function notTransient(err: unknown): boolean {
  let e: unknown = err;
  for (let depth = 0; e instanceof Error && depth < 5; depth++, e = e.cause) {
    if (e instanceof RangeError || e instanceof TypeError || e instanceof ReferenceError || e instanceof SyntaxError) return true;
    if (/^ERR\b.*user_script/s.test(e.message)) return true;
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && /^SQLITE_(CONSTRAINT|TOOBIG|MISMATCH|RANGE)/.test(code)) return true;
    // The store refused the unit's data before writing anything (a row that is not whole numbers).
    if (code === 'STORE_INVALID') return true;
  }
  return false;
}

/** The ended connections' records of a store write and their bytes. */
function tallyOf(unit: Unstored): Tally {
  const t: Tally = { records: 0, bytesUp: 0, bytesDown: 0 };
  for (let i = unit.checkpoints; i < unit.records.length; i++) {
    const r = unit.records[i]!;
    t.records++;
    t.bytesUp += r.bytesUp;
    t.bytesDown += r.bytesDown;
  }
  return t;
}

function onHourTimer(log: ConnectionLog): void {
  log.hourDue();
}

function onRetryTimer(log: ConnectionLog): void {
  log.retryDue();
}

/** How a connection the stop cut ends: its relay stopped, or a forwarded exchange dropped mid-answer. */
function isCut(outcome: ConnectionEnd, ctx: Context): boolean {
  if (outcome.result === 'ok') return outcome.reason === 'stopped' && !ctx.killed;
  return outcome.result === 'client_abort' && ctx.bytes !== null;
}

function onFlushTimer(log: ConnectionLog): void {
  log.flushDue();
}

let unrecorded: ConnectionLog | undefined;

/** For listeners built without a connection log (unit tests, tools): ids and a live list, no records. */
export function unrecordedConnections(): ConnectionLog {
  unrecorded ??= new ConnectionLog();
  return unrecorded;
}
