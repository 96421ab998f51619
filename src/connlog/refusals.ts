// Connections refused before authentication (a 407, bad SOCKS5 credentials, an authentication back-off, a
// malformed greeting, a client gone before it said who it is) cost a client nothing to make, so they are not
// one record each: they are counted per source address (IPv6 by its /64, as the authentication back-off
// tracks them), listener and result, and written as one record per window (a minute) with `count` attempts.
// A flood from one address therefore writes one record a minute per listener and result, however fast it
// goes; the sources counted in a window are bounded (past `maxSources`, further ones count under `*`).
import { isIPv4 } from 'node:net';
import ipaddr from 'ipaddr.js';
import type { ConnectionEnd, ConnectionRecord, RecordResult } from './types.ts';

/** What the tally reads of an ended connection (the recorder's context). */
export interface RefusedConnection {
  readonly id: string;
  readonly listener: string;
  readonly startedAt: number;
  readonly user: string | null;
  readonly node: string | null;
  readonly target: string | null;
  /** The client's source address, when the listener gave one. */
  readonly client?: string | null;
}

export interface RefusalTallyOptions {
  /** Where the window's records go (the recorder's queue). */
  emit: (record: ConnectionRecord) => void;
  /** Length of a window (log.access.refusalWindowMs). Default 60,000 ms. */
  windowMs?: number;
  /** Sources counted at most per window; past it, new sources count under `*`. Default 10,000. */
  maxSources?: number;
  now?: () => number;
}

interface Tally {
  id: string;
  listener: string;
  source: string;
  target: string | null;
  result: RecordResult;
  reason: string | null;
  startedAt: number;
  lastAt: number;
  count: number;
}

/** Results that can come before authentication (an authenticated connection is never folded). */
const FOLDED: ReadonlySet<RecordResult> = new Set(['auth_failed', 'bad_request', 'limited', 'not_allowed', 'client_abort']);

export const OTHER_SOURCES = '*';

export class RefusalTally {
  private tallies = new Map<string, Tally>();
  private readonly windowMs: number;
  private readonly maxSources: number;
  private readonly now: () => number;
  private readonly timer: NodeJS.Timeout;

  constructor(private readonly options: RefusalTallyOptions) {
    this.windowMs = Math.max(10, options.windowMs ?? 60_000);
    this.maxSources = Math.max(1, options.maxSources ?? 10_000);
    this.now = options.now ?? Date.now;
    this.timer = setInterval(() => this.flush(), this.windowMs);
    this.timer.unref();
  }

  /** Whether `ctx` ended as a refusal before authentication: then it is counted here instead of recorded. */
  take(ctx: RefusedConnection, outcome: ConnectionEnd): boolean {
    if (ctx.user !== null || ctx.node !== null || !FOLDED.has(outcome.result)) return false;
    let source = sourceKey(ctx.client);
    let key = `${source}\u0000${ctx.listener}\u0000${outcome.result}`;
    let tally = this.tallies.get(key);
    if (!tally && this.tallies.size >= this.maxSources) {
      source = OTHER_SOURCES;
      key = `${source}\u0000${ctx.listener}\u0000${outcome.result}`;
      tally = this.tallies.get(key);
    }
    const now = this.now();
    if (tally) {
      tally.count++;
      tally.lastAt = now;
      tally.reason = outcome.reason ?? tally.reason;
      return true;
    }
    this.tallies.set(key, {
      id: ctx.id,
      listener: ctx.listener,
      source,
      target: ctx.target,
      result: outcome.result,
      reason: outcome.reason ?? null,
      startedAt: ctx.startedAt,
      lastAt: now,
      count: 1,
    });
    return true;
  }

  /** Sources counted in the current window. */
  get size(): number {
    return this.tallies.size;
  }

  /** Ends the window: one record per source and result counted in it. */
  flush(): void {
    const tallies = this.tallies;
    if (tallies.size === 0) return;
    this.tallies = new Map();
    for (const t of tallies.values()) this.options.emit(toRecord(t));
  }

  /** The last window's records, then no more. */
  close(): void {
    clearInterval(this.timer);
    this.flush();
  }
}

function toRecord(t: Tally): ConnectionRecord {
  const record: ConnectionRecord = {
    id: t.id,
    user: null,
    session: null,
    listener: t.listener,
    target: t.target,
    client: t.source,
    node: null,
    bytesUp: 0,
    bytesDown: 0,
    startedAt: t.startedAt,
    durationMs: Math.max(0, t.lastAt - t.startedAt),
    result: t.result,
    reason: t.count > 1 ? `${t.reason ?? t.result} (the last of ${t.count} in this window)` : t.reason,
    retries: 0,
    hedges: 0,
    count: t.count,
  };
  return record;
}

/**
 * The key a source address is counted under (here and by the authentication back-off, src/proxy/auth-guard.ts):
 * IPv4 as is (an IPv4-mapped IPv6 address as its IPv4), IPv6 by its /64 (one customer commonly holds a whole
 * /64), 'unknown' when the listener gave none.
 */
export function sourceKey(address: string | null | undefined): string {
  if (address === undefined || address === null || address === '') return 'unknown';
  // Every proxy login asks: a dotted IPv4 (the common case, no leading zeros) is its own key, without a parse.
  if (isIPv4(address)) return address;
  if (address.startsWith('::ffff:') && isIPv4(address.slice(7))) return address.slice(7);
  try {
    let a = ipaddr.parse(address);
    if (a.kind() === 'ipv6' && (a as ipaddr.IPv6).isIPv4MappedAddress()) a = (a as ipaddr.IPv6).toIPv4Address();
    if (a.kind() === 'ipv4') return a.toString();
    const parts = (a as ipaddr.IPv6).parts.slice(0, 4);
    return `${parts.map((p) => p.toString(16)).join(':')}::/64`;
  } catch {
    return address;
  }
}
