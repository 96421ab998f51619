// Platform instance and order records → store records. The platform is the truth; a field it leaves out
// keeps what Rotor knew (an order's instance list may omit the password the instance query carries).
import type { Instance, Order } from '../platform/schemas.ts';
import type { InstanceRecord, OrderRecord } from '../store/types.ts';

const orNull = <T>(v: T | null | undefined, fallback: T | null | undefined): T | null =>
  v === undefined || v === null ? (fallback ?? null) : v;

// A platform written in Go fills what a listing leaves out with zero values ("pwd": "", "userExpired": 0, "port":
// 0): in an instance's connection data and expiry those are "not said", never a value (no instance has port 0, an
// empty password or an expiry in 1970), so they keep what Rotor knew as an absent field does.
const said = <T>(v: T | null | undefined): T | undefined => (v === '' || v === 0 ? undefined : (v ?? undefined));

export function instanceRecord(i: Instance, existing: InstanceRecord | undefined, now: number): InstanceRecord {
  return {
    instanceNo: i.instanceNo,
    orderNo: orNull(i.orderNo, existing?.orderNo),
    productNo: orNull(i.productNo, existing?.productNo),
    status: orNull(i.status, existing?.status),
    ip: orNull(said(i.ip), existing?.ip),
    port: orNull(said(i.port), existing?.port),
    username: orNull(said(i.username), existing?.username),
    pwd: orNull(said(i.pwd), existing?.pwd),
    protocol: orNull(said(i.protocol), existing?.protocol),
    userExpired: orNull(said(i.userExpired), existing?.userExpired),
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
