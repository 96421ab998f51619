// Operations on existing static instances: renew, release, after-sale, change proxy, reset password, and
// the order and instance queries.
import { CODE } from '../../platform/codes.ts';
import type { In, SimContext } from './context.ts';
import { SimError } from './errors.ts';
import { INSTANCE_STATUS, ORDER_STATUS, registerOrder, repeated } from './lifecycle.ts';
import { formatMoney, parseMoney } from './money.ts';
import { instanceRecord, orderRecord } from './records.ts';
import type { Instance, Order, OrderKind, OrderLine } from './state.ts';

function newOrder(
  ctx: SimContext,
  kind: OrderKind,
  appOrderNo: string,
  lines: OrderLine[],
  fingerprint: string,
  accepted: (orderNo: string, amount: number) => Record<string, unknown>,
): Order {
  const orderNo = ctx.state.nextId(kind === 'change' ? 'SC' : 'SO');
  const amount = lines.reduce((s, l) => s + l.amount, 0);
  const order: Order = {
    orderNo,
    appOrderNo,
    kind,
    status: ORDER_STATUS.pending,
    amount,
    refunded: 0,
    lines,
    createdAt: ctx.clock.now(),
    accepted: accepted(orderNo, amount),
    fingerprint,
  };
  return order;
}

function runningStatic(ctx: SimContext, instanceNo: string, missing: number, alsoStopped = false): Instance {
  const inst = ctx.state.instances.get(instanceNo);
  const usable = inst?.status === INSTANCE_STATUS.running || (alsoStopped && inst?.status === INSTANCE_STATUS.stopped);
  if (!inst || inst.dynamic || !usable) throw new SimError(missing, instanceNo);
  return inst;
}

export function instanceRenew(ctx: SimContext, params: In<'InstanceRenew'>): unknown {
  const fingerprint = JSON.stringify([...params.instances].sort((a, b) => a.instanceNo.localeCompare(b.instanceNo)));
  const prior = repeated(ctx, 'renew', params.appOrderNo, fingerprint);
  if (prior) return prior.accepted;
  const lines = params.instances.map((item) => {
    // a stopped (expired) instance can be renewed within the grace period; after it, it is closed
    const inst = runningStatic(ctx, item.instanceNo, CODE.RENEW_NO_INSTANCE, true);
    const product = ctx.state.products.get(inst.productNo);
    if (!product) throw new SimError(CODE.RENEW_NO_INSTANCE, item.instanceNo);
    // cycleTimes wins; else the compatibility `duration` in the product's unit; else the original period
    const cycleTimes =
      item.cycleTimes ?? (item.duration && product.duration ? Math.max(1, Math.round(item.duration / product.duration)) : inst.cycleTimes);
    const amount = (parseMoney(product.costPrice) + parseMoney(product.bandWidthPrice) * inst.extBandWidth) * cycleTimes;
    return { instanceNo: inst.instanceNo, amount, cycleTimes };
  });
  const total = lines.reduce((s, l) => s + l.amount, 0);
  if (total > ctx.state.spendable()) throw new SimError(CODE.RENEW_BALANCE, `needs ${formatMoney(total)}`);
  const order = newOrder(ctx, 'renew', params.appOrderNo, lines, fingerprint, (orderNo, amount) => ({
    orderNo,
    appOrderNo: params.appOrderNo,
    amount: formatMoney(amount),
  }));
  ctx.state.charge(params.appOrderNo, 'InstanceRenew', order.orderNo, order.amount, ctx.clock.now());
  registerOrder(ctx, order);
  return order.accepted;
}

function release(ctx: SimContext, kind: 'release' | 'aftersale', merchantNo: string, instances: string[]): unknown {
  const fingerprint = JSON.stringify([...instances].sort());
  const prior = repeated(ctx, kind, merchantNo, fingerprint);
  if (prior) return prior.accepted;
  if (kind === 'aftersale' && !ctx.state.merchant.afterSale)
    throw new SimError(CODE.INVALID_PARAMS, 'after-sale is not enabled for this merchant');
  const nowSec = Math.floor(ctx.clock.now() / 1000);
  const chosen = instances.map((no) => {
    const stopped = ctx.state.instances.get(no);
    if (kind === 'release' && stopped && !stopped.dynamic && stopped.status === INSTANCE_STATUS.stopped)
      throw new SimError(CODE.RELEASE_PERIOD, no);
    const inst = runningStatic(ctx, no, CODE.RELEASE_NO_INSTANCE, kind === 'aftersale');
    if (inst.changing) throw new SimError(CODE.RELEASE_NO_INSTANCE, `${no} has an order in progress`);
    // an ordinary release is only possible before expiry; after-sale exists for the cases it excludes
    if (kind === 'release' && inst.userExpired > 0 && inst.userExpired < nowSec) throw new SimError(CODE.RELEASE_PERIOD, no);
    return inst;
  });
  const lines = chosen.map((inst) => ({ instanceNo: inst.instanceNo, amount: 0, cycleTimes: 0 }));
  const order = newOrder(ctx, kind, merchantNo, lines, fingerprint, (orderNo) => ({ orderNo, appOrderNo: merchantNo, amount: '0.00' }));
  for (const inst of chosen) inst.changing = order.orderNo;
  registerOrder(ctx, order);
  return order.accepted;
}

export function instanceRelease(ctx: SimContext, params: In<'InstanceRelease'>): unknown {
  return release(ctx, 'release', params.orderNo, params.instances);
}

export function instanceAfterSale(ctx: SimContext, params: In<'InstanceAfterSale'>): unknown {
  return release(ctx, 'aftersale', params.orderNo, params.instances);
}

export function changeProxy(ctx: SimContext, params: In<'ChangeProxy'>): unknown {
  const fingerprint = params.instanceNo;
  const prior = repeated(ctx, 'change', params.appOrderNo, fingerprint);
  if (prior) return { ...prior.accepted, status: prior.status };
  const inst = ctx.state.instances.get(params.instanceNo);
  if (!inst || inst.dynamic) throw new SimError(CODE.INSTANCE_NOT_FOUND, params.instanceNo);
  if (inst.status !== INSTANCE_STATUS.running) throw new SimError(CODE.INVALID_PARAMS, 'instance is not running');
  const product = ctx.state.products.get(inst.productNo);
  if (!product || product.changeProxy !== 1 || !ctx.state.merchant.changeProxy)
    throw new SimError(CODE.INVALID_PARAMS, 'change proxy is not supported for this product');
  if (params.targetProductNo && params.targetProductNo !== inst.productNo)
    throw new SimError(CODE.INVALID_PARAMS, 'targetProductNo is reserved');
  if (inst.changing) throw new SimError(CODE.INVALID_PARAMS, 'a change is already in progress for this instance');
  const lines = [{ instanceNo: inst.instanceNo, amount: 0, cycleTimes: 0 }];
  const order = newOrder(ctx, 'change', params.appOrderNo, lines, fingerprint, (orderNo) => ({
    orderNo,
    appOrderNo: params.appOrderNo,
    instanceNo: inst.instanceNo,
  }));
  inst.changing = order.orderNo;
  registerOrder(ctx, order);
  return { ...order.accepted, status: order.status };
}

/** Passwords are reset at once (status 3); the same resetNo with the same list answers the first result. */
export function resetProxyPassword(ctx: SimContext, params: In<'ResetProxyPassword'>): unknown {
  const sorted = [...params.instanceNoList].sort();
  const prior = ctx.state.resets.get(params.resetNo);
  if (prior) {
    if (JSON.stringify(prior.instances) !== JSON.stringify(sorted))
      throw new SimError(CODE.INVALID_PARAMS, 'resetNo was used for other instances');
    return prior.answer;
  }
  const targets = params.instanceNoList.map((no) => {
    const inst = ctx.state.instances.get(no);
    if (!inst || inst.dynamic) throw new SimError(CODE.INSTANCE_NOT_FOUND, no);
    if (inst.status !== INSTANCE_STATUS.running) throw new SimError(CODE.INVALID_PARAMS, `${no} is not running`);
    return inst;
  });
  const list = targets.map((inst) => {
    inst.pwd = ctx.state.token(14);
    return { instanceNo: inst.instanceNo, newPassword: inst.pwd, status: 3 };
  });
  const answer = { resetNo: params.resetNo, status: 3, list };
  ctx.state.resets.set(params.resetNo, { resetNo: params.resetNo, instances: sorted, answer });
  return answer;
}

export function getOrder(ctx: SimContext, params: In<'GetOrder'>): unknown {
  const { state } = ctx;
  let order = params.orderNo ? state.orders.get(params.orderNo) : undefined;
  if (!order && params.appOrderNo) {
    const ref = state.merchantNos.get(params.appOrderNo);
    order = ref ? state.orders.get(ref.orderNo) : undefined;
  }
  // both given: they must name the same order
  if (order && params.orderNo && params.appOrderNo && order.appOrderNo !== params.appOrderNo) order = undefined;
  if (!order) throw new SimError(CODE.ORDER_NOT_FOUND);
  return orderRecord(state, order, params.page ?? 1, params.pageSize ?? 10);
}

/** Unknown numbers are left out; 10041 only when none of them exists. */
export function getInstance(ctx: SimContext, params: In<'GetInstance'>): unknown {
  const found = params.instances.map((no) => ctx.state.instances.get(no)).filter((i): i is Instance => i !== undefined);
  if (found.length === 0) throw new SimError(CODE.INSTANCE_NOT_FOUND);
  return found.map((i) => instanceRecord(ctx.state, i));
}
