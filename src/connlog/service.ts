// The connection log as the admin API and the composition root see it: the recorder (live list, batches),
// the store it writes to, retention on a timer, and the reads behind GET /v1/connections and GET /v1/usage.
import { RotorError } from '../errors/rotor-error.ts';
import type { Logger } from '../telemetry/logger.ts';
import { decodeCursor, encodeCursor } from './cursor.ts';
import type { ConnectionLog } from './recorder.ts';
import { periodStart } from '../store/connection-log-rollup.ts';
import type {
  ConnectionLogStore,
  ConnectionRecord,
  Granularity,
  LiveConnection,
  RecordResult,
  RetentionLimits,
  UsageRollup,
} from './types.ts';
import {
  comparePlatform,
  usageRows,
  type PlatformCompareRow,
  type PlatformFlow,
  type PriceOf,
  type UsageRow,
  type UserAccount,
} from './usage.ts';

const DAY_MS = 86_400_000;

/** Asked for records or usage while log.access.store is false. */
export class ConnectionLogOffError extends RotorError {
  constructor() {
    super('CONNECTION_LOG_OFF', 'connection records are not stored (log.access.store is false)', { httpStatus: 409 });
  }
}

/** A cursor this daemon did not write. */
export class BadCursorError extends RotorError {
  constructor() {
    super('INVALID_INPUT', 'cursor: not a cursor from a previous answer', { httpStatus: 400 });
  }
}

export interface ConnectionListQuery {
  user?: string;
  result?: RecordResult;
  since?: number;
  until?: number;
  limit: number;
  cursor?: string;
}

export interface UsageListQuery {
  from: number;
  to: number;
  user?: string;
  granularity: Granularity;
}

export interface RetentionSettings {
  retentionDays: number;
  maxRecords: number;
  usageRetentionDays: number;
  /** How often retention runs. Default one hour. */
  intervalMs?: number;
}

export interface ConnectionLogServiceOptions {
  recorder: ConnectionLog;
  store?: ConnectionLogStore | undefined;
  /** false: records are answered without `target` even when stored with one (log.access.targets). */
  targets: boolean;
  /** false: records are answered without `client` even when stored with one (log.access.clients). Default true. */
  clients?: boolean;
  retention: RetentionSettings;
  /** Current users' price per GB (user's own, else billing.defaultPricePerGb). */
  priceOf: PriceOf;
  /** Current users' main account and product, for ?compare=platform. */
  accountOf: (user: string) => UserAccount | undefined;
  /** The platform's flow-use log; absent: compare answers platformBytes null. */
  platformFlow?: PlatformFlow;
  now?: () => number;
  logger?: Logger;
}

export class ConnectionLogService {
  private readonly timer: NodeJS.Timeout | undefined;
  private readonly firstPrune: NodeJS.Timeout | undefined;
  private readonly now: () => number;
  private pruning: Promise<unknown> | null = null;

  constructor(private readonly options: ConnectionLogServiceOptions) {
    this.now = options.now ?? Date.now;
    if (options.store) {
      this.timer = setInterval(() => void this.prune(), options.retention.intervalMs ?? 3_600_000);
      this.timer.unref();
      // Once soon after start too: a daemon restarted more often than hourly must still trim.
      this.firstPrune = setTimeout(() => void this.prune(), 10_000);
      this.firstPrune.unref();
    }
  }

  get recorder(): ConnectionLog {
    return this.options.recorder;
  }

  private store(): ConnectionLogStore {
    if (!this.options.store) throw new ConnectionLogOffError();
    return this.options.store;
  }

  private shown<T extends { target?: string | null; client?: string | null }>(item: T): T {
    const clients = this.options.clients ?? true;
    if (this.options.targets && clients) return item;
    const rest = { ...item };
    if (!this.options.targets) delete rest.target;
    if (!clients) delete rest.client;
    return rest;
  }

  /** Newest first; `next` continues after the last item, null at the end. */
  async list(q: ConnectionListQuery): Promise<{ items: ConnectionRecord[]; next: string | null }> {
    const store = this.store();
    let after;
    if (q.cursor !== undefined) {
      after = decodeCursor(q.cursor);
      if (!after) throw new BadCursorError();
    }
    // One more than asked tells whether there is a next page without a second query.
    const rows = await store.query({
      ...(q.user !== undefined ? { user: q.user } : {}),
      ...(q.result !== undefined ? { result: q.result } : {}),
      ...(q.since !== undefined ? { since: q.since } : {}),
      ...(q.until !== undefined ? { until: q.until } : {}),
      ...(after ? { after } : {}),
      limit: q.limit + 1,
    });
    const items = rows.slice(0, q.limit).map((r) => this.shown(r));
    const last = items[items.length - 1];
    return { items, next: rows.length > q.limit && last ? encodeCursor({ startedAt: last.startedAt, id: last.id }) : null };
  }

  /** The open connections, oldest first; `user`: only that user's, at most `max` of them (the portal's list). */
  active(user?: string, max?: number): LiveConnection[] {
    return this.options.recorder.active(user, max).map((c) => this.shown(c));
  }

  /** DELETE /v1/connections/:id: false when no such connection is live. */
  closeConnection(id: string): boolean {
    return this.options.recorder.kill(id);
  }

  /** Every period that overlaps [from, to): a `from` inside an hour or day includes that period. */
  private rollups(q: UsageListQuery): Promise<UsageRollup[]> {
    return this.store().usage({ ...q, from: periodStart(q.from, q.granularity) });
  }

  async usage(q: UsageListQuery): Promise<UsageRow[]> {
    return usageRows(await this.rollups(q), this.options.priceOf);
  }

  async comparePlatform(q: UsageListQuery): Promise<PlatformCompareRow[]> {
    const rollups = await this.rollups(q);
    const flow: PlatformFlow = this.options.platformFlow ?? (async () => null);
    return comparePlatform(rollups, this.options.accountOf, flow, q);
  }

  /** Applies retention now (also run every intervalMs). Resolves with the records removed. */
  async prune(): Promise<number> {
    const store = this.options.store;
    if (!store) return 0;
    if (this.pruning) await this.pruning.catch(() => undefined);
    const { retentionDays, maxRecords, usageRetentionDays } = this.options.retention;
    const now = this.now();
    const limits: RetentionLimits = {
      recordsBefore: now - retentionDays * DAY_MS,
      maxRecords,
      usageBefore: now - usageRetentionDays * DAY_MS,
    };
    const run = store.prune(limits);
    this.pruning = run;
    try {
      const removed = await run;
      if (removed > 0) this.options.logger?.debug({ removed }, 'connection records past retention removed');
      return removed;
    } catch (err) {
      this.options.logger?.warn({ err }, 'connection log retention failed; it runs again later');
      return 0;
    } finally {
      this.pruning = null;
    }
  }

  /** Stops retention, then the recorder's last flush. */
  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    if (this.firstPrune) clearTimeout(this.firstPrune);
    if (this.pruning) await this.pruning.catch(() => undefined);
    await this.options.recorder.close();
  }
}
