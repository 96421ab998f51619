// Callbacks (seed part 6): GET {callbackUrl}?type=&no=&op=, repeated until the reply is JSON with
// code === 'success'. The seed leaves the schedule open; the sandbox's choice: at most 8 attempts, the
// first at once, then after base × 2^(n-1) of platform time (base 1 s: 1, 2, 4, 8, 16, 32, 64 s).
import type { SimClock } from './clock.ts';

export type CallbackType = 'order' | 'instance' | 'product';

export interface CallbackAttempt {
  at: number;
  httpStatus?: number;
  body?: string;
  error?: string;
  ok: boolean;
}

export interface CallbackRecord {
  id: number;
  type: CallbackType;
  no: string;
  op: string;
  url: string;
  /** 'pending' while attempts remain; 'delivered'; 'gave-up' after the last attempt; 'suppressed' when off */
  state: 'pending' | 'delivered' | 'gave-up' | 'suppressed' | 'no-url';
  attempts: CallbackAttempt[];
}

export const CALLBACK_MAX_ATTEMPTS = 8;
const ATTEMPT_TIMEOUT_MS = 5000;

export class CallbackSender {
  readonly records: CallbackRecord[] = [];
  enabled = true;
  private nextId = 1;
  private cancels = new Set<() => void>();
  private closed = false;
  private inFlight = new Set<AbortController>();

  constructor(
    private readonly clock: SimClock,
    private readonly urlOf: () => string,
    private readonly backoffMs = 1000,
  ) {}

  /** Callbacks waiting for the merchant's callback address (sendWhenAddressed). */
  private deferred: [CallbackType, string, string][] = [];

  /** Sends now when the merchant has a callback address, else once it is set (flushDeferred). */
  sendWhenAddressed(type: CallbackType, no: string, op: string): void {
    if (this.urlOf()) this.send(type, no, op);
    else this.deferred.push([type, no, op]);
  }

  /** Sends the callbacks that waited for an address, now that there may be one. */
  flushDeferred(): void {
    if (!this.urlOf() || this.deferred.length === 0) return;
    const waiting = this.deferred;
    this.deferred = [];
    for (const [type, no, op] of waiting) this.send(type, no, op);
  }

  send(type: CallbackType, no: string, op: string): CallbackRecord {
    const url = this.urlOf();
    const record: CallbackRecord = { id: this.nextId++, type, no, op, url, state: 'pending', attempts: [] };
    this.records.push(record);
    if (!this.enabled) record.state = 'suppressed';
    else if (!url) record.state = 'no-url';
    else void this.attempt(record);
    return record;
  }

  private async attempt(record: CallbackRecord): Promise<void> {
    if (this.closed) return;
    const attempt: CallbackAttempt = { at: this.clock.now(), ok: false };
    const abort = new AbortController();
    this.inFlight.add(abort);
    const timer = setTimeout(() => abort.abort(), ATTEMPT_TIMEOUT_MS);
    try {
      // Inside the try: a merchant callback address that is not a URL is a failed attempt, not a crash.
      const target = new URL(record.url);
      target.searchParams.set('type', record.type);
      target.searchParams.set('no', record.no);
      target.searchParams.set('op', record.op);
      const res = await fetch(target, { method: 'GET', signal: abort.signal });
      attempt.httpStatus = res.status;
      attempt.body = (await res.text()).slice(0, 500);
      attempt.ok = isSuccess(attempt.body);
    } catch (err) {
      attempt.error = err instanceof Error ? err.message : String(err);
    } finally {
      clearTimeout(timer);
      this.inFlight.delete(abort);
    }
    record.attempts.push(attempt);
    if (attempt.ok) {
      record.state = 'delivered';
      return;
    }
    if (record.attempts.length >= CALLBACK_MAX_ATTEMPTS || this.closed) {
      record.state = 'gave-up';
      return;
    }
    const delay = this.backoffMs * 2 ** (record.attempts.length - 1);
    const cancel = this.clock.schedule(delay, () => {
      this.cancels.delete(cancel);
      void this.attempt(record);
    });
    this.cancels.add(cancel);
  }

  close(): void {
    this.closed = true;
    for (const c of this.cancels) c();
    this.cancels.clear();
    for (const a of this.inFlight) a.abort();
  }
}

function isSuccess(body: string): boolean {
  try {
    const parsed: unknown = JSON.parse(body);
    return typeof parsed === 'object' && parsed !== null && (parsed as { code?: unknown }).code === 'success';
  } catch {
    return false;
  }
}
