// The asynchronous life of an order: accepted (1) → processing (2) at half the delay → final at the delay:
// succeeded (3), failed (4) or partially completed (5). Each line succeeds or fails on its own; a failed
// line is refunded. Then instance callbacks for instances that reached a stable status, then the order
// callback with op = the order type.
import { CODE } from '../../platform/codes.ts';
import type { SimContext } from './context.ts';
import { SimError } from './errors.ts';
import { ORDER_TYPE, type Instance, type Order, type OrderKind } from './state.ts';
import { addPeriod } from './time.ts';
import { bytesPerMb } from './money.ts';

export const ORDER_STATUS = { pending: 1, processing: 2, succeeded: 3, failed: 4, partial: 5 } as const;
export const INSTANCE_STATUS = { toCreate: 1, creating: 2, running: 3, stopped: 6, closed: 10, released: 11 } as const;

/** The earlier answer for a repeated merchant number, or null when the number is new. */
export function repeated(ctx: SimContext, kind: OrderKind, merchantNo: string, fingerprint: string): Order | null {
  const prior = ctx.state.merchantNos.get(merchantNo);
  if (!prior) return null;
  const familyOf = (k: OrderKind) => (k === 'aftersale' ? 'release-aftersale' : k);
  if (prior.kind !== kind && familyOf(prior.kind) !== familyOf(kind)) {
    throw new SimError(CODE.INVALID_PARAMS, `merchant number ${merchantNo} belongs to a ${prior.kind} order`);
  }
  const order = ctx.state.orders.get(prior.orderNo);
  if (!order) return null;
  // Seed 7 has a code for "the same merchant order cannot be renewed twice": a renew number reused for
  // different instances gets it; the same request again gets the first answer.
  if (kind === 'renew' && order.fingerprint !== fingerprint) throw new SimError(CODE.RENEW_TWICE);
  return order;
}

export function registerOrder(ctx: SimContext, order: Order): void {
  ctx.state.orders.set(order.orderNo, order);
  ctx.state.merchantNos.set(order.appOrderNo, { kind: order.kind, orderNo: order.orderNo });
  const half = Math.floor(ctx.orderDelayMs / 2);
  ctx.clock.schedule(half, () => {
    toProcessing(ctx, order);
    ctx.state.touch();
  });
  ctx.clock.schedule(ctx.orderDelayMs, () => finishing(ctx, order));
}

/** An order read back from a saved state while not yet final: it finishes after the usual delay. */
export function resumeOrder(ctx: SimContext, order: Order): void {
  ctx.clock.schedule(ctx.orderDelayMs, () => finishing(ctx, order));
}

/** A timer's finish: the state marked changed when it starts and when its awaited steps are done (persist.ts). */
function finishing(ctx: SimContext, order: Order): void {
  ctx.state.touch();
  void finish(ctx, order).finally(() => ctx.state.touch());
}

function toProcessing(ctx: SimContext, order: Order): void {
  if (order.status !== ORDER_STATUS.pending) return;
  order.status = ORDER_STATUS.processing;
  if (order.kind !== 'open') return;
  for (const line of order.lines) {
    const inst = ctx.state.instances.get(line.instanceNo);
    if (inst && inst.status === INSTANCE_STATUS.toCreate) inst.status = INSTANCE_STATUS.creating;
  }
}

async function finish(ctx: SimContext, order: Order): Promise<void> {
  toProcessing(ctx, order);
  if (order.status !== ORDER_STATUS.processing) return;
  const outcome = ctx.faults.takeOrderOutcome();
  const n = order.lines.length;
  const firstFailing = outcome === 'fail' ? 0 : outcome === 'partial' ? (n >= 2 ? Math.ceil(n / 2) : 0) : n;
  const touched: Instance[] = [];
  for (const [index, line] of order.lines.entries()) {
    const inst = ctx.state.instances.get(line.instanceNo);
    let ok = index < firstFailing && inst !== undefined;
    if (ok && inst) ok = await applyLine(ctx, order, inst, line.cycleTimes);
    line.ok = ok;
    if (!ok) {
      order.refunded += line.amount;
      if (line.amount) ctx.state.charge(order.appOrderNo, 'refund', order.orderNo, -line.amount, ctx.clock.now());
      if (inst) undoLine(ctx, order, inst);
    }
    if (inst) {
      if (inst.changing === order.orderNo) inst.changing = null;
      if (order.kind === 'open' || ((order.kind === 'release' || order.kind === 'aftersale') && ok)) touched.push(inst);
    }
  }
  const okCount = order.lines.filter((l) => l.ok).length;
  order.status = okCount === n ? ORDER_STATUS.succeeded : okCount === 0 ? ORDER_STATUS.failed : ORDER_STATUS.partial;
  for (const inst of touched) ctx.callbacks.send('instance', inst.instanceNo, '');
  ctx.callbacks.send('order', order.orderNo, String(ORDER_TYPE[order.kind]));
}

async function applyLine(ctx: SimContext, order: Order, inst: Instance, cycleTimes: number): Promise<boolean> {
  const { state } = ctx;
  const product = state.products.get(inst.productNo);
  const nowMs = ctx.clock.now();
  const nowSec = Math.floor(nowMs / 1000);
  switch (order.kind) {
    case 'open': {
      if (inst.dynamic) {
        const balance = ensureBalance(ctx, inst.mainAccount, inst.productNo);
        if (!balance || !product) return false;
        if (product.ipCount > 0) balance.ipTotal += inst.flowTotal;
        else balance.totalBytes += inst.flowTotal * bytesPerMb(product.flowConversionBase);
      } else {
        try {
          inst.port = ctx.upstreams ? await ctx.upstreams.instancePort(inst.instanceNo) : 0;
        } catch {
          return false;
        }
      }
      inst.status = INSTANCE_STATUS.running;
      inst.openAt = nowMs;
      inst.userExpired = product ? addPeriod(nowSec, product.unit, product.duration * cycleTimes) : 0;
      if (!inst.dynamic) watchExpiry(ctx, inst);
      return true;
    }
    case 'renew': {
      if (!product || (inst.status !== INSTANCE_STATUS.running && inst.status !== INSTANCE_STATUS.stopped)) return false;
      const from = inst.userExpired > 0 ? inst.userExpired : nowSec;
      inst.userExpired = addPeriod(from, product.unit, product.duration * cycleTimes);
      inst.renewAt = nowMs;
      if (inst.status === INSTANCE_STATUS.stopped && inst.userExpired * 1000 > nowMs) {
        inst.status = INSTANCE_STATUS.running;
        ctx.callbacks.send('instance', inst.instanceNo, '');
      }
      watchExpiry(ctx, inst);
      return true;
    }
    case 'release':
    case 'aftersale': {
      const stoppedAfterSale = order.kind === 'aftersale' && inst.status === INSTANCE_STATUS.stopped;
      if (inst.status !== INSTANCE_STATUS.running && !stoppedAfterSale) return false;
      inst.status = INSTANCE_STATUS.released;
      inst.releaseAt = nowMs;
      if (ctx.upstreams) await ctx.upstreams.closeInstance(inst.instanceNo).catch(() => undefined);
      if (product) product.inventory += 1;
      return true;
    }
    case 'change': {
      if (inst.status !== INSTANCE_STATUS.running) return false;
      try {
        if (ctx.upstreams) {
          await ctx.upstreams.closeInstance(inst.instanceNo);
          inst.port = await ctx.upstreams.instancePort(inst.instanceNo);
        } else {
          inst.port += 1;
        }
      } catch {
        return false;
      }
      inst.username = `u${state.token(9)}`;
      inst.pwd = state.token(14);
      inst.extendIp = nextExitIp(ctx, inst.extendIp);
      return true;
    }
  }
}

/** A failed line leaves nothing behind: an unopened instance is closed and its stock returned. */
function undoLine(ctx: SimContext, order: Order, inst: Instance): void {
  if (order.kind !== 'open') return;
  inst.status = INSTANCE_STATUS.closed;
  const product = ctx.state.products.get(inst.productNo);
  if (product && !inst.dynamic) product.inventory += 1;
  if (inst.extendIp) ctx.state.soldIps.delete(inst.extendIp);
}

function ensureBalance(ctx: SimContext, account: string, productNo: string) {
  const main = ctx.state.mains.get(account);
  if (!main) return undefined;
  let b = main.balances.get(productNo);
  if (!b) {
    b = { productNo, totalBytes: 0, usedBytes: 0, ipTotal: 0, ipUsed: 0, whitelist: [], log: [] };
    main.balances.set(productNo, b);
  }
  return b;
}
export { ensureBalance };

/** A different public exit address for a changed instance (same /24 when there is one). */
function nextExitIp(ctx: SimContext, current: string): string {
  const m = /^(\d+\.\d+\.\d+)\.(\d+)$/.exec(current);
  const prefix = m ? m[1] : '198.18.0';
  for (let i = 0; i < 254; i++) {
    const candidate = `${prefix}.${1 + Math.floor(ctx.state.random() * 254)}`;
    if (candidate !== current && !ctx.state.soldIps.has(candidate)) {
      ctx.state.soldIps.delete(current);
      ctx.state.soldIps.add(candidate);
      return candidate;
    }
  }
  return current;
}

/** After expiry a static instance stops (6) and may still be renewed for this long; then it is closed (10). */
export const RENEW_GRACE_MS = 7 * 86_400_000;

/** One pending clock check per instance (a renewal replaces it); each check re-reads userExpired. */
export function watchExpiry(ctx: SimContext, inst: Instance): void {
  inst.unwatch?.();
  inst.unwatch = undefined;
  if (!inst.userExpired) return;
  const later = (ms: number) => {
    inst.unwatch = ctx.clock.schedule(ms, check);
  };
  const check = () => {
    if (inst.status !== INSTANCE_STATUS.running && inst.status !== INSTANCE_STATUS.stopped) return;
    ctx.state.touch();
    const now = ctx.clock.now();
    const expiry = inst.userExpired * 1000;
    if (expiry > now) {
      later(expiry - now);
      return;
    }
    if (inst.status === INSTANCE_STATUS.running) {
      inst.status = INSTANCE_STATUS.stopped;
      ctx.callbacks.send('instance', inst.instanceNo, '');
    }
    if (expiry + RENEW_GRACE_MS > now) {
      later(expiry + RENEW_GRACE_MS - now);
      return;
    }
    inst.status = INSTANCE_STATUS.closed;
    void ctx.upstreams?.closeInstance(inst.instanceNo).catch(() => undefined);
    ctx.callbacks.send('instance', inst.instanceNo, '');
  };
  later(inst.userExpired * 1000 - ctx.clock.now());
}
