// The platform's callback (seed part 6), transport-free: the admin component mounts `handle` on its HTTP
// route. A callback is recorded durably BEFORE Rotor answers success; a repeat answers success again. What
// it points at is then read from the platform in the background: the answer never waits on the platform.
import type { Logger } from '../telemetry/logger.ts';
import type { Metrics } from '../telemetry/metrics.ts';
import type { CallbackKey, Store } from '../store/types.ts';
import type { OrdersClock } from './clock.ts';
import { realClock } from './clock.ts';
import type { Tracker } from './tracker.ts';

export interface CallbackAnswer {
  /** 200 recorded (or a repeat); 400 malformed; 503 the store could not record it (the platform retries). */
  status: 200 | 400 | 503;
  body: { code: string; msg: string };
}

export const CALLBACK_TYPES = ['order', 'instance', 'product'] as const;
const NO = /^[A-Za-z0-9_-]{1,64}$/;
const OP = /^\d{1,4}$/;

export interface CallbackHandlerOptions {
  store: Store;
  tracker: Tracker;
  metrics?: Metrics;
  logger?: Logger;
  clock?: OrdersClock;
}

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
  private readonly store: Store;
  private readonly tracker: Tracker;
  private readonly metrics: Metrics | undefined;
  private readonly logger: Logger | undefined;
  private readonly clock: OrdersClock;

  constructor(options: CallbackHandlerOptions) {
    this.store = options.store;
    this.tracker = options.tracker;
    this.metrics = options.metrics;
    this.logger = options.logger;
    this.clock = options.clock ?? realClock;
  }

  /** Validates, records, answers; then (not awaited) has the tracker read the order, instance or product. */
  async handle(query: Query): Promise<CallbackAnswer> {
    const type = field(query, 'type');
    const no = field(query, 'no');
    const op = field(query, 'op');
    const problem =
      type.bad || !type.value ? 'type is required' :
      !(CALLBACK_TYPES as readonly string[]).includes(type.value) ? 'type must be order, instance or product' :
      no.bad || !no.value ? 'no is required' :
      !NO.test(no.value) ? 'no must be 1-64 characters of [A-Za-z0-9_-]' :
      op.bad ? 'op must be given once' :
      op.value !== undefined && op.value !== '' && !OP.test(op.value) ? 'op must be digits' :
      undefined;
    if (problem || !type.value || !no.value) {
      this.metrics?.callbacks.inc({ type: 'invalid', result: 'invalid' });
      return { status: 400, body: { code: 'INVALID_CALLBACK', msg: problem ?? 'invalid callback' } };
    }
    const key: CallbackKey = { type: type.value, no: no.value, op: op.value ?? '' };
    let recorded: { duplicate: boolean; processed: boolean };
    try {
      recorded = await this.store.recordCallback(key, this.clock.now());
    } catch (err) {
      this.metrics?.callbacks.inc({ type: key.type, result: 'error' });
      this.logger?.error({ type: key.type, no: key.no, err }, 'callback could not be recorded');
      return { status: 503, body: { code: 'STORE_UNAVAILABLE', msg: 'not recorded; send again' } };
    }
    this.metrics?.callbacks.inc({ type: key.type, result: recorded.duplicate ? 'duplicate' : 'accepted' });
    this.logger?.debug({ ...key, duplicate: recorded.duplicate }, 'callback recorded');
    void this.tracker.onCallback(key, recorded.processed).catch((err: unknown) => this.logger?.warn({ type: key.type, no: key.no, err }, 'acting on a callback failed; the sweep retries it'));
    return { status: 200, body: { code: 'success', msg: 'ok' } };
  }
}
