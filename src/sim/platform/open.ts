// Opening orders: InstanceOpen (static and dynamic items), InstanceOpenAssignIp, GetAssignIpInfo.
// Everything is checked before anything is reserved or charged, so a refused call leaves no trace (seed 7:
// "nothing was created"). Prices follow seed 4.3: static = (price + bandwidth price × extBandWidth + bridge
// fee) × cycleTimes × count; traffic = price per MB × flow; IP count = price per package of ipCount IPs ×
// count / ipCount (count must be a whole number of packages).
import { BlockList, isIP } from 'node:net';
import { CODE } from '../../platform/codes.ts';
import type { SimProduct } from './catalog.ts';
import type { In, SimContext } from './context.ts';
import { SimError } from './errors.ts';
import { INSTANCE_STATUS, ORDER_STATUS, registerOrder, repeated } from './lifecycle.ts';
import { formatMoney, parseMoney } from './money.ts';
import type { Instance, Order, OrderLine } from './state.ts';

const BRIDGE_FEE = parseMoney('1.00');

type OpenItem = In<'InstanceOpen'>['params'][number];

interface Planned {
  product: SimProduct;
  count: number;
  cycleTimes: number;
  unitPrice: number;
  item: OpenItem;
  /** exit addresses chosen from segments (static) */
  exits: string[];
  /** dynamic: MB or IPs credited */
  amountOfTraffic: number;
}

export function instanceOpen(ctx: SimContext, params: In<'InstanceOpen'>): unknown {
  const fingerprint = JSON.stringify(params.params);
  const prior = repeated(ctx, 'open', params.appOrderNo, fingerprint);
  if (prior) return prior.accepted;
  checkMerchant(ctx);
  const reserved = new Map<string, number>();
  const plans = params.params.map((item) => plan(ctx, item, reserved));
  const total = plans.reduce((sum, p) => sum + p.unitPrice * p.count, 0);
  if (total > ctx.state.spendable()) throw new SimError(CODE.CREATE_BALANCE, `needs ${formatMoney(total)}`);
  return commit(ctx, params.appOrderNo, 'InstanceOpen', plans, fingerprint);
}

export function instanceOpenAssignIp(ctx: SimContext, params: In<'InstanceOpenAssignIp'>): unknown {
  const fingerprint = JSON.stringify(params);
  const prior = repeated(ctx, 'open', params.appOrderNo, fingerprint);
  if (prior) return prior.accepted;
  checkMerchant(ctx);
  const product = ctx.state.product(params.productNo);
  if (!product || isDynamic(product) || product.assignIp !== 1)
    throw new SimError(CODE.INVALID_PARAMS, 'product does not sell specified IPs');
  purchasable(product, 1);
  if (!isIP(params.assignIp) || !blockOf(product, params.assignIp))
    throw new SimError(CODE.INVALID_PARAMS, "assignIp is not in the product's segments");
  if (ctx.state.soldIps.has(params.assignIp)) throw new SimError(CODE.CREATE_STOCK, 'assignIp is taken');
  const item: OpenItem = {
    productNo: product.productNo,
    count: 1,
    cycleTimes: params.cycleTimes,
    extBandWidth: params.extBandWidth,
    useBridge: params.useBridge,
  };
  const unitPrice = staticUnitPrice(product, item, params.cycleTimes);
  if (unitPrice > ctx.state.spendable()) throw new SimError(CODE.CREATE_BALANCE);
  const plan: Planned = { product, count: 1, cycleTimes: params.cycleTimes, unitPrice, item, exits: [params.assignIp], amountOfTraffic: 0 };
  return commit(ctx, params.appOrderNo, 'InstanceOpenAssignIp', [plan], fingerprint);
}

export function getAssignIpInfo(ctx: SimContext, params: In<'GetAssignIpInfo'>): unknown {
  if (!isIP(params.ip)) throw new SimError(CODE.INVALID_PARAMS, 'ip');
  const canBuy =
    !ctx.state.soldIps.has(params.ip) &&
    [...ctx.state.products.values()].some(
      (p) => p.authorized && p.enable === 1 && p.inventory > 0 && p.assignIp === 1 && blockOf(p, params.ip) !== undefined,
    );
  return { ip: params.ip, canBuyStatus: canBuy };
}

function checkMerchant(ctx: SimContext): void {
  if (ctx.state.merchant.status !== 1) throw new SimError(CODE.INVALID_PARAMS, 'merchant disabled');
}

export function isDynamic(p: SimProduct): boolean {
  return p.proxyType === 104 || p.proxyType === 105;
}

function purchasable(p: SimProduct, count: number, reservedAlready = 0): void {
  if (p.enable !== 1) throw new SimError(CODE.INVALID_PARAMS, `product ${p.productNo} is offline`);
  if (p.inventory - reservedAlready < count) throw new SimError(CODE.CREATE_STOCK, `product ${p.productNo}`);
}

function findByFilter(ctx: SimContext, item: OpenItem): SimProduct {
  const match = [...ctx.state.products.values()].find(
    (p) =>
      p.authorized &&
      p.enable === 1 &&
      p.inventory > 0 &&
      !isDynamic(p) &&
      (item.proxyType === undefined || p.proxyType === item.proxyType) &&
      (!item.countryCode || p.countryCode === item.countryCode) &&
      (!item.cityCode || p.cityCode === item.cityCode) &&
      (!item.supplierCode || p.supplierCode === item.supplierCode) &&
      (item.unit === undefined || p.unit === item.unit) &&
      (item.ispType === undefined || p.ispType === item.ispType) &&
      (item.productType === undefined || p.productType === item.productType),
  );
  if (!match) throw new SimError(CODE.INVALID_PARAMS, 'no product matches the filters');
  if (item.cidrBlocks?.length) throw new SimError(CODE.INVALID_PARAMS, 'segments need a productNo');
  return match;
}

function plan(ctx: SimContext, item: OpenItem, reserved: Map<string, number>): Planned {
  const product = item.productNo ? ctx.state.product(item.productNo) : findByFilter(ctx, item);
  if (!product) throw new SimError(CODE.INVALID_PARAMS, `unknown product ${item.productNo}`);
  const cycleTimes = item.cycleTimes ?? (item.duration && product.duration ? Math.max(1, Math.round(item.duration / product.duration)) : 1);
  if (isDynamic(product)) return planDynamic(ctx, product, item, cycleTimes);
  const count = item.count ?? 1;
  const key = product.productNo;
  purchasable(product, count, reserved.get(key) ?? 0);
  reserved.set(key, (reserved.get(key) ?? 0) + count);
  if (product.productType === 2) {
    if (!item.projectId) throw new SimError(CODE.INVALID_PARAMS, 'a shared product needs projectId');
    const project = product.projectList.find((p) => p.code === item.projectId);
    if (!project) throw new SimError(CODE.INVALID_PARAMS, `project ${item.projectId} is not sold with this product`);
    const pkey = `${key}/${project.code}`;
    if (project.inventory - (reserved.get(pkey) ?? 0) < count) throw new SimError(CODE.CREATE_STOCK, `project ${project.code}`);
    reserved.set(pkey, (reserved.get(pkey) ?? 0) + count);
  }
  const exits = chooseExits(ctx, product, item, count, reserved);
  return { product, count, cycleTimes, unitPrice: staticUnitPrice(product, item, cycleTimes), item, exits, amountOfTraffic: 0 };
}

function staticUnitPrice(product: SimProduct, item: OpenItem, cycleTimes: number): number {
  const ext = item.extBandWidth ?? 0;
  if (ext > 0 && ext > product.maxBandWidth) throw new SimError(CODE.INVALID_PARAMS, `extBandWidth above ${product.maxBandWidth}`);
  const bridge = item.useBridge === 2 ? BRIDGE_FEE : 0;
  return (parseMoney(product.costPrice) + parseMoney(product.bandWidthPrice) * ext + bridge) * cycleTimes;
}

function planDynamic(ctx: SimContext, product: SimProduct, item: OpenItem, cycleTimes: number): Planned {
  if (product.enable !== 1) throw new SimError(CODE.INVALID_PARAMS, `product ${product.productNo} is offline`);
  if (!item.appUsername) throw new SimError(CODE.INVALID_PARAMS, 'a dynamic item needs appUsername');
  const main = ctx.state.mains.get(item.appUsername);
  if (!main || main.status !== 1) throw new SimError(CODE.ALLOCATE_NO_MAIN, item.appUsername);
  if (product.ipCount > 0) {
    const count = item.count ?? product.ipCount;
    if (count < product.ipCount || count % product.ipCount !== 0)
      throw new SimError(CODE.INVALID_PARAMS, `count must be a multiple of ${product.ipCount}`);
    const unitPrice = (parseMoney(product.costPrice) * count) / product.ipCount;
    return { product, count: 1, cycleTimes, unitPrice, item, exits: [], amountOfTraffic: count };
  }
  if (item.flow === undefined || item.flow < product.flow)
    throw new SimError(CODE.INVALID_PARAMS, `flow must be at least ${product.flow} MB`);
  return {
    product,
    count: 1,
    cycleTimes: 1,
    unitPrice: parseMoney(product.costPrice) * item.flow,
    item,
    exits: [],
    amountOfTraffic: item.flow,
  };
}

/** Exit addresses from the requested segments (counts must add up to the quantity) or from any segment. */
function chooseExits(ctx: SimContext, product: SimProduct, item: OpenItem, count: number, reserved: Map<string, number>): string[] {
  const wanted = item.cidrBlocks ?? [];
  if (wanted.length) {
    if (wanted.reduce((s, b) => s + b.count, 0) !== count)
      throw new SimError(CODE.INVALID_PARAMS, 'cidrBlocks counts must add up to count');
  }
  const exits: string[] = [];
  const requests = wanted.length ? wanted : product.cidrBlocks.length ? [{ cidr: '', count }] : [];
  for (const req of requests) {
    const blocks = req.cidr ? product.cidrBlocks.filter((b) => b.cidr === req.cidr) : product.cidrBlocks;
    if (req.cidr && blocks.length === 0) throw new SimError(CODE.INVALID_PARAMS, `segment ${req.cidr} is not offered`);
    for (let k = 0; k < req.count; k++) {
      const ip = freeAddress(ctx, blocks, reserved);
      if (!ip) throw new SimError(CODE.CREATE_STOCK, `segment ${req.cidr || 'any'}`);
      exits.push(ip);
    }
  }
  return exits;
}

function freeAddress(ctx: SimContext, blocks: SimProduct['cidrBlocks'], reserved: Map<string, number>): string | undefined {
  for (const block of blocks) {
    const [baseIp, bitsText] = block.cidr.split('/');
    const size = Math.min(block.count, 2 ** (32 - Number(bitsText)) - 2);
    const baseNum = ipToNumber(baseIp ?? '0.0.0.0');
    for (let offset = 1; offset <= size; offset++) {
      const ip = numberToIp(baseNum + offset);
      if (!ctx.state.soldIps.has(ip) && !reserved.has(`ip:${ip}`)) {
        reserved.set(`ip:${ip}`, 1);
        return ip;
      }
    }
  }
  return undefined;
}

function blockOf(product: SimProduct, ip: string) {
  return product.cidrBlocks.find((b) => {
    const list = new BlockList();
    const [net, bits] = b.cidr.split('/');
    list.addSubnet(net ?? '', Number(bits), 'ipv4');
    return isIP(ip) === 4 && list.check(ip, 'ipv4');
  });
}

const ipToNumber = (ip: string) => ip.split('.').reduce((n, part) => n * 256 + Number(part), 0);
const numberToIp = (n: number) => [24, 16, 8, 0].map((s) => Math.floor(n / 2 ** s) % 256).join('.');

function commit(ctx: SimContext, appOrderNo: string, operation: string, plans: Planned[], fingerprint: string): unknown {
  const { state } = ctx;
  const orderNo = state.nextId('SO');
  const lines: OrderLine[] = [];
  for (const p of plans) {
    if (!isDynamic(p.product)) {
      p.product.inventory -= p.count;
      const project = p.product.projectList.find((x) => x.code === p.item.projectId);
      if (project && p.product.productType === 2) project.inventory -= p.count;
    }
    for (let k = 0; k < p.count; k++) {
      const inst = newInstance(ctx, orderNo, p, p.exits[k] ?? '');
      state.instances.set(inst.instanceNo, inst);
      if (inst.extendIp) state.soldIps.add(inst.extendIp);
      lines.push({ instanceNo: inst.instanceNo, amount: p.unitPrice, cycleTimes: p.cycleTimes });
    }
  }
  const amount = lines.reduce((s, l) => s + l.amount, 0);
  const accepted = { orderNo, appOrderNo, amount: formatMoney(amount) };
  const order: Order = {
    orderNo,
    appOrderNo,
    kind: 'open',
    status: ORDER_STATUS.pending,
    amount,
    refunded: 0,
    lines,
    createdAt: ctx.clock.now(),
    accepted,
    fingerprint,
  };
  state.charge(appOrderNo, operation, orderNo, amount, ctx.clock.now());
  registerOrder(ctx, order);
  return accepted;
}

function newInstance(ctx: SimContext, orderNo: string, p: Planned, exit: string): Instance {
  const { state } = ctx;
  const dynamic = isDynamic(p.product);
  const main = dynamic && p.item.appUsername ? state.mains.get(p.item.appUsername) : undefined;
  return {
    instanceNo: state.nextId('INS'),
    orderNo,
    productNo: p.product.productNo,
    proxyType: p.product.proxyType,
    protocol: p.product.protocol,
    ip: dynamic ? '' : (ctx.upstreams?.host ?? '127.0.0.1'),
    port: 0,
    username: main ? main.username : `u${state.token(9)}`,
    pwd: dynamic ? '' : state.token(14),
    countryCode: p.product.countryCode,
    cityCode: p.product.cityCode,
    useType: p.product.useType,
    asnType: dynamic ? 0 : 1,
    userExpired: 0,
    status: INSTANCE_STATUS.toCreate,
    openAt: 0,
    renewAt: 0,
    releaseAt: 0,
    projectId: p.item.projectId ?? '',
    extendIp: exit,
    cycleTimes: p.cycleTimes,
    extBandWidth: p.item.extBandWidth ?? 0,
    flowTotal: p.amountOfTraffic,
    dynamic,
    mainAccount: main?.appUsername ?? '',
    changing: null,
  };
}
