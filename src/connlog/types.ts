// The connection log's seams: what a listener holds for one client connection (ConnectionContext), how it
// gets one (ConnectionRecorder.open, once at accept) and hands it back (ConnectionContext.end, once at
// close), the record that results, and the store side that keeps records and usage rollups.
//
// The listeners only fill fields of the context as the connection goes (user, target, node) and call end()
// once; everything else (the live list, batching, sinks, rollups) happens in src/connlog off the data path.
// The records and the store seam live with the store's drivers (src/store/connection-log-types.ts).
export {
  RECORD_RESULTS,
  RECORD_TEXT_FIELDS,
  RECORD_FIXED_BYTES,
  isFailure,
  recordSize,
  type RecordResult,
  type ConnectionRecord,
  type ConnectionQuery,
  type Granularity,
  type UsageRollup,
  type UsageQuery,
  type RetentionLimits,
  type RecordBounds,
  type RecordFootprint,
  type ConnectionLogStore,
} from '../store/connection-log-types.ts';
import type { ConnectionRecord, RecordResult } from '../store/connection-log-types.ts';

/** What Router.dial may fill in while it dials for a connection (its id is for its log lines). */
export interface DialTrace {
  readonly id: string;
  retries: number;
  hedges: number;
  /** The request rule that fired on this connection (src/proxy/request-rules.ts), if one did. */
  rule?: string | null;
}

/** Bytes so far of a live connection: the relay's own counters object, read (never copied) when listed. */
export interface ByteCounters {
  readonly up: number;
  readonly down: number;
}

export interface ConnectionEnd {
  result: RecordResult;
  reason?: string | null;
  /** Final byte counts; default: the live counters' values. */
  up?: number;
  down?: number;
}

/** One client connection from accept to close, as a listener holds it. */
export interface ConnectionContext extends DialTrace {
  readonly listener: string;
  readonly startedAt: number;
  user: string | null;
  session: string | null;
  target: string | null;
  node: string | null;
  /** The exit the upstream named (Tunnel.exit); null when none did. */
  exit: string | null;
  /** Set once a relay (or a forwarded request) runs. */
  bytes: ByteCounters | null;
  /**
   * How DELETE /v1/connections/:id ends it (the listener sets it: destroy the socket, stop the relay): a
   * function, an object whose stop() does it (a relay's handle), or the client socket itself (destroyed):
   * no closure per connection.
   */
  closer: Closer | null;
  /** Ends the connection's life: leaves the live list and becomes a record. Idempotent (the first wins). */
  end(outcome: ConnectionEnd): void;
}

/** What ends a live connection on request: called, its stop() called, or (a client socket) destroyed. */
export type Closer = (() => void) | { stop(): void } | { destroy(): void };

/** Mints the context at accept; the connection log implements it (src/connlog/recorder.ts). */
export interface ConnectionRecorder {
  /** `client`: the client socket's remote address. */
  open(listener: string, client?: string | null): ConnectionContext;
}

/** A live connection as GET /v1/connections/active answers it: the record's fields so far, before its end. */
export type LiveConnection = Omit<ConnectionRecord, 'result' | 'reason' | 'retries' | 'hedges'>;

/** A place records go besides the store (the JSON-lines file). */
export interface RecordSink {
  write(records: readonly ConnectionRecord[]): Promise<void>;
  close(): Promise<void>;
}
