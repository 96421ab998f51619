// Platform instance and order records → store records. The platform is the truth; a field it leaves out
// keeps what Rotor knew (an order's instance list may omit the password the instance query carries).
import type { Instance, Order } from '../platform/schemas.ts';
import type { InstanceRecord, OrderRecord } from '../store/types.ts';

const orNull = <T>(v: T | null | undefined, fallback: T | null | undefined): T | null =>
  v === undefined || v === null ? (fallback ?? null) : v;

export function instanceRecord(i: Instance, existing: InstanceRecord | undefined, now: number): InstanceRecord {
  return {
    instanceNo: i.instanceNo,
    orderNo: orNull(i.orderNo, existing?.orderNo),
    productNo: orNull(i.productNo, existing?.productNo),
    status: orNull(i.status, existing?.status),
    ip: orNull(i.ip, existing?.ip),
    port: orNull(i.port, existing?.port),
    username: orNull(i.username, existing?.username),
    pwd: orNull(i.pwd, existing?.pwd),
    protocol: orNull(i.protocol, existing?.protocol),
    userExpired: orNull(i.userExpired, existing?.userExpired),
    raw: i,
    updatedAt: now,
  };
}

export function orderRecord(o: Order, existing: OrderRecord | undefined, now: number): OrderRecord {
  return {
    appOrderNo: existing?.appOrderNo ?? o.appOrderNo ?? o.orderNo,
    orderNo: o.orderNo,
    type: o.type,
    status: orNull(o.status, existing?.status) ?? 1,
    amount: orNull(o.amount, existing?.amount),
    count: orNull(o.count, existing?.count),
    request: existing?.request ?? null,
    createdAt: existing?.createdAt ?? now,
    updatedAt: now,
  };
}

/** The instance numbers an order is about: opened ones, or the ones it renews, releases or changes. */
export function instancesOfOrder(order: OrderRecord, fromPlatform: string[] = []): string[] {
  const req = (order.request ?? {}) as { instances?: (string | { instanceNo: string })[]; instanceNo?: string };
  const named = (req.instances ?? []).map((i) => (typeof i === 'string' ? i : i.instanceNo));
  if (req.instanceNo) named.push(req.instanceNo);
  return [...new Set([...fromPlatform, ...named])];
}
