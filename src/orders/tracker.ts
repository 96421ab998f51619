// Following orders to their end. Every order not yet final (3, 4, 5) is polled with a growing delay, and a
// callback (a hint) makes Rotor read it at once; either way only what GetOrder / GetInstance answer is
// stored. Also here: the periodic sweep (unknown intents resent, unprocessed callbacks replayed), the timer of
// the expiry watch (src/orders/expiry.ts: warnings and the optional local auto-renew), and the rotor_orders /
// rotor_instances gauges.
//
// In a fleet (`claims` given: src/fleet/lease.ts LeaseKeeper) one daemon at a time follows a given order:
// it polls only while it holds the lease `order:<appOrderNo>`, lets go when the order is final, and stops
// when the lease is lost (`drop`). A daemon that dies stops renewing; once its lease expires, the next
// sweep of another daemon (which re-follows every open order) takes the order over. Callbacks may reach
// any daemon: they only read the platform and are deduplicated by the shared store.
import { PlatformError } from '../platform/errors.ts';
import { CODE } from '../platform/codes.ts';
import type { Instance, Order } from '../platform/schemas.ts';
import type { Logger } from '../telemetry/logger.ts';
import type { Metrics } from '../telemetry/metrics.ts';
import { UNRESOLVED_STATES, type CallbackKey, type InstanceRecord, type OrderRecord, type OrdersBackend } from '../store/types.ts';
import type { Catalog } from './catalog.ts';
import { realClock, type OrdersClock } from './clock.ts';
import { ExpiryWatch, type AutoRenewSettings } from './expiry.ts';
import type { Placer } from './placer.ts';
import { instanceRecord, instancesOfOrder, orderRecord } from './records.ts';
import { FINAL_ORDER_STATUS, type OrderClaims, type PlatformCaller } from './types.ts';

export interface TrackerSettings {
  /** Delay before the first poll of a new order, then multiplied by `factor` up to `maxMs`. */
  pollInitialMs?: number;
  pollMaxMs?: number;
  pollFactor?: number;
  /** Period of the sweep: resend unknown intents, replay unprocessed callbacks. */
  sweepMs?: number;
  /** Warn when a running instance expires within this many hours. */
  expiryWarnHours?: number;
  expiryCheckMs?: number;
  /** Local auto-renew (src/orders/expiry.ts). */
  autoRenew?: AutoRenewSettings;
}

/** The lease name under which one daemon of a fleet follows an order. */
export const orderLeaseName = (appOrderNo: string): string => `order:${appOrderNo}`;

export interface TrackerOptions extends TrackerSettings {
  client: PlatformCaller;
  store: OrdersBackend;
  catalog: Catalog;
  placer: Placer;
  metrics?: Metrics;
  logger?: Logger;
  clock?: OrdersClock;
  /** Fleet mode: follow an order only while holding its lease. */
  claims?: OrderClaims;
  /**
   * Stores an order first seen final, instead of putOrder: with its order.final event in one transaction
   * (src/events/order-final.ts orderFinalWriter). A crash before it leaves the order open, so it is read
   * again and stored (and announced) then.
   */
  storeFinal?: (order: OrderRecord) => Promise<void>;
}

const PAGE_SIZE = 100;

/**
 * How many instances a page of this order's answer holds: what its first page held when that is not all of them
 * (a first page is a full page, whatever size was asked or echoed: a platform may page by less than asked), else
 * the size asked.
 */
function pageSizeOf(first: Order, received: number): number {
  const total = Number(first.total ?? received);
  return received > 0 && received < total ? Math.min(received, PAGE_SIZE) : PAGE_SIZE;
}

interface Followed {
  attempt: number;
  cancel: () => void;
}

export class Tracker {
  private readonly client: PlatformCaller;
  private readonly store: OrdersBackend;
  private readonly catalog: Catalog;
  private readonly placer: Placer;
  private readonly metrics: Metrics | undefined;
  private readonly logger: Logger | undefined;
  private readonly clock: OrdersClock;
  private readonly s: Required<Omit<TrackerSettings, 'autoRenew' | 'expiryWarnHours'>>;
  private readonly followed = new Map<string, Followed>();
  private readonly refreshing = new Map<string, Promise<OrderRecord | undefined>>();
  private readonly work = new Set<Promise<unknown>>();
  private readonly cancels = new Set<() => void>();
  private readonly expiry: ExpiryWatch;
  private readonly claims: OrderClaims | undefined;
  private readonly storeFinal: ((order: OrderRecord) => Promise<void>) | undefined;
  /** Orders whose lease is being asked for. */
  private readonly claiming = new Set<string>();
  /** Callbacks being acted on: the sweep joins one in flight instead of reading the platform a second time. */
  private readonly handling = new Map<string, Promise<void>>();
  /** When each callback was last acted on, so a sweep whose listing was read before that does not act again. */
  private readonly handled = new Map<string, number>();
  private running = false;

  constructor(options: TrackerOptions) {
    this.client = options.client;
    this.store = options.store;
    this.catalog = options.catalog;
    this.placer = options.placer;
    this.metrics = options.metrics;
    this.logger = options.logger;
    this.clock = options.clock ?? realClock;
    this.claims = options.claims;
    this.storeFinal = options.storeFinal;
    this.s = {
      pollInitialMs: options.pollInitialMs ?? 2_000,
      pollMaxMs: options.pollMaxMs ?? 60_000,
      pollFactor: options.pollFactor ?? 2,
      sweepMs: options.sweepMs ?? 30_000,
      expiryCheckMs: options.expiryCheckMs ?? 600_000,
    };
    this.expiry = new ExpiryWatch({
      store: this.store,
      placer: this.placer,
      clock: this.clock,
      warnHours: options.expiryWarnHours ?? 72,
      autoRenew: options.autoRenew,
      logger: this.logger,
    });
  }

  async start(): Promise<void> {
    if (this.running) return;
    this.running = true;
    for (const order of await this.store.listOrders({ open: true })) this.follow(order, 0);
    this.every(this.s.sweepMs, () => this.sweep());
    this.every(this.s.expiryCheckMs, () => this.checkExpiry());
    await this.sweep();
    await this.checkExpiry();
    await this.updateGauges();
  }

  /** Stops every timer and waits for work in progress. */
  async stop(): Promise<void> {
    this.running = false;
    for (const f of this.followed.values()) f.cancel();
    this.followed.clear();
    for (const c of this.cancels) c();
    this.cancels.clear();
    await this.idle();
  }

  /** Resolves once no refresh, callback or sweep is in progress (tests use it). */
  async idle(): Promise<void> {
    while (this.work.size) await Promise.allSettled([...this.work]);
  }

  /** Orders being followed (merchant numbers). */
  following(): string[] {
    return [...this.followed.keys()];
  }

  /** Polls the order until it is final; `delayMs` before the first poll (default pollInitialMs). */
  follow(order: OrderRecord, delayMs = this.s.pollInitialMs, restart = false): void {
    if (!this.running || FINAL_ORDER_STATUS.has(order.status)) return;
    const key = order.appOrderNo;
    const current = this.followed.get(key);
    if (current && !restart) return;
    if (this.claims && !this.claims.isHeld(orderLeaseName(key))) {
      // Another daemon may follow it; we take over only when its lease is free (the sweep asks again).
      if (this.claiming.has(key)) return;
      this.claiming.add(key);
      void this.track(
        this.claims
          .acquire(orderLeaseName(key))
          .then((ok) => {
            this.claiming.delete(key);
            if (ok) this.follow(order, delayMs, restart);
          })
          .catch((err: unknown) => {
            this.claiming.delete(key);
            this.logger?.warn({ appOrderNo: key, err }, 'could not take the order-tracking lease; the sweep will try again');
          }),
      );
      return;
    }
    current?.cancel();
    const f: Followed = { attempt: current && !restart ? current.attempt : 0, cancel: () => undefined };
    const arm = (ms: number) => {
      f.cancel = this.clock.schedule(ms, () => {
        this.track(
          this.refreshOrder(key)
            .catch((err: unknown) => {
              this.logger?.warn({ appOrderNo: key, err }, 'order poll failed');
              return undefined;
            })
            .then((o) => {
              if (this.followed.get(key) !== f) return;
              if (o && FINAL_ORDER_STATUS.has(o.status)) {
                this.followed.delete(key);
                this.letGo(key);
                return;
              }
              f.attempt += 1;
              arm(Math.min(this.s.pollMaxMs, this.s.pollInitialMs * this.s.pollFactor ** f.attempt));
            }),
        );
      });
    };
    this.followed.set(key, f);
    arm(delayMs);
  }

  /**
   * Reads one order (by platform or merchant number) with all its instances from the platform and stores
   * it. Undefined when the platform does not know it. A final order also has its instances re-read.
   */
  refreshOrder(no: string): Promise<OrderRecord | undefined> {
    const running = this.refreshing.get(no);
    if (running) return running;
    const p = this.track(this.doRefreshOrder(no)).finally(() => this.refreshing.delete(no));
    this.refreshing.set(no, p);
    return p;
  }

  private async doRefreshOrder(no: string): Promise<OrderRecord | undefined> {
    const local = await this.store.getOrder(no);
    const platformNo = local?.orderNo ?? undefined;
    // Ours by its platform number, then by our merchant number (the idempotency key: the platform number is
    // the platform's, and a platform that lost an order may have given its number to another).
    const queries: { orderNo?: string; appOrderNo?: string }[] = platformNo
      ? [{ orderNo: platformNo }, { appOrderNo: local!.appOrderNo }]
      : no.length <= 32
        ? [{ orderNo: no }, { appOrderNo: no }]
        : [{ appOrderNo: no }];
    let first: Order | undefined;
    let query: { orderNo?: string; appOrderNo?: string } | undefined;
    for (const q of queries) {
      let answer: Order;
      try {
        answer = await this.client.call('GetOrder', { ...q, page: 1, pageSize: PAGE_SIZE });
      } catch (err) {
        if (err instanceof PlatformError && err.platformCode === CODE.ORDER_NOT_FOUND) continue;
        throw err;
      }
      if (local && !isSameOrder(answer, local)) {
        this.logger?.error(
          { appOrderNo: local.appOrderNo, orderNo: answer.orderNo, answeredAppOrderNo: answer.appOrderNo ?? null, type: answer.type },
          "the platform answered for another order under this order's number; not stored, asking by the merchant number",
        );
        continue;
      }
      first = answer;
      query = q;
      break;
    }
    if ((!first || !query) && local && platformNo) {
      await this.lost(local);
      return undefined;
    }
    if (!first || !query) return undefined;
    const instances: Instance[] = [...(first.instances ?? [])];
    const total = first.total ?? instances.length;
    const pages = Math.ceil(total / pageSizeOf(first, instances.length));
    for (let page = 2; page <= pages && instances.length < total; page++) {
      const next = await this.client.call('GetOrder', { ...query, page, pageSize: PAGE_SIZE });
      if (!next.instances?.length) break;
      instances.push(...next.instances);
    }
    const now = this.clock.now();
    const existing = local ?? (first.appOrderNo ? await this.store.getOrder(first.appOrderNo) : undefined);
    const order = orderRecord(first, existing, now);
    await this.storeInstances(instances);
    if (this.storeFinal && FINAL_ORDER_STATUS.has(order.status) && (!existing || !FINAL_ORDER_STATUS.has(existing.status)))
      await this.storeFinal(order);
    else await this.store.putOrder(order);
    if (FINAL_ORDER_STATUS.has(order.status)) {
      if (!existing || !FINAL_ORDER_STATUS.has(existing.status)) {
        const involved = instancesOfOrder(
          order,
          instances.map((i) => i.instanceNo),
        );
        if (involved.length)
          await this.refreshInstances(involved).catch((err: unknown) =>
            this.logger?.warn({ orderNo: order.orderNo, err }, 'reading the instances of a finished order failed'),
          );
        const level = order.status === 3 ? 'info' : 'warn';
        this.logger?.[level](
          { orderNo: order.orderNo, appOrderNo: order.appOrderNo, type: order.type, status: order.status },
          'order finished',
        );
      }
      const f = this.followed.get(order.appOrderNo);
      f?.cancel();
      this.followed.delete(order.appOrderNo);
      this.letGo(order.appOrderNo);
    } else {
      this.follow(order);
    }
    await this.updateGauges();
    return order;
  }

  /**
   * An order the platform accepted (it has a platform number) that the platform no longer knows by either
   * number (a platform that lost its last moments, e.g. the embedded sandbox killed): its journal entry
   * becomes 'unknown' and is sent again with the same merchant number — which the platform does not process
   * twice, so an order it does hold after all is answered, not placed again — and its platform number is
   * dropped from the record until the platform answers anew.
   */
  private async lost(local: OrderRecord): Promise<void> {
    const entry = await this.store.getJournal(local.appOrderNo);
    if (!entry || entry.state !== 'accepted') {
      this.logger?.error(
        { appOrderNo: local.appOrderNo, orderNo: local.orderNo },
        'the platform no longer knows this order; nothing journaled to send again',
      );
      return;
    }
    const reason = { code: 'ORDER_LOST', message: `the platform no longer knows ${local.orderNo ?? ''} under ${local.appOrderNo}` };
    await this.store.updateJournal(local.appOrderNo, { state: 'unknown', result: reason, orderNo: null });
    await this.store.putOrder({ ...local, orderNo: null, updatedAt: this.clock.now() });
    this.logger?.error(
      { appOrderNo: local.appOrderNo, orderNo: local.orderNo, operation: entry.operation },
      'the platform no longer knows this order; it is sent again with its merchant number',
    );
    const f = this.followed.get(local.appOrderNo);
    f?.cancel();
    this.followed.delete(local.appOrderNo);
    this.letGo(local.appOrderNo);
    if (this.running) {
      void this.track(
        this.placer
          .resumeIntents()
          .catch((err: unknown) => this.logger?.warn({ err }, 'resending a lost order failed; the sweep tries again')),
      );
    }
  }

  /**
   * Stops following an order without reading it again: its lease was lost (expired while Redis was away,
   * or taken over by another daemon), so another daemon follows it now.
   */
  drop(appOrderNo: string): void {
    const f = this.followed.get(appOrderNo);
    if (!f) return;
    f.cancel();
    this.followed.delete(appOrderNo);
  }

  /** Fleet mode: hands a finished order's lease back. */
  private letGo(appOrderNo: string): void {
    const name = orderLeaseName(appOrderNo);
    if (this.claims?.isHeld(name)) void this.claims.release(name).catch(() => undefined);
  }

  /** Reads instances (GetInstance, 100 at a time) and stores them; numbers the platform does not know are skipped. */
  async refreshInstances(instanceNos: string[]): Promise<InstanceRecord[]> {
    const stored: InstanceRecord[] = [];
    for (let i = 0; i < instanceNos.length; i += PAGE_SIZE) {
      const batch = instanceNos.slice(i, i + PAGE_SIZE);
      let list: Instance[];
      try {
        list = await this.client.call('GetInstance', { instances: batch });
      } catch (err) {
        if (err instanceof PlatformError && err.platformCode === CODE.INSTANCE_NOT_FOUND) continue;
        throw err;
      }
      stored.push(...(await this.storeInstances(list)));
    }
    await this.updateGauges();
    return stored;
  }

  private async storeInstances(list: Instance[]): Promise<InstanceRecord[]> {
    if (!list.length) return [];
    const now = this.clock.now();
    const records: InstanceRecord[] = [];
    for (const i of list) records.push(instanceRecord(i, await this.store.getInstance(i.instanceNo), now));
    await this.store.putInstances(records);
    return records;
  }

  /** A recorded callback: read what it points at, then mark it processed. Failures leave it for the sweep. */
  async onCallback(key: CallbackKey, alreadyProcessed = false): Promise<void> {
    await this.track(this.processCallback(key, alreadyProcessed));
  }

  private processCallback(key: CallbackKey, alreadyProcessed: boolean): Promise<void> {
    const id = callbackId(key);
    const running = this.handling.get(id);
    if (running) return running;
    const done = this.actOnCallback(key, alreadyProcessed).then(() => {
      this.handled.set(id, performance.now());
    });
    void done.finally(() => this.handling.delete(id)).catch(() => undefined);
    this.handling.set(id, done);
    return done;
  }

  private async actOnCallback(key: CallbackKey, alreadyProcessed: boolean): Promise<void> {
    switch (key.type) {
      case 'order': {
        const local = await this.store.getOrder(key.no);
        // A repeat of a callback already acted on, for an order already final, needs nothing more.
        if (alreadyProcessed && local && FINAL_ORDER_STATUS.has(local.status)) return;
        const order = await this.refreshOrder(key.no);
        if (!order) this.logger?.warn({ no: key.no }, 'order callback for an order the platform does not know');
        else if (!FINAL_ORDER_STATUS.has(order.status)) this.follow(order, this.s.pollInitialMs, true);
        break;
      }
      case 'instance':
        await this.refreshInstances([key.no]);
        break;
      case 'product':
        await this.catalog.refreshProduct(key.no);
        break;
    }
    await this.store.markCallbackProcessed(key);
  }

  /** Resends unknown intents and replays callbacks recorded but not processed (e.g. before a crash). */
  async sweep(): Promise<void> {
    await this.track(
      (async () => {
        if ((await this.store.listJournal(UNRESOLVED_STATES)).length) await this.placer.resumeIntents();
        const listedAt = performance.now();
        for (const [id, at] of this.handled) if (at < listedAt) this.handled.delete(id);
        for (const cb of await this.store.listCallbacks({ processed: false })) {
          // Acted on (and marked) while the listing was being read: the row is stale, not unprocessed.
          if (this.handled.has(callbackId(cb))) continue;
          await this.processCallback(cb, false).catch((err: unknown) =>
            this.logger?.warn({ type: cb.type, no: cb.no, err }, 'callback replay failed'),
          );
        }
        const now = this.clock.now();
        for (const order of await this.store.listOrders({ open: true })) {
          if (!order.orderNo) continue;
          // In a fleet the daemon that placed an order claims it as the order is accepted; the others leave
          // a new order to it for one sweep period instead of racing it for the lease.
          if (this.claims && now - order.createdAt < this.s.sweepMs) continue;
          this.follow(order);
        }
      })().catch((err: unknown) => this.logger?.warn({ err }, 'order sweep failed')),
    );
  }

  /** Runs the expiry watch once (its timer runs it every expiryCheckMs). */
  checkExpiry(): Promise<void> {
    return this.expiry.check();
  }

  async updateGauges(): Promise<void> {
    if (!this.metrics) return;
    const [orders, instances] = await Promise.all([this.store.countOrders(), this.store.countInstances()]);
    this.metrics.orders.reset();
    for (const o of orders) this.metrics.orders.set({ type: String(o.type), status: String(o.status) }, o.count);
    this.metrics.instances.reset();
    for (const i of instances) this.metrics.instances.set({ status: String(i.status ?? 'unknown') }, i.count);
  }

  /** Schedules a reset poll with backoff until the reset settles. */
  followReset(resetNo: string, attempt = 0): void {
    if (!this.running || attempt > 20) return;
    const cancel = this.clock.schedule(Math.min(this.s.pollMaxMs, this.s.pollInitialMs * this.s.pollFactor ** attempt), () => {
      this.cancels.delete(cancel);
      this.track(
        this.placer
          .pollReset(resetNo)
          .then((r) => {
            if (r.status < 3) this.followReset(resetNo, attempt + 1);
          })
          .catch((err: unknown) => {
            this.logger?.warn({ resetNo, err }, 'password reset poll failed');
            this.followReset(resetNo, attempt + 1);
          }),
      );
    });
    this.cancels.add(cancel);
  }

  /** Runs fn every ms while running (the next run is armed after the previous one ends). */
  private every(ms: number, fn: () => Promise<void>): void {
    const arm = () => {
      const cancel = this.clock.schedule(ms, () => {
        this.cancels.delete(cancel);
        if (!this.running) return;
        void this.track(fn().catch(() => undefined)).finally(() => {
          if (this.running) arm();
        });
      });
      this.cancels.add(cancel);
    };
    arm();
  }

  private track<T>(p: Promise<T>): Promise<T> {
    this.work.add(p);
    void p.finally(() => this.work.delete(p)).catch(() => undefined);
    return p;
  }
}

/** Whether a GetOrder answer is about this stored order: its merchant number when the answer has one, else its type. */
function isSameOrder(answer: Order, local: OrderRecord): boolean {
  if (answer.appOrderNo) return answer.appOrderNo === local.appOrderNo;
  return answer.type === local.type;
}

function callbackId(key: CallbackKey): string {
  return `${key.type}\u0000${key.no}\u0000${key.op}`;
}
