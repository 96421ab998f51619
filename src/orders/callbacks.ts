// The platform's callback (seed part 6), transport-free: the admin component mounts `handle` on its HTTP
// route. A callback is recorded durably BEFORE Rotor answers success; a repeat answers success again. What
// it points at is then read from the platform in the background: the answer never waits on the platform.
//
// The callback port is reachable by whoever can reach it, so callbacks are treated as hints, not orders
// (issue 13): reads are coalesced per (type, no) with a rate bound (callback-gate.ts); only callbacks about
// something Rotor knows (an order or instance in the store, a product the catalogue has seen) are recorded
// in the store; others are read through a small token bucket and never written (so distinct forged numbers
// add no rows), answered 429 when the bucket is empty (the platform calls again, a forger gets nothing), and
// product callbacks for products never seen are answered and ignored (a new product shows up in listings).
import type { Logger } from '../telemetry/logger.ts';
import type { Metrics } from '../telemetry/metrics.ts';
import type { CallbackKey, CallbackStore, InstanceStore, OrderStore } from '../store/types.ts';
import type { OrdersClock } from './clock.ts';
import { realClock } from './clock.ts';
import type { Tracker } from './tracker.ts';
import { CallbackGate } from './callback-gate.ts';

export interface CallbackAnswer {
  /** 200 recorded (or a repeat, or read without recording); 400 malformed; 429 too many callbacks about unknown numbers; 503 the store could not record it (the platform retries both). */
  status: 200 | 400 | 429 | 503;
  body: { code: string; msg: string };
}

export const CALLBACK_TYPES = ['order', 'instance', 'product'] as const;
const NO = /^[A-Za-z0-9_-]{1,64}$/;
const OP = /^\d{1,4}$/;

export interface CallbackHandlerOptions {
  store: OrderStore & InstanceStore & CallbackStore;
  tracker: Tracker;
  metrics?: Metrics;
  logger?: Logger;
  clock?: OrdersClock;
  /** Whether the catalogue has ever seen this product (Catalog.isAuthorized !== undefined). */
  isKnownProduct?: (productNo: string) => boolean;
  /** Shortest time between two platform reads for one (type, no). Default 2000 ms. */
  minIntervalMs?: number;
  /** Callbacks about unknown numbers read per second (steady rate; the burst is 20). Default 1. */
  unknownPerSecond?: number;
}

const UNKNOWN_BURST = 20;
const gateKey = (key: CallbackKey) => `${key.type}\u0000${key.no}`;

type Query = Record<string, unknown> | URLSearchParams | null | undefined;

function field(query: Query, name: string): { value?: string; bad?: boolean } {
  if (!query) return {};
  if (query instanceof URLSearchParams) {
    const all = query.getAll(name);
    return all.length > 1 ? { bad: true } : all.length === 1 ? { value: all[0] } : {};
  }
  const v = query[name];
  if (v === undefined || v === null) return {};
  if (typeof v === 'string') return { value: v };
  if (typeof v === 'number' && Number.isFinite(v)) return { value: String(v) };
  return { bad: true };
}

export class CallbackHandler {
  private readonly store: OrderStore & InstanceStore & CallbackStore;
  private readonly tracker: Tracker;
  private readonly metrics: Metrics | undefined;
  private readonly logger: Logger | undefined;
  private readonly clock: OrdersClock;
  private readonly gate: CallbackGate;
  private readonly isKnownProduct: (productNo: string) => boolean;
  private readonly unknownPerMs: number;
  private unknownTokens = UNKNOWN_BURST;
  private unknownAt = 0;

  constructor(options: CallbackHandlerOptions) {
    this.store = options.store;
    this.tracker = options.tracker;
    this.metrics = options.metrics;
    this.logger = options.logger;
    this.clock = options.clock ?? realClock;
    this.gate = new CallbackGate({
      clock: this.clock,
      ...(options.minIntervalMs !== undefined ? { minIntervalMs: options.minIntervalMs } : {}),
    });
    this.isKnownProduct = options.isKnownProduct ?? (() => false);
    this.unknownPerMs = (options.unknownPerSecond ?? 1) / 1000;
    this.unknownAt = this.clock.now();
  }

  /** Whether the callback is about an order, instance or product Rotor already knows. */
  private async known(key: CallbackKey): Promise<boolean> {
    if (key.type === 'order') return (await this.store.getOrder(key.no)) !== undefined;
    if (key.type === 'instance') return (await this.store.getInstance(key.no)) !== undefined;
    return this.isKnownProduct(key.no);
  }

  /** Takes one token of the unknown-callback bucket, if there is one. */
  private takeUnknownToken(): boolean {
    const now = this.clock.now();
    this.unknownTokens = Math.min(UNKNOWN_BURST, this.unknownTokens + (now - this.unknownAt) * this.unknownPerMs);
    this.unknownAt = now;
    if (this.unknownTokens < 1) return false;
    this.unknownTokens -= 1;
    return true;
  }

  /** Has the tracker read what the callback points at, through the gate (at most one read per key and interval). */
  private act(key: CallbackKey, processed: boolean): void {
    this.gate.submit(gateKey(key), () =>
      this.tracker
        .onCallback(key, processed)
        .catch((err: unknown) =>
          this.logger?.warn({ type: key.type, no: key.no, err }, 'acting on a callback failed; the sweep retries it'),
        ),
    );
  }

  /** Validates, records, answers; then (not awaited) has the tracker read the order, instance or product. */
  async handle(query: Query): Promise<CallbackAnswer> {
    const type = field(query, 'type');
    const no = field(query, 'no');
    const op = field(query, 'op');
    const problem =
      type.bad || !type.value
        ? 'type is required'
        : !(CALLBACK_TYPES as readonly string[]).includes(type.value)
          ? 'type must be order, instance or product'
          : no.bad || !no.value
            ? 'no is required'
            : !NO.test(no.value)
              ? 'no must be 1-64 characters of [A-Za-z0-9_-]'
              : op.bad
                ? 'op must be given once'
                : op.value !== undefined && op.value !== '' && !OP.test(op.value)
                  ? 'op must be digits'
                  : undefined;
    if (problem || !type.value || !no.value) {
      this.metrics?.callbacks.inc({ type: 'invalid', result: 'invalid' });
      return { status: 400, body: { code: 'INVALID_CALLBACK', msg: problem ?? 'invalid callback' } };
    }
    const key: CallbackKey = { type: type.value, no: no.value, op: op.value ?? '' };
    let recorded: { duplicate: boolean; processed: boolean };
    try {
      if (!(await this.known(key))) {
        if (key.type === 'product') {
          this.metrics?.callbacks.inc({ type: key.type, result: 'ignored' });
          return { status: 200, body: { code: 'success', msg: 'ok' } };
        }
        if (this.gate.isPending(gateKey(key))) {
          this.metrics?.callbacks.inc({ type: key.type, result: 'duplicate' });
          return { status: 200, body: { code: 'success', msg: 'ok' } };
        }
        if (!this.takeUnknownToken()) {
          this.metrics?.callbacks.inc({ type: key.type, result: 'throttled' });
          // Not `success`, so the platform calls again; 429, not 5xx: Rotor is well, the caller is too eager.
          return { status: 429, body: { code: 'TOO_MANY_CALLBACKS', msg: 'too many callbacks; send again later' } };
        }
        this.metrics?.callbacks.inc({ type: key.type, result: 'unknown' });
        this.logger?.debug({ ...key }, 'callback about an unknown number: read, not recorded');
        this.act(key, false);
        return { status: 200, body: { code: 'success', msg: 'ok' } };
      }
      recorded = await this.store.recordCallback(key, this.clock.now());
    } catch (err) {
      this.metrics?.callbacks.inc({ type: key.type, result: 'error' });
      this.logger?.error({ type: key.type, no: key.no, err }, 'callback could not be recorded');
      return { status: 503, body: { code: 'STORE_UNAVAILABLE', msg: 'not recorded; send again' } };
    }
    this.metrics?.callbacks.inc({ type: key.type, result: recorded.duplicate ? 'duplicate' : 'accepted' });
    this.logger?.debug({ ...key, duplicate: recorded.duplicate }, 'callback recorded');
    this.act(key, recorded.processed);
    return { status: 200, body: { code: 'success', msg: 'ok' } };
  }
}
