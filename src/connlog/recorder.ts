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
// it). A connection still open when the drain of a stop ends is recorded as `shutdown`, with its bytes up to
// the cut. A SIGKILL therefore loses at most one checkpoint interval of an open connection's bytes, and one
// flush interval of ended connections' records.
import { randomBytes } from 'node:crypto';
import type { Logger } from '../telemetry/logger.ts';
import type { Metrics } from '../telemetry/metrics.ts';
import { UsageFold } from '../store/connection-log-rollup.ts';
import { LiveList, type Listed } from './live-list.ts';
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

class Context implements ConnectionContext, Listed<Context> {
  user: string | null = null;
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
    readonly listener: string,
    readonly startedAt: number,
    readonly client: string | null,
    private readonly log: ConnectionLog,
  ) {}

  end(outcome: ConnectionEnd): void {
    if (this.ended) return;
    this.ended = true;
    this.log.ended(this, outcome);
  }
}

export class ConnectionLog implements ConnectionRecorder {
  /** Open connections, oldest first (not a Map: live-list.ts says why). */
  private readonly live = new LiveList<Context>();
  private queue: ConnectionRecord[] = [];
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
    }
  }

  /** Whether records are kept anywhere (else only the live list and the ids serve). */
  get recording(): boolean {
    return this.store !== undefined || this.sinks.length > 0;
  }

  open(listener: string, client?: string | null): ConnectionContext {
    const ctx = new Context(this.ids(), listener, this.now(), client ?? null, this);
    this.live.add(ctx);
    return ctx;
  }

  /** Context.end lands here. */
  ended(ctx: Context, outcome: ConnectionEnd): void {
    this.live.remove(ctx);
    if (!this.recording || this.closed) return;
    if (this.refusals?.take(ctx, outcome)) return;
    const bytes = ctx.bytes ?? NO_BYTES;
    const now = this.now();
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

  /** A record onto the bounded queue (the oldest dropped when full); a full batch is written soon. */
  enqueue(record: ConnectionRecord): void {
    if (this.closed) return;
    if (this.queue.length >= this.queueMax) {
      this.queue.shift();
      this.options.metrics?.connlogDropped.inc();
    }
    this.queue.push(record);
    // Written within flushMs of the first record queued (a checkpoint writes its own at once).
    if (this.flushTimer === undefined && this.recording) this.armFlush();
    if (this.queue.length >= this.batchSize && !this.soon) {
      this.soon = true;
      setImmediate(() => {
        this.soon = false;
        void this.flush();
      });
    }
  }

  private armFlush(): void {
    this.flushTimer = setTimeout(onFlushTimer, this.flushMs, this);
    this.flushTimer.unref();
  }

  /** The flush timer fired: records queued from now on arm the next one. */
  flushDue(): void {
    this.flushTimer = undefined;
    void this.flush();
  }

  /**
   * Open connections' bytes since their last checkpoint into the rollups (at the current hour), and their
   * `open` records to the store; then a write. Runs every checkpointMs; cost: one pass over the live list.
   */
  checkpoint(): void {
    if (!this.store || this.closed) return;
    const now = this.now();
    let changed = false;
    for (const c of this.live) {
      const bytes = c.bytes;
      if (c.user === null || bytes === null) continue;
      const up = bytes.up - c.savedUp;
      const down = bytes.down - c.savedDown;
      if (up === 0 && down === 0) continue;
      this.usage.add(c.user, now, up, down, 0, 0);
      c.savedUp = bytes.up;
      c.savedDown = bytes.down;
      this.snapshots.set(c.id, this.openRecord(c, now));
      changed = true;
    }
    if (changed) void this.flush();
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
  }

  /** Live connections with their bytes so far, oldest first. */
  active(): LiveConnection[] {
    const now = this.now();
    const out: LiveConnection[] = [];
    for (const c of this.live) {
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
      out.push(item);
    }
    return out;
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

  /** Records waiting to be written. */
  get pending(): number {
    return this.queue.length;
  }

  /**
   * Writes everything queued, a batch at a time; resolves when written (or failed and logged). `refusals`:
   * the refusals counted so far in the current window are written first (their window ends now).
   */
  async flush(options?: { refusals?: boolean }): Promise<void> {
    if (options?.refusals) this.refusals?.flush();
    while (this.writing) await this.writing;
    while (this.queue.length > 0 || this.snapshots.size > 0 || this.usage.size > 0) {
      const batch = this.queue.length <= this.batchSize ? this.queue : this.queue.slice(0, this.batchSize);
      this.queue = this.queue.length <= this.batchSize ? [] : this.queue.slice(this.batchSize);
      // The checkpoints first: a batch's final record of the same connection then replaces its `open` one.
      const snapshots = [...this.snapshots.values()];
      this.snapshots = new Map();
      this.writing = this.write(batch, snapshots, this.usage.take());
      await this.writing;
      this.writing = null;
    }
  }

  private async write(batch: ConnectionRecord[], snapshots: ConnectionRecord[], usage: UsageRollup[]): Promise<void> {
    const metrics = this.options.metrics;
    if (this.store) {
      try {
        const refused = await this.store.append(snapshots.length > 0 ? [...snapshots, ...batch] : batch, usage);
        metrics?.connlogWritten.inc({ sink: 'store' }, batch.length - refused);
        if (refused > 0) {
          metrics?.connlogDropped.inc(refused);
          this.options.logger?.error({ records: refused }, 'connection records refused by the store (a required field without a value)');
        }
      } catch (err) {
        // The data path never waits for the store, so a failing store costs records, not connections.
        metrics?.connlogDropped.inc(batch.length);
        this.options.logger?.error({ err, records: batch.length }, 'connection records could not be stored');
      }
    }
    if (batch.length === 0) return;
    for (const sink of this.sinks) {
      try {
        await sink.write(batch);
        metrics?.connlogWritten.inc({ sink: 'file' }, batch.length);
      } catch (err) {
        this.options.logger?.error({ err, records: batch.length }, 'connection records could not be written to the file');
      }
    }
  }

  /**
   * Last flush (after the listeners closed, so every connection has its record; one still live here, whose
   * listener never ended it, is recorded as `shutdown` with its bytes so far), then the sinks.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    clearTimeout(this.flushTimer);
    this.flushTimer = undefined;
    if (this.checkpointTimer) clearInterval(this.checkpointTimer);
    this.cutAt ??= this.now();
    for (const c of [...this.live]) c.end({ result: 'ok', reason: 'stopped' });
    this.refusals?.close();
    await this.flush();
    this.closed = true;
    clearTimeout(this.flushTimer);
    this.flushTimer = undefined;
    for (const sink of this.sinks) await sink.close().catch(() => undefined);
  }
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
