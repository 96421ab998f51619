// Placing orders without ever placing one twice. For every order-placing operation Rotor picks the merchant
// number (unless the caller did), writes the intent — operation, exact request, the reqId it will use — to
// the journal BEFORE sending, and sends with that reqId (the client keeps it across its own retries). An
// outcome Rotor cannot know (no reply, a system error after the retries) leaves the entry unresolved;
// `resumeIntents` re-sends it later, or after a restart, with the SAME number and reqId, so the platform's
// idempotency answers with the first result instead of charging again.
import { isRetryable, PlatformClientError, PlatformError, RequestInvalidError, TransportError } from '../platform/errors.ts';
import { operations, type OperationSpec, type OpRequest, type OpResponse } from '../platform/operations.ts';
import type { Logger } from '../telemetry/logger.ts';
import {
  UNRESOLVED_STATES,
  type JournalEntry,
  type OrderJournal,
  type OrderRecord,
  type OrderStore,
  type InstanceStore,
} from '../store/types.ts';
import type { Catalog } from './catalog.ts';
import { OrderChecks, validateRequest, withOpenDefaults } from './request-checks.ts';
import { OrderError } from './errors.ts';
import { newMerchantNo, newReqId } from './numbers.ts';
import { FINAL_ORDER_STATUS, INSTANCE_STATUS, ORDER_STATUS, ORDER_TYPE, type PlatformCaller } from './types.ts';

export type PlacingOperation =
  | 'InstanceOpen'
  | 'InstanceOpenAssignIp'
  | 'InstanceRenew'
  | 'InstanceRelease'
  | 'InstanceAfterSale'
  | 'ChangeProxy'
  | 'ResetProxyPassword';

export const PLACING_OPERATIONS: readonly PlacingOperation[] = [
  'InstanceOpen',
  'InstanceOpenAssignIp',
  'InstanceRenew',
  'InstanceRelease',
  'InstanceAfterSale',
  'ChangeProxy',
  'ResetProxyPassword',
];

/** The request field that carries the merchant number, per operation (from the operation table). */
function merchantField(op: PlacingOperation): string {
  return operations[op].merchantNo;
}

function orderTypeOf(op: PlacingOperation): number | undefined {
  return (operations[op] as OperationSpec).orderType;
}

type Optional<T, K extends keyof T> = Omit<T, K> & Partial<Pick<T, K>>;

export type OpenInput = Optional<OpRequest<'InstanceOpen'>, 'appOrderNo'>;
export type AssignIpInput = Optional<OpRequest<'InstanceOpenAssignIp'>, 'appOrderNo'>;
export type RenewInput = Optional<OpRequest<'InstanceRenew'>, 'appOrderNo'>;
export type ReleaseInput = Optional<OpRequest<'InstanceRelease'>, 'orderNo'>;
export type AfterSaleInput = Optional<OpRequest<'InstanceAfterSale'>, 'orderNo'>;
export type ChangeInput = Optional<OpRequest<'ChangeProxy'>, 'appOrderNo'>;
export type ResetInput = Optional<OpRequest<'ResetProxyPassword'>, 'resetNo'>;

export interface ResetOutcome {
  resetNo: string;
  /** 1 pending, 2 processing, 3 succeeded, 4 failed (the overall status, or the worst item's). */
  status: number;
  /** Per instance; passwords are not repeated here — they are stored on the instance. */
  list: { instanceNo: string; status: number | null; passwordChanged: boolean }[];
}

export interface ResumeReport {
  resumed: number;
  accepted: string[];
  rejected: string[];
  unknown: string[];
}

export interface PlacerOptions {
  client: PlatformCaller;
  store: OrderStore & InstanceStore & OrderJournal;
  catalog: Catalog;
  logger?: Logger;
  now?: () => number;
  newMerchantNo?: (now: number) => string;
  newReqId?: () => string;
}

/** What the refusal or failure was, for the journal (no request data, no secrets). */
function describeFailure(err: unknown): Record<string, unknown> {
  if (err instanceof PlatformError) return { code: err.code, platformCode: err.platformCode, message: err.platformMsg || err.meaning };
  if (err instanceof PlatformClientError) return { code: err.code, message: err.message };
  return { code: 'INTERNAL', message: err instanceof Error ? err.message : String(err) };
}

/** JSON with sorted keys: two requests are the same request when this matches. */
function canonical(v: unknown): string {
  return JSON.stringify(v, (_k, val: unknown) =>
    val && typeof val === 'object' && !Array.isArray(val)
      ? Object.fromEntries(Object.entries(val as Record<string, unknown>).sort(([a], [b]) => a.localeCompare(b)))
      : val,
  );
}

export class Placer {
  private readonly client: PlatformCaller;
  private readonly store: OrderStore & InstanceStore & OrderJournal;
  private readonly catalog: Catalog;
  private readonly logger: Logger | undefined;
  private readonly now: () => number;
  private readonly makeMerchantNo: (now: number) => string;
  private readonly makeReqId: () => string;
  private readonly checks: OrderChecks;
  /** One send at a time per merchant number (a resume and a caller's resubmit must not race). */
  private readonly inFlight = new Map<string, Promise<JournalEntry>>();

  /** Called with every order the platform accepted (the tracker follows it). */
  onAccepted: (order: OrderRecord) => void = () => undefined;
  /** Called when an outcome is unknown (the tracker schedules a resume). */
  onUnknown: (entry: JournalEntry) => void = () => undefined;
  /** Called when a password reset was accepted but is not finished. */
  onResetPending: (resetNo: string) => void = () => undefined;
  /** Called when a reset succeeded but its answer named no new password per instance (the instances are read again). */
  onResetUnread: (instanceNos: string[]) => void = () => undefined;
  /**
   * Stores the order, instead of putOrder, when the platform's answer already carries a final status (a
   * resent change order answers with the order's current state) and it was not stored final before: with
   * its `order.final` event in one transaction (the tracker follows only unfinished orders, so it would
   * never announce this one).
   */
  storeFinal: ((order: OrderRecord) => Promise<void>) | undefined;

  constructor(options: PlacerOptions) {
    this.client = options.client;
    this.store = options.store;
    this.catalog = options.catalog;
    this.logger = options.logger;
    this.now = options.now ?? Date.now;
    this.makeMerchantNo = options.newMerchantNo ?? newMerchantNo;
    this.makeReqId = options.newReqId ?? newReqId;
    this.checks = new OrderChecks(this.catalog);
  }

  // ── the operations ──

  async open(input: OpenInput): Promise<OrderRecord> {
    const params = input.params.map(withOpenDefaults);
    for (const [i, item] of params.entries()) await this.checks.openItem(item, i);
    return this.placeOrder('InstanceOpen', { ...input, params, appOrderNo: input.appOrderNo ?? this.makeMerchantNo(this.now()) });
  }

  async checkAssignIp(ip: string): Promise<OpResponse<'GetAssignIpInfo'>> {
    return this.client.call('GetAssignIpInfo', { ip });
  }

  /** Specified IP: asks whether it can be bought, then opens it. */
  async assignIp(input: AssignIpInput): Promise<OrderRecord> {
    const merchantNo = input.appOrderNo ?? this.makeMerchantNo(this.now());
    // A resubmitted number whose order was accepted needs no new check (the IP is now ours).
    const prior = input.appOrderNo ? await this.store.getJournal(input.appOrderNo) : undefined;
    if (!prior) {
      validateRequest('InstanceOpenAssignIp', { ...input, appOrderNo: merchantNo });
      await this.checks.assignIpProduct(input.productNo);
      const info = await this.checkAssignIp(input.assignIp);
      if (!info.canBuyStatus) throw new OrderError('IP_NOT_PURCHASABLE', `IP ${input.assignIp} cannot be bought`, { field: 'assignIp' });
    }
    return this.placeOrder('InstanceOpenAssignIp', { ...input, appOrderNo: merchantNo });
  }

  async renew(input: RenewInput): Promise<OrderRecord> {
    return this.placeOrder('InstanceRenew', { ...input, appOrderNo: input.appOrderNo ?? this.makeMerchantNo(this.now()) });
  }

  async release(input: ReleaseInput): Promise<OrderRecord> {
    return this.placeOrder('InstanceRelease', { ...input, orderNo: input.orderNo ?? this.makeMerchantNo(this.now()) });
  }

  async afterSale(input: AfterSaleInput): Promise<OrderRecord> {
    return this.placeOrder('InstanceAfterSale', { ...input, orderNo: input.orderNo ?? this.makeMerchantNo(this.now()) });
  }

  async change(input: ChangeInput): Promise<OrderRecord> {
    const known = await this.store.getInstance(input.instanceNo);
    if (known && known.status !== null && known.status !== INSTANCE_STATUS.running && !input.appOrderNo) {
      throw new OrderError('ORDER_INVALID', `instance ${input.instanceNo} is not running (status ${known.status})`, {
        field: 'instanceNo',
      });
    }
    if (known?.productNo && !input.appOrderNo) {
      const product = await this.catalog.product(known.productNo).catch(() => undefined);
      if (product && product.changeProxy !== undefined && product.changeProxy !== null && product.changeProxy !== 1) {
        throw new OrderError('ORDER_INVALID', `product ${known.productNo} does not support changing the proxy`, { field: 'instanceNo' });
      }
    }
    return this.placeOrder('ChangeProxy', { ...input, appOrderNo: input.appOrderNo ?? this.makeMerchantNo(this.now()) });
  }

  async resetPassword(input: ResetInput): Promise<ResetOutcome> {
    const request = { ...input, resetNo: input.resetNo ?? this.makeMerchantNo(this.now()) };
    const entry = await this.place('ResetProxyPassword', request);
    return this.resetOutcome(entry);
  }

  /** Asks again for a reset that was not finished (same resetNo: the platform answers its current state). */
  async pollReset(resetNo: string): Promise<ResetOutcome> {
    const entry = await this.store.getJournal(resetNo);
    if (!entry || entry.operation !== 'ResetProxyPassword') throw new OrderError('ORDER_NOT_FOUND', `no reset ${resetNo}`);
    // A fresh reqId: this is a new question about the same reset, not a retry of the first send.
    const request = entry.request as OpRequest<'ResetProxyPassword'>;
    const res = await this.client.call('ResetProxyPassword', request, { reqId: this.makeReqId() });
    await this.applyReset(res, request);
    await this.store.updateJournal(resetNo, { state: 'accepted', result: this.redactReset(res, request) });
    return this.resetOutcome({ ...entry, result: this.redactReset(res, request) });
  }

  /** Re-sends every journal entry whose outcome is unknown, with its own merchant number and reqId. */
  async resumeIntents(): Promise<ResumeReport> {
    const report: ResumeReport = { resumed: 0, accepted: [], rejected: [], unknown: [] };
    for (const entry of await this.store.listJournal(UNRESOLVED_STATES)) {
      report.resumed += 1;
      try {
        const done = await this.send(entry, true);
        report[done.state === 'accepted' ? 'accepted' : 'rejected'].push(entry.merchantNo);
      } catch (err) {
        const state = (await this.store.getJournal(entry.merchantNo))?.state;
        if (state === 'rejected') report.rejected.push(entry.merchantNo);
        else report.unknown.push(entry.merchantNo);
        this.logger?.warn(
          { merchantNo: entry.merchantNo, operation: entry.operation, err: describeFailure(err) },
          'resuming an order intent did not settle it',
        );
      }
    }
    if (report.resumed) this.logger?.info({ ...report, resumed: report.resumed }, 'order intents resumed');
    return report;
  }

  // ── journal and sending ──

  private async placeOrder(op: Exclude<PlacingOperation, 'ResetProxyPassword'>, request: Record<string, unknown>): Promise<OrderRecord> {
    const entry = await this.place(op, request);
    const order = entry.orderNo ? await this.store.getOrder(entry.merchantNo) : undefined;
    if (!order)
      throw new OrderError('ORDER_OUTCOME_UNKNOWN', `order ${entry.merchantNo} has no platform record yet`, {
        merchantNo: entry.merchantNo,
      });
    return order;
  }

  private async place(op: PlacingOperation, raw: Record<string, unknown>): Promise<JournalEntry> {
    // Exactly what will be sent, now and on every resend: JSON-clean (no undefined keys).
    const request = JSON.parse(JSON.stringify(raw)) as Record<string, unknown>;
    validateRequest(op, request);
    const merchantNo = String(request[merchantField(op)]);
    const prior = await this.store.getJournal(merchantNo);
    if (prior) {
      if (prior.operation !== op || canonical(prior.request) !== canonical(request)) {
        throw new OrderError('MERCHANT_NO_CONFLICT', `merchant number ${merchantNo} was already used for another request`, {
          merchantNo,
          field: merchantField(op),
        });
      }
      if (prior.state === 'accepted') return prior;
      if (prior.state === 'rejected') {
        throw new OrderError(
          'MERCHANT_NO_CONFLICT',
          `merchant number ${merchantNo} was refused by the platform; place the order with a new number`,
          { merchantNo, field: merchantField(op) },
        );
      }
      // Journaled and unsettled: another caller (a second daemon's expiry check, a client re-posting its number)
      // placed it. Sent again as a resend: a refusal then asks whether the order exists under the number (the
      // platform answers a renew it already took with 10013) before it counts as refused — else an accepted
      // renewal written 'rejected' was renewed again.
      return this.send(prior, true);
    }
    const entry = await this.store.addIntent({ merchantNo, operation: op, request, reqId: this.makeReqId() });
    return this.send(entry, false);
  }

  private send(entry: JournalEntry, resuming: boolean): Promise<JournalEntry> {
    const running = this.inFlight.get(entry.merchantNo);
    if (running) return running;
    const p = this.sendOnce(entry, resuming).finally(() => this.inFlight.delete(entry.merchantNo));
    this.inFlight.set(entry.merchantNo, p);
    return p;
  }

  private async sendOnce(entry: JournalEntry, resuming: boolean): Promise<JournalEntry> {
    const op = entry.operation as PlacingOperation;
    const m = entry.merchantNo;
    if (resuming) {
      // Settled meanwhile by whoever sent it first: nothing to send, and its 'accepted' is not overwritten.
      const latest = await this.store.getJournal(m);
      if (latest?.state === 'accepted') return latest;
    }
    await this.store.updateJournal(m, { state: 'sent', sent: true });
    let answer: unknown;
    // Set when the client resent this request itself (a timeout, a lost or cut answer, 5xx, code 500): the
    // platform may have done the first send, so a refusal that follows may be its duplicate refusal.
    let resent = false;
    try {
      answer = await this.client.call(op, entry.request as never, { reqId: entry.reqId, onRetry: () => (resent = true) });
    } catch (err) {
      if (err instanceof RequestInvalidError || (err instanceof PlatformError && !isRetryable(err))) {
        // A refusal after a resend — ours from the journal, or the client's own retry — may mean the first send
        // went through and the platform does not repeat its first answer (10013 for a renew, a parameter refusal
        // such as 10004 for an open): if the order exists under our number, it was accepted (and charged).
        if ((resuming || resent) && orderTypeOf(op) !== undefined) {
          const found = await this.findOrder(m);
          if (found === 'unanswered') return this.outcomeUnknown(entry, err);
          if (found) return this.accept(entry, found);
        }
        await this.store.updateJournal(m, { state: 'rejected', result: describeFailure(err) });
        this.logger?.info({ merchantNo: m, operation: op, err: describeFailure(err) }, 'order refused by the platform');
        if (err instanceof RequestInvalidError)
          throw new OrderError('ORDER_INVALID', err.message, { issues: err.issues, merchantNo: m, cause: err });
        throw err;
      }
      return this.outcomeUnknown(entry, err);
    }
    return this.accept(entry, answer);
  }

  /** No knowing whether the platform took it: the entry stays unresolved and is resent with the same number and reqId. */
  private async outcomeUnknown(entry: JournalEntry, err: unknown): Promise<never> {
    const op = entry.operation;
    const m = entry.merchantNo;
    await this.store.updateJournal(m, { state: 'unknown', result: describeFailure(err) });
    this.logger?.warn(
      { merchantNo: m, operation: op, err: describeFailure(err) },
      'order outcome unknown; it will be resent with the same number and reqId',
    );
    const latest = (await this.store.getJournal(m)) ?? entry;
    this.onUnknown(latest);
    throw new OrderError(
      'ORDER_OUTCOME_UNKNOWN',
      `${op} ${m}: no answer from the platform; Rotor resends it with the same merchant number`,
      {
        merchantNo: m,
        cause: err,
      },
    );
  }

  /**
   * The order the platform holds under our merchant number; undefined when it answers that there is none,
   * 'unanswered' when the question got no answer (then the send's refusal proves nothing: left unresolved).
   */
  private async findOrder(
    merchantNo: string,
  ): Promise<{ orderNo: string; appOrderNo: string; amount?: string | null } | 'unanswered' | undefined> {
    try {
      const o = await this.client.call('GetOrder', { appOrderNo: merchantNo, page: 1, pageSize: 1 });
      // An answer naming another merchant number is not ours (the tracker refuses it the same way).
      if (o.appOrderNo && o.appOrderNo !== merchantNo) return undefined;
      // Accepted as pending whatever its status: the tracker then reads it whole — instances, a renewal's new
      // expiry, its final event — as for any order just placed.
      return { orderNo: o.orderNo, appOrderNo: merchantNo, amount: o.amount ?? null };
    } catch (err) {
      // Unreachable, or its system error after the retries; any other answer (a refusal, no order) says: none.
      return err instanceof TransportError || (err instanceof PlatformError && isRetryable(err)) ? 'unanswered' : undefined;
    }
  }

  private async accept(entry: JournalEntry, answer: unknown): Promise<JournalEntry> {
    const op = entry.operation as PlacingOperation;
    const m = entry.merchantNo;
    if (op === 'ResetProxyPassword') {
      const res = answer as OpResponse<'ResetProxyPassword'>;
      const request = entry.request as OpRequest<'ResetProxyPassword'>;
      await this.applyReset(res, request);
      const result = this.redactReset(res, request);
      await this.store.updateJournal(m, { state: 'accepted', result });
      const done = { ...entry, state: 'accepted' as const, result };
      if (this.resetOutcome(done).status < 3) this.onResetPending(m);
      return done;
    }
    const res = answer as { orderNo: string; amount?: string | null; status?: number | null };
    const t = this.now();
    const existing = await this.store.getOrder(m);
    const request = entry.request as Record<string, unknown>;
    const order: OrderRecord = {
      appOrderNo: m,
      orderNo: res.orderNo,
      type: orderTypeOf(op) ?? ORDER_TYPE.open,
      // A tracker that already read the order (a callback can beat the reply) knows better.
      status:
        existing?.orderNo === res.orderNo
          ? existing.status
          : typeof res.status === 'number' && res.status > 0
            ? res.status
            : ORDER_STATUS.pending,
      amount: res.amount ?? existing?.amount ?? null,
      count: countOf(op, request),
      request,
      createdAt: existing?.createdAt ?? entry.createdAt,
      updatedAt: t,
    };
    if (this.storeFinal && FINAL_ORDER_STATUS.has(order.status) && !(existing && FINAL_ORDER_STATUS.has(existing.status)))
      await this.storeFinal(order);
    else await this.store.putOrder(order);
    await this.store.updateJournal(m, { state: 'accepted', result: answer, orderNo: res.orderNo });
    this.logger?.info({ merchantNo: m, orderNo: res.orderNo, operation: op, amount: order.amount }, 'order accepted');
    if (!FINAL_ORDER_STATUS.has(order.status)) this.onAccepted(order);
    return { ...entry, state: 'accepted', result: answer, orderNo: res.orderNo };
  }

  private redactReset(res: OpResponse<'ResetProxyPassword'>, request: OpRequest<'ResetProxyPassword'>): unknown {
    return {
      resetNo: res.resetNo,
      status: res.status,
      list: resetItems(res, request).map((i) => ({ instanceNo: i.instanceNo, status: i.status ?? null, passwordChanged: !!i.newPassword })),
    };
  }

  private async applyReset(res: OpResponse<'ResetProxyPassword'>, request: OpRequest<'ResetProxyPassword'>): Promise<void> {
    const changed = [];
    const items = resetItems(res, request);
    for (const item of items) {
      if (!item.newPassword || (item.status !== undefined && item.status !== null && item.status !== 3)) continue;
      const inst = await this.store.getInstance(item.instanceNo);
      if (!inst) continue;
      const raw = inst.raw && typeof inst.raw === 'object' ? { ...(inst.raw as Record<string, unknown>), pwd: item.newPassword } : inst.raw;
      changed.push({ ...inst, pwd: item.newPassword, raw, updatedAt: this.now() });
    }
    if (changed.length) await this.store.putInstances(changed);
    // Succeeded with no password per instance to store (several instances, one top-level answer): the
    // instances are read again from the platform, which holds their new passwords.
    if (res.status === 3 && !items.some((i) => i.newPassword)) this.onResetUnread(request.instanceNoList);
  }

  private resetOutcome(entry: JournalEntry): ResetOutcome {
    const r = (entry.result ?? {}) as {
      status?: number | null;
      list?: { instanceNo: string; status: number | null; passwordChanged: boolean }[];
    };
    const list = r.list ?? [];
    const statuses = [...list.map((i) => i.status ?? r.status ?? 3), ...(typeof r.status === 'number' ? [r.status] : [])];
    const unsettled = statuses.filter((s) => s < 3);
    // Pending until every item is settled; then failed if any item failed.
    const status = unsettled.length ? Math.min(...unsettled) : statuses.includes(4) ? 4 : 3;
    return { resetNo: entry.merchantNo, status, list };
  }
}

type ResetItem = { instanceNo: string; newPassword?: string | null; status?: number | null };

/**
 * The reset's items: its `list` (the provider SDK's reading), else — `{resetNo, status, newPassword}` at the top,
 * as the seed names the fields — the one instance of a one-instance reset.
 */
function resetItems(res: OpResponse<'ResetProxyPassword'>, request: OpRequest<'ResetProxyPassword'>): ResetItem[] {
  if (res.list?.length) return res.list;
  const only = request.instanceNoList.length === 1 ? request.instanceNoList[0] : undefined;
  if (only === undefined || (!res.newPassword && (res.status === undefined || res.status === null))) return [];
  return [{ instanceNo: only, newPassword: res.newPassword ?? null, status: res.status ?? null }];
}

function countOf(op: PlacingOperation, request: Record<string, unknown>): number {
  switch (op) {
    case 'InstanceOpen':
      return ((request.params as { count?: number }[]) ?? []).reduce((s, i) => s + (i.count ?? 1), 0);
    case 'InstanceRenew':
    case 'InstanceRelease':
    case 'InstanceAfterSale':
      return ((request.instances as unknown[]) ?? []).length;
    default:
      return 1;
  }
}

export { ORDER_TYPE };
