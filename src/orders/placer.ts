// Placing orders without ever placing one twice. For every order-placing operation Rotor picks the merchant
// number (unless the caller did), writes the intent — operation, exact request, the reqId it will use — to
// the journal BEFORE sending, and sends with that reqId (the client keeps it across its own retries). An
// outcome Rotor cannot know (no reply, a system error after the retries) leaves the entry unresolved;
// `resumeIntents` re-sends it later, or after a restart, with the SAME number and reqId, so the platform's
// idempotency answers with the first result instead of charging again.
import { isRetryable, PlatformClientError, PlatformError, RequestInvalidError, fieldIssues } from '../platform/errors.ts';
import { operations, type OperationSpec, type OpRequest, type OpResponse } from '../platform/operations.ts';
import type { Product } from '../platform/schemas.ts';
import type { Logger } from '../telemetry/logger.ts';
import { UNRESOLVED_STATES, type JournalEntry, type OrderRecord, type Store } from '../store/types.ts';
import { isDynamic, isPurchasable, type Catalog } from './catalog.ts';
import { OrderError } from './errors.ts';
import { newMerchantNo, newReqId } from './numbers.ts';
import { FINAL_ORDER_STATUS, INSTANCE_STATUS, ORDER_STATUS, ORDER_TYPE, type PlatformCaller } from './types.ts';

export type PlacingOperation = 'InstanceOpen' | 'InstanceOpenAssignIp' | 'InstanceRenew' | 'InstanceRelease' | 'InstanceAfterSale' | 'ChangeProxy' | 'ResetProxyPassword';

export const PLACING_OPERATIONS: readonly PlacingOperation[] = ['InstanceOpen', 'InstanceOpenAssignIp', 'InstanceRenew', 'InstanceRelease', 'InstanceAfterSale', 'ChangeProxy', 'ResetProxyPassword'];

/** The request field that carries the merchant number, per operation (from the operation table). */
function merchantField(op: PlacingOperation): string {
  return operations[op].merchantNo;
}

function orderTypeOf(op: PlacingOperation): number | undefined {
  return (operations[op] as OperationSpec).orderType;
}

type OpenItem = OpRequest<'InstanceOpen'>['params'][number];
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
  store: Store;
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
    val && typeof val === 'object' && !Array.isArray(val) ? Object.fromEntries(Object.entries(val as Record<string, unknown>).sort(([a], [b]) => a.localeCompare(b))) : val,
  );
}

export class Placer {
  private readonly client: PlatformCaller;
  private readonly store: Store;
  private readonly catalog: Catalog;
  private readonly logger: Logger | undefined;
  private readonly now: () => number;
  private readonly makeMerchantNo: (now: number) => string;
  private readonly makeReqId: () => string;
  /** One send at a time per merchant number (a resume and a caller's resubmit must not race). */
  private readonly inFlight = new Map<string, Promise<JournalEntry>>();

  /** Called with every order the platform accepted (the tracker follows it). */
  onAccepted: (order: OrderRecord) => void = () => undefined;
  /** Called when an outcome is unknown (the tracker schedules a resume). */
  onUnknown: (entry: JournalEntry) => void = () => undefined;
  /** Called when a password reset was accepted but is not finished. */
  onResetPending: (resetNo: string) => void = () => undefined;

  constructor(options: PlacerOptions) {
    this.client = options.client;
    this.store = options.store;
    this.catalog = options.catalog;
    this.logger = options.logger;
    this.now = options.now ?? Date.now;
    this.makeMerchantNo = options.newMerchantNo ?? newMerchantNo;
    this.makeReqId = options.newReqId ?? newReqId;
  }

  // ── the operations ──

  async open(input: OpenInput): Promise<OrderRecord> {
    const params = input.params.map((item) => this.withDefaults(item));
    for (const [i, item] of params.entries()) await this.checkOpenItem(item, i);
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
      this.validate('InstanceOpenAssignIp', { ...input, appOrderNo: merchantNo });
      const product = await this.requireProduct(input.productNo, 'productNo');
      if (isDynamic(product)) throw new OrderError('ORDER_INVALID', 'a specified IP can be bought for static products only', { field: 'productNo' });
      if (product.assignIp !== 1) throw new OrderError('ORDER_INVALID', `product ${input.productNo} does not support buying a specified IP`, { field: 'productNo' });
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
      throw new OrderError('ORDER_INVALID', `instance ${input.instanceNo} is not running (status ${known.status})`, { field: 'instanceNo' });
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
    const res = await this.client.call('ResetProxyPassword', entry.request as OpRequest<'ResetProxyPassword'>, { reqId: this.makeReqId() });
    await this.applyReset(res);
    await this.store.updateJournal(resetNo, { state: 'accepted', result: this.redactReset(res) });
    return this.resetOutcome({ ...entry, result: this.redactReset(res) });
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
        this.logger?.warn({ merchantNo: entry.merchantNo, operation: entry.operation, err: describeFailure(err) }, 'resuming an order intent did not settle it');
      }
    }
    if (report.resumed) this.logger?.info({ ...report, resumed: report.resumed }, 'order intents resumed');
    return report;
  }

  // ── journal and sending ──

  private async placeOrder(op: Exclude<PlacingOperation, 'ResetProxyPassword'>, request: Record<string, unknown>): Promise<OrderRecord> {
    const entry = await this.place(op, request);
    const order = entry.orderNo ? await this.store.getOrder(entry.merchantNo) : undefined;
    if (!order) throw new OrderError('ORDER_OUTCOME_UNKNOWN', `order ${entry.merchantNo} has no platform record yet`, { merchantNo: entry.merchantNo });
    return order;
  }

  private validate(op: PlacingOperation, request: Record<string, unknown>): void {
    const checked = operations[op].request.safeParse(request);
    if (!checked.success) {
      const issues = fieldIssues(checked.error);
      throw new OrderError('ORDER_INVALID', `${op}: ${issues.map((i) => `${i.path || '(request)'}: ${i.message}`).join('; ')}`, { issues });
    }
  }

  private async place(op: PlacingOperation, raw: Record<string, unknown>): Promise<JournalEntry> {
    // Exactly what will be sent, now and on every resend: JSON-clean (no undefined keys).
    const request = JSON.parse(JSON.stringify(raw)) as Record<string, unknown>;
    this.validate(op, request);
    const merchantNo = String(request[merchantField(op)]);
    const prior = await this.store.getJournal(merchantNo);
    if (prior) {
      if (prior.operation !== op || canonical(prior.request) !== canonical(request)) {
        throw new OrderError('MERCHANT_NO_CONFLICT', `merchant number ${merchantNo} was already used for another request`, { merchantNo, field: merchantField(op) });
      }
      if (prior.state === 'accepted') return prior;
      if (prior.state === 'rejected') {
        throw new OrderError('MERCHANT_NO_CONFLICT', `merchant number ${merchantNo} was refused by the platform; place the order with a new number`, { merchantNo, field: merchantField(op) });
      }
      return this.send(prior, false);
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
    await this.store.updateJournal(m, { state: 'sent', sent: true });
    let answer: unknown;
    try {
      answer = await this.client.call(op, entry.request as never, { reqId: entry.reqId });
    } catch (err) {
      if (err instanceof RequestInvalidError || (err instanceof PlatformError && !isRetryable(err))) {
        // A refusal after a resend may mean the first send went through and the platform does not repeat
        // its first answer (10013 for renew): if the order exists under our number, it was accepted.
        if (resuming && orderTypeOf(op) !== undefined) {
          const found = await this.findOrder(m);
          if (found) return this.accept(entry, found);
        }
        await this.store.updateJournal(m, { state: 'rejected', result: describeFailure(err) });
        this.logger?.info({ merchantNo: m, operation: op, err: describeFailure(err) }, 'order refused by the platform');
        if (err instanceof RequestInvalidError) throw new OrderError('ORDER_INVALID', err.message, { issues: err.issues, merchantNo: m, cause: err });
        throw err;
      }
      await this.store.updateJournal(m, { state: 'unknown', result: describeFailure(err) });
      this.logger?.warn({ merchantNo: m, operation: op, err: describeFailure(err) }, 'order outcome unknown; it will be resent with the same number and reqId');
      const latest = (await this.store.getJournal(m)) ?? entry;
      this.onUnknown(latest);
      throw new OrderError('ORDER_OUTCOME_UNKNOWN', `${op} ${m}: no answer from the platform; Rotor resends it with the same merchant number`, { merchantNo: m, cause: err });
    }
    return this.accept(entry, answer);
  }

  private async findOrder(merchantNo: string): Promise<{ orderNo: string; appOrderNo: string; amount?: string | null; status?: number | null } | undefined> {
    try {
      const o = await this.client.call('GetOrder', { appOrderNo: merchantNo, page: 1, pageSize: 1 });
      return { orderNo: o.orderNo, appOrderNo: merchantNo, amount: o.amount ?? null, status: o.status ?? null };
    } catch {
      return undefined;
    }
  }

  private async accept(entry: JournalEntry, answer: unknown): Promise<JournalEntry> {
    const op = entry.operation as PlacingOperation;
    const m = entry.merchantNo;
    if (op === 'ResetProxyPassword') {
      const res = answer as OpResponse<'ResetProxyPassword'>;
      await this.applyReset(res);
      const result = this.redactReset(res);
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
      status: existing?.orderNo === res.orderNo ? existing.status : typeof res.status === 'number' && res.status > 0 ? res.status : ORDER_STATUS.pending,
      amount: res.amount ?? existing?.amount ?? null,
      count: countOf(op, request),
      request,
      createdAt: existing?.createdAt ?? entry.createdAt,
      updatedAt: t,
    };
    await this.store.putOrder(order);
    await this.store.updateJournal(m, { state: 'accepted', result: answer, orderNo: res.orderNo });
    this.logger?.info({ merchantNo: m, orderNo: res.orderNo, operation: op, amount: order.amount }, 'order accepted');
    if (!FINAL_ORDER_STATUS.has(order.status)) this.onAccepted(order);
    return { ...entry, state: 'accepted', result: answer, orderNo: res.orderNo };
  }

  private redactReset(res: OpResponse<'ResetProxyPassword'>): unknown {
    return { resetNo: res.resetNo, status: res.status, list: (res.list ?? []).map((i) => ({ instanceNo: i.instanceNo, status: i.status ?? null, passwordChanged: !!i.newPassword })) };
  }

  private async applyReset(res: OpResponse<'ResetProxyPassword'>): Promise<void> {
    const changed = [];
    for (const item of res.list ?? []) {
      if (!item.newPassword || (item.status !== undefined && item.status !== null && item.status !== 3)) continue;
      const inst = await this.store.getInstance(item.instanceNo);
      if (!inst) continue;
      const raw = inst.raw && typeof inst.raw === 'object' ? { ...(inst.raw as Record<string, unknown>), pwd: item.newPassword } : inst.raw;
      changed.push({ ...inst, pwd: item.newPassword, raw, updatedAt: this.now() });
    }
    if (changed.length) await this.store.putInstances(changed);
  }

  private resetOutcome(entry: JournalEntry): ResetOutcome {
    const r = (entry.result ?? {}) as { status?: number | null; list?: { instanceNo: string; status: number | null; passwordChanged: boolean }[] };
    const list = r.list ?? [];
    const statuses = [...list.map((i) => i.status ?? r.status ?? 3), ...(typeof r.status === 'number' ? [r.status] : [])];
    const unsettled = statuses.filter((s) => s < 3);
    // Pending until every item is settled; then failed if any item failed.
    const status = unsettled.length ? Math.min(...unsettled) : statuses.includes(4) ? 4 : 3;
    return { resetNo: entry.merchantNo, status, list };
  }

  // ── local checks of seed 4.3 before anything is journaled ──

  private withDefaults(item: OpenItem): OpenItem {
    const out = { ...item };
    if (out.cycleTimes === undefined && out.duration === undefined) out.cycleTimes = 1;
    return out;
  }

  private async requireProduct(productNo: string, field: string): Promise<Product> {
    const product = await this.catalog.product(productNo, { fresh: true });
    if (!product) throw new OrderError('PRODUCT_UNAUTHORIZED', `product ${productNo} is not authorized for this merchant`, { field });
    return product;
  }

  private async checkOpenItem(item: OpenItem, i: number): Promise<void> {
    const at = (f: string) => `params.${i}.${f}`;
    const count = item.count ?? 1;
    if (!item.productNo) {
      if (item.cidrBlocks?.length) throw new OrderError('ORDER_INVALID', 'segments can be chosen only with a productNo', { field: at('cidrBlocks') });
      if (item.productType === 2 && !item.projectId) throw new OrderError('PROJECT_REQUIRED', 'shared products need a projectId (a project code)', { field: at('projectId') });
      return;
    }
    const product = await this.requireProduct(item.productNo, at('productNo'));
    if (!isPurchasable(product)) {
      throw new OrderError('PRODUCT_NOT_PURCHASABLE', `product ${item.productNo} is not purchasable (enable ${product.enable ?? 'unset'}, inventory ${product.inventory ?? 0})`, { field: at('productNo') });
    }
    if (product.productType === 2) {
      if (!item.projectId) throw new OrderError('PROJECT_REQUIRED', `product ${item.productNo} is shared: projectId (a project code) is required`, { field: at('projectId') });
      const project = product.projectList?.find((p) => p.code === item.projectId);
      if (product.projectList && !project) throw new OrderError('ORDER_INVALID', `project ${item.projectId} is not offered with product ${item.productNo}`, { field: at('projectId') });
      if (project && project.inventory !== undefined && project.inventory !== null && project.inventory < count) {
        throw new OrderError('PRODUCT_NOT_PURCHASABLE', `project ${item.projectId} of product ${item.productNo} has no stock for ${count}`, { field: at('projectId') });
      }
    }
    if (isDynamic(product)) {
      if (!item.appUsername) throw new OrderError('ORDER_INVALID', 'dynamic products need appUsername (the main account)', { field: at('appUsername') });
      const byIpCount = (product.ipCount ?? 0) > 0;
      if (!byIpCount && (product.flow ?? 0) > 0) {
        if (!item.flow) throw new OrderError('ORDER_INVALID', `product ${item.productNo} is sold by traffic: flow (MB) is required`, { field: at('flow') });
        if (item.flow < (product.flow ?? 0)) throw new OrderError('ORDER_INVALID', `flow must be at least ${product.flow} MB for product ${item.productNo}`, { field: at('flow') });
      }
      return;
    }
    if (item.flow !== undefined) throw new OrderError('ORDER_INVALID', 'flow applies to dynamic products only', { field: at('flow') });
    if ((product.inventory ?? 0) < count) {
      throw new OrderError('PRODUCT_NOT_PURCHASABLE', `product ${item.productNo} has ${product.inventory ?? 0} in stock, ${count} asked`, { field: at('count') });
    }
    const maxBw = product.maxBandWidth ?? 0;
    if (item.extBandWidth && maxBw > 0 && item.extBandWidth > maxBw) {
      throw new OrderError('ORDER_INVALID', `extBandWidth must be at most ${maxBw} Mbps for product ${item.productNo}`, { field: at('extBandWidth') });
    }
    if (item.cidrBlocks?.length) {
      if (product.cidrStatus !== 1) throw new OrderError('ORDER_INVALID', `product ${item.productNo} does not sell IP segments`, { field: at('cidrBlocks') });
      const sum = item.cidrBlocks.reduce((s, b) => s + b.count, 0);
      if (sum !== count) throw new OrderError('ORDER_INVALID', `segment counts add up to ${sum}, but count is ${count}`, { field: at('cidrBlocks') });
      const available = new Set(this.catalog.availableSegments(product));
      const missing = item.cidrBlocks.find((b) => !available.has(b.cidr));
      if (missing) throw new OrderError('SEGMENT_UNAVAILABLE', `segment ${missing.cidr} is not offered (offline or unknown) for product ${item.productNo}`, { field: at('cidrBlocks') });
    }
  }
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
