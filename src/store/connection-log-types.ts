// The connection log's records and the store side that keeps them (src/store/sqlite-connection-log.ts,
// redis-connection-log.ts): what a record holds, the queries, the usage rollups, the bounds held at every
// moment, and the seam ConnectionLogStore that the recorder and the admin reads use (src/connlog). Defined
// here, below the connection log, because the store's drivers implement it; src/connlog/types.ts re-exports it.

/**
 * How a connection ended, as the record says. The first six are rotor_proxy_connections_total's `result`
 * values; `client_abort` is a client that left while its upstream was being dialed (not counted there);
 * `shutdown` is a connection still open when the daemon's drain ended (its bytes up to the cut); `open` is a
 * connection still running at its last checkpoint (log.access.checkpointMs): its record is replaced when it
 * ends, so an `open` record that stays is one whose daemon died without a stop (SIGKILL, power loss); the
 * next start makes it `lost` (its bytes those of its last checkpoint).
 */
export type RecordResult =
  'ok' | 'auth_failed' | 'limited' | 'not_allowed' | 'upstream_error' | 'bad_request' | 'client_abort' | 'shutdown' | 'open' | 'lost';

export const RECORD_RESULTS: readonly RecordResult[] = [
  'ok',
  'auth_failed',
  'limited',
  'not_allowed',
  'upstream_error',
  'bad_request',
  'client_abort',
  'shutdown',
  'open',
  'lost',
];

/** The reason of a record settled `lost` (ConnectionLogStore.settleOpen). */
export const LOST_REASON = 'open when its daemon ended without a stop; bytes as of its last checkpoint';

/** Results that are no failure in the rollups' `failures`: a connection that relayed and was cut or is running. */
export function isFailure(result: RecordResult): boolean {
  return result !== 'ok' && result !== 'shutdown' && result !== 'open' && result !== 'lost';
}

/** One accepted connection (docs/reference.md "Connection log and usage"), plus retries and hedges. */
export interface ConnectionRecord {
  id: string;
  /** The authenticated local user; null when authentication failed (a client's guess is not a user). */
  user: string | null;
  /** Sticky session id from the user name; null = rotating. */
  session: string | null;
  /**
   * Where the client came in: 'http', 'https', 'socks5' (the shared listeners), or 'user-port-http',
   * 'user-port-https', 'user-port-socks5' (a user's own port, by the protocol its client spoke).
   */
  listener: string;
  /** The client's source address; absent when `log.access.clients` is false (null if the socket had none). */
  client?: string | null;
  /** `host:port`; absent when `log.access.targets` is false; null when the client never named one. */
  target?: string | null;
  /** The upstream node's id (protocol://user@host:port, never its password); null when none was dialed. */
  node: string | null;
  /**
   * The address the connection left the upstream from, when the upstream named it (a SOCKS5 reply's bound
   * address); absent otherwise: the host Rotor dials is an entry gateway, not an exit.
   */
  exit?: string;
  /** client → upstream, exactly what was counted into the user's meter */
  bytesUp: number;
  /** upstream → client */
  bytesDown: number;
  /** epoch ms at accept */
  startedAt: number;
  durationMs: number;
  result: RecordResult;
  /** One line: the refusal or failure, or for `ok` how the relay ended (closed, idle, limit, error, stopped, killed). */
  reason: string | null;
  /** Upstream attempts after the first. */
  retries: number;
  /** Hedged (parallel) dials started (issue 19's hedging fills it). */
  hedges: number;
  /** The request rule that fired (its name), when one did; `retries` counts the rule's retries too. */
  rule?: string | null; /**
   * Connections this record stands for, when more than one: refusals before authentication are counted per
   * source address and result and written as one record per window (src/connlog/refusals.ts). Absent: 1.
   */
  count?: number;
}

export interface ConnectionQuery {
  user?: string;
  result?: RecordResult;
  /** startedAt >= since (epoch ms) */
  since?: number;
  /** startedAt < until (epoch ms) */
  until?: number;
  limit: number;
  /** Position after which to continue (newest first): the last item's startedAt and id. */
  after?: { startedAt: number; id: string };
}

export type Granularity = 'hour' | 'day';

/** One user's traffic in one period, as the rollups keep it. */
export interface UsageRollup {
  user: string;
  granularity: Granularity;
  /** epoch ms of the period's start (UTC) */
  period: number;
  bytesUp: number;
  bytesDown: number;
  connections: number;
  failures: number;
}

export interface UsageQuery {
  granularity: Granularity;
  /** period >= from (epoch ms) */
  from: number;
  /** period < to (epoch ms) */
  to: number;
  user?: string;
}

export interface RetentionLimits {
  /** Records that started before this (epoch ms) go. */
  recordsBefore: number;
  /** At most this many records are kept (the newest). */
  maxRecords: number;
  /** Rollup periods that start before this (epoch ms) go. */
  usageBefore: number;
}

/**
 * What the store holds at most at any moment (log.access.maxRecords, log.access.maxSize): every append that
 * would pass either removes the oldest records in the same unit of work, so no reader ever sees more.
 */
export interface RecordBounds {
  maxRecords: number;
  /** Bytes of records as recordSize() counts them. */
  maxBytes: number;
}

/** What the store holds now. */
export interface RecordFootprint {
  records: number;
  /** recordSize() summed over the records held. */
  bytes: number;
}

/** Record fields held as text: their bytes are what recordSize() counts. */
export const RECORD_TEXT_FIELDS = [
  'id',
  'user',
  'session',
  'listener',
  'client',
  'target',
  'node',
  'exit',
  'result',
  'reason',
  'rule',
] as const;

/** Bytes a record counts towards log.access.maxSize: its text fields' UTF-8 bytes and a fixed 64 for the rest. */
export const RECORD_FIXED_BYTES = 64;

export function recordSize(r: ConnectionRecord): number {
  // Field by field, not a loop over RECORD_TEXT_FIELDS: a keyed load by a varying name is megamorphic (about 0.3 µs
  // per record in a profile of the store's append); a named load is not. Same fields as RECORD_TEXT_FIELDS.
  return (
    RECORD_FIXED_BYTES +
    textBytes(r.id) +
    textBytes(r.user) +
    textBytes(r.session) +
    textBytes(r.listener) +
    textBytes(r.client) +
    textBytes(r.target) +
    textBytes(r.node) +
    textBytes(r.exit) +
    textBytes(r.result) +
    textBytes(r.reason) +
    textBytes(r.rule)
  );
}

function textBytes(v: string | null | undefined): number {
  return typeof v === 'string' ? Buffer.byteLength(v) : 0;
}

/** Where records and rollups are kept (SQLite or Redis, beside the daemon's Store). */
export interface ConnectionLogStore {
  /**
   * Writes the records and the usage increments as one unit. A record replaces a stored one of the same id
   * only when that one is `open` (a checkpoint); any other stored record stays (a batch written twice after
   * a failure is not counted twice). `usage` absent: the records are folded into the rollups by their end
   * (foldRollups); present: exactly these increments are added (the recorder's, which count an open
   * connection's bytes in the hour they were relayed). Resolves with the records the store refused (a required
   * field without a value): left out, the rest stored; 0 normally.
   *
   * `batchId`: the writer's id of this batch, `<writer><seq>` (src/store/batch-marks.ts: the writer's name, unique
   * across daemons and restarts, and a sequence number it writes in increasing order). An append at or below the
   * writer's mark (the highest it took) changes nothing and resolves 0: a write that landed but was seen failing
   * (its answer lost past a command timeout) and is written again, after an outage of any length within
   * BATCH_WRITER_TTL_MS of the writer's last write, adds its rollup increments once. The mark is written in the same
   * unit of work as the records and the increments.
   */
  append(records: readonly ConnectionRecord[], usage?: readonly UsageRollup[], batchId?: string): Promise<number>;
  /** Newest first, at most `limit`. */
  query(q: ConnectionQuery): Promise<ConnectionRecord[]>;
  usage(q: UsageQuery): Promise<UsageRollup[]>;
  /** Applies retention; resolves with the records removed. */
  prune(limits: RetentionLimits): Promise<number>;
  count(): Promise<number>;
  /**
   * Called at start, before this daemon's first connection: `open` records left by a daemon that died without
   * a stop (SIGKILL, power loss) become `lost`, their bytes (the last checkpoint's) kept, reason LOST_REASON;
   * resolves with how many. A running daemon's `open` records are left alone: on a store a fleet shares, each
   * daemon's open records are its own while its lease lives (renewed every third of fleet.aliveTtlMs), and
   * the store goes on settling those of daemons whose lease lapsed for as long as it is open. A record settled
   * `lost` is still replaced by its connection's next one (a daemon that was only stalled past its lease).
   */
  settleOpen(): Promise<number>;
  /** Records held and their bytes (recordSize). */
  footprint(): Promise<RecordFootprint>;
}
