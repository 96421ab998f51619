// Inspection and fault knobs for tests: the same functions back the Simulator object's `inspect` and
// `faults` and the HTTP routes under /sim (server.ts). Nothing here is reachable on the seed's paths.
import type { Fault } from '../contracts.ts';
import type { SimProduct } from './catalog.ts';
import type { CallbackRecord } from './callbacks.ts';
import type { SimContext } from './context.ts';
import type { FaultSettings, OrderOutcome } from './faults.ts';
import { formatMoney, parseMoney } from './money.ts';
import { instanceRecord, orderRecord } from './records.ts';
import { ORDER_TYPE } from './state.ts';

export interface ChargeView {
  merchantNo: string;
  operation: string;
  orderNo: string;
  amount: string;
  at: number;
}
export interface BalanceView {
  productNo: string;
  totalBytes: number;
  usedBytes: number;
  remainingBytes: number;
  ipTotal: number;
  ipUsed: number;
  whitelist: string[];
}

export function createInspect(ctx: SimContext) {
  const { state } = ctx;
  return {
    merchant() {
      const m = state.merchant;
      return { appName: m.appName, coin: formatMoney(m.coin), credit: formatMoney(m.credit), status: m.status, callbackUrl: m.callbackUrl };
    },
    /** Charges and refunds (negative), optionally for one merchant number. */
    charges(merchantNo?: string): ChargeView[] {
      return state.charges
        .filter((c) => merchantNo === undefined || c.merchantNo === merchantNo)
        .map((c) => ({ merchantNo: c.merchantNo, operation: c.operation, orderNo: c.orderNo, amount: formatMoney(c.amount), at: c.at }));
    },
    callbacks(filter: { type?: string; no?: string } = {}): CallbackRecord[] {
      return ctx.callbacks.records.filter((r) => (!filter.type || r.type === filter.type) && (!filter.no || r.no === filter.no));
    },
    orders() {
      return [...state.orders.values()].map((o) => ({
        orderNo: o.orderNo,
        appOrderNo: o.appOrderNo,
        kind: o.kind,
        type: ORDER_TYPE[o.kind],
        status: o.status,
        amount: formatMoney(o.amount),
        refunded: formatMoney(o.refunded),
        instances: o.lines.map((l) => l.instanceNo),
      }));
    },
    order(no: string) {
      const o = state.orders.get(no) ?? state.orders.get(state.merchantNos.get(no)?.orderNo ?? '');
      return o ? orderRecord(state, o, 1, 100) : undefined;
    },
    instances() {
      return [...state.instances.values()].map((i) => ({
        ...instanceRecord(state, i),
        pwd: i.pwd,
        relayedBytes: state.instanceBytes.get(i.instanceNo) ?? 0,
      }));
    },
    accounts() {
      return [...state.mains.values()].map((m) => ({
        appUsername: m.appUsername,
        username: m.username,
        status: m.status,
        authStatus: m.authStatus,
        subs: [...state.subs.values()]
          .filter((s) => s.main === m.appUsername)
          .map((s) => ({
            appUsername: s.appUsername,
            username: s.username,
            status: s.status,
            limitMb: s.limitMb,
            limits: Object.fromEntries(s.limits),
            used: Object.fromEntries(s.used),
          })),
      }));
    },
    balance(account: string, productNo: string): BalanceView | undefined {
      const b = state.mains.get(account)?.balances.get(productNo);
      if (!b) return undefined;
      return {
        productNo,
        totalBytes: b.totalBytes,
        usedBytes: b.usedBytes,
        remainingBytes: Math.max(0, b.totalBytes - b.usedBytes),
        ipTotal: b.ipTotal,
        ipUsed: b.ipUsed,
        whitelist: [...b.whitelist],
      };
    },
    balances() {
      return [...state.mains.values()].flatMap((m) =>
        [...m.balances.keys()].map((p) => ({ account: m.appUsername, ...this.balance(m.appUsername, p) })),
      );
    },
    /** Calls to the seed's paths still waiting out the latency knob (they act when it ends). */
    heldByLatency(): number {
      return ctx.faults.held;
    },
    /** Calls on the seed's paths being handled now, the most at once so far, and those refused by `maxInFlight`. */
    inFlight(): { now: number; peak: number; refused: number } {
      return { now: ctx.faults.inFlight, peak: ctx.faults.peakInFlight, refused: ctx.faults.busyRefused };
    },
    /** Calls received per operation on the seed's paths, e.g. {DrawByPwd: 3}. */
    calls(): Record<string, number> {
      return Object.fromEntries(ctx.calls);
    },
    /** Platform time (epoch ms). */
    now(): number {
      return ctx.clock.now();
    },
  };
}
export type Inspect = ReturnType<typeof createInspect>;

export type ProductPatch = Partial<Pick<SimProduct, 'enable' | 'inventory' | 'costPrice' | 'authorized' | 'changeProxy'>>;
export interface MerchantPatch {
  coin?: string;
  credit?: string;
  status?: number;
  callbackUrl?: string;
  afterSale?: boolean;
  changeProxy?: boolean;
}

export function createFaultControl(ctx: SimContext) {
  return {
    /** latency, code-500 failures, dropped replies, forced order outcomes, callbacks on/off */
    set(settings: FaultSettings): void {
      ctx.faults.set(settings);
      if (settings.callbacks !== undefined) ctx.callbacks.enabled = settings.callbacks;
    },
    reset(): void {
      ctx.faults.reset();
      ctx.callbacks.enabled = true;
      ctx.upstreams?.setFault('*', null);
    },
    latency(ms: number): void {
      ctx.faults.set({ latencyMs: ms });
    },
    failNext(count: number, operation?: string): void {
      ctx.faults.set({ fail: { count, ...(operation ? { operation } : {}) } });
    },
    failFraction(fraction: number, operation?: string): void {
      ctx.faults.set({ fail: { count: Infinity, fraction, ...(operation ? { operation } : {}) } });
    },
    dropNext(count: number, operation?: string): void {
      ctx.faults.set({ drop: { count, ...(operation ? { operation } : {}) } });
    },
    callbacks(on: boolean): void {
      ctx.callbacks.enabled = on;
    },
    orderOutcome(outcome: OrderOutcome | null, count = 1): void {
      ctx.faults.set({ orderOutcome: outcome ? { outcome, count } : null });
    },
    /** Upstream faults (H3's knobs) by port or '*'. */
    upstream(port: number | '*', fault: Fault | null): void {
      ctx.upstreams?.setFault(port, fault);
    },
    advanceClock(ms: number): void {
      ctx.clock.advance(ms);
    },
    clockSpeed(speed: number): void {
      ctx.clock.setSpeed(speed);
    },
    /** Changes a product and sends a product callback. */
    updateProduct(productNo: string, patch: ProductPatch): boolean {
      const p = ctx.state.products.get(productNo);
      if (!p) return false;
      Object.assign(p, patch);
      ctx.state.touch();
      ctx.callbacks.send('product', productNo, '');
      return true;
    },
    /** Sets an instance's status (e.g. 6 stopped) and sends an instance callback. */
    setInstanceStatus(instanceNo: string, status: number): boolean {
      const i = ctx.state.instances.get(instanceNo);
      if (!i) return false;
      i.status = status;
      ctx.state.touch();
      ctx.callbacks.send('instance', instanceNo, '');
      return true;
    },
    setMerchant(patch: MerchantPatch): void {
      const m = ctx.state.merchant;
      ctx.state.touch();
      if (patch.coin !== undefined) m.coin = parseMoney(patch.coin);
      if (patch.credit !== undefined) m.credit = parseMoney(patch.credit);
      if (patch.status !== undefined) m.status = patch.status;
      if (patch.callbackUrl !== undefined) {
        m.callbackUrl = patch.callbackUrl;
        ctx.callbacks.flushDeferred();
      }
      if (patch.afterSale !== undefined) m.afterSale = patch.afterSale;
      if (patch.changeProxy !== undefined) m.changeProxy = patch.changeProxy;
    },
    /** A sub account deleted on the platform behind the merchant's back (not a main account's own); false when none. */
    deleteSubAccount(appUsername: string): boolean {
      if (ctx.state.mains.has(appUsername)) return false;
      ctx.state.touch();
      return ctx.state.subs.delete(appUsername);
    },
  };
}
export type FaultControl = ReturnType<typeof createFaultControl>;
