// State → the seed's JSON records (2.7 order, 2.8 instance).
import { formatMoney } from './money.ts';
import { ORDER_TYPE, type Instance, type Order, type SimState } from './state.ts';
import { rfc3339 } from './time.ts';

export function instanceRecord(state: SimState, i: Instance): Record<string, unknown> {
  const record: Record<string, unknown> = {
    instanceNo: i.instanceNo,
    proxyType: i.proxyType,
    asnType: i.asnType,
    protocol: i.protocol,
    ip: i.ip,
    port: i.port,
    regionId: i.cityCode || i.countryCode,
    countryCode: i.countryCode,
    cityCode: i.cityCode,
    useType: i.useType,
    username: i.username,
    pwd: i.dynamic ? '' : i.pwd,
    orderNo: i.orderNo,
    userExpired: i.userExpired,
    flowTotal: i.flowTotal,
    status: i.status,
    renew: 0,
    bridges: [],
    openAt: rfc3339(i.openAt),
    renewAt: rfc3339(i.renewAt),
    releaseAt: rfc3339(i.releaseAt),
    productNo: i.productNo,
    extendIp: i.extendIp,
    projectId: i.projectId,
  };
  if (i.dynamic) record.flowBalance = dynamicRemaining(state, i);
  return record;
}

/** A dynamic package's remaining amount: MB for traffic, IPs for IP-count products. */
function dynamicRemaining(state: SimState, i: Instance): number {
  const balance = state.mains.get(i.mainAccount)?.balances.get(i.productNo);
  const product = state.products.get(i.productNo);
  if (!balance || !product) return 0;
  if (product.ipCount > 0) return Math.max(0, balance.ipTotal - balance.ipUsed);
  const mb = product.flowConversionBase === 1000 ? 1_000_000 : 1_048_576;
  return Math.max(0, Math.round(((balance.totalBytes - balance.usedBytes) / mb) * 1000) / 1000);
}

export function orderRecord(state: SimState, o: Order, page: number, pageSize: number): Record<string, unknown> {
  const all = o.lines.map((l) => state.instances.get(l.instanceNo)).filter((i): i is Instance => i !== undefined);
  const slice = all.slice((page - 1) * pageSize, page * pageSize);
  return {
    orderNo: o.orderNo,
    appOrderNo: o.appOrderNo,
    type: ORDER_TYPE[o.kind],
    status: o.status,
    count: o.kind === 'change' ? 1 : o.lines.length,
    amount: formatMoney(o.amount),
    refund: o.refunded > 0 ? 1 : 0,
    page,
    pageSize,
    total: all.length,
    instances: slice.map((i) => instanceRecord(state, i)),
  };
}
