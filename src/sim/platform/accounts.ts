// Dynamic accounts (seed 4.12–4.14, 4.17–4.20): main and sub accounts, verification, balances, limits,
// flow logs, traffic return and the IP whitelist.
//
// Choices where the seed is open:
// - CreateUser "creates or modifies": an existing appUsername is modified (password, status, contact and
//   verification fields) and answered 200. 10051 arises when the name is taken by a sub account of another
//   main account (sub account names are unique per merchant, and every main account owns a same-name sub).
// - The create-sub-account limitFlow is MB (≤ 0 = unlimited); it applies to every product, converted with
//   that product's flowConversionBase (1 MB = base² bytes) until SetProxyUserFlowLimit sets bytes for a product.
// - Flow-log times are UTC "YYYY-MM-DD HH:MM:SS"; entries are per minute of traffic, newest first.
import { isIP } from 'node:net';
import { CODE } from '../../platform/codes.ts';
import type { SimProduct } from './catalog.ts';
import type { In, SimContext } from './context.ts';
import { SimError } from './errors.ts';
import { ensureBalance } from './lifecycle.ts';
import { bytesPerMb, formatMoney, mbString, parseMoney } from './money.ts';
import { isDynamic } from './open.ts';
import type { Balance, MainAccount, SubAccount } from './state.ts';
import { parseDateTime } from './time.ts';

export function mainByEither(ctx: SimContext, username?: string, appUsername?: string): MainAccount {
  const { mains } = ctx.state;
  const main = appUsername ? mains.get(appUsername) : [...mains.values()].find((m) => m.username === username);
  if (!main || (username && appUsername && main.username !== username)) throw new SimError(CODE.USER_NOT_FOUND);
  return main;
}

export function dynamicProduct(ctx: SimContext, productNo: string, proxyType?: number): SimProduct {
  const p = ctx.state.product(productNo);
  if (!p || !isDynamic(p)) throw new SimError(CODE.INVALID_PARAMS, `${productNo} is not an authorized dynamic product`);
  if (proxyType !== undefined && p.proxyType !== proxyType)
    throw new SimError(CODE.INVALID_PARAMS, `proxyType does not match ${productNo}`);
  return p;
}

const subRecord = (s: SubAccount) => ({
  appUsername: s.appUsername,
  username: s.username,
  password: s.password,
  status: s.status,
  authStatus: s.authStatus,
});
const mainRecord = (m: MainAccount) => ({
  appUsername: m.appUsername,
  username: m.username,
  password: m.password,
  status: m.status,
  authStatus: m.authStatus,
});

export function createUser(ctx: SimContext, params: In<'CreateUser'>): unknown {
  const { state } = ctx;
  const name = params.appUsername ?? `m${state.token(10)}`;
  const existing = state.mains.get(name);
  if (existing) {
    if (params.password) existing.password = params.password;
    existing.status = params.status;
    if (params.authType) existing.authStatus = params.authType;
    if (params.phone !== undefined) existing.phone = params.phone;
    if (params.email !== undefined) existing.email = params.email;
    if (params.authName !== undefined) existing.authName = params.authName;
    const own = state.subs.get(name);
    if (own) {
      own.status = params.status;
      own.authStatus = existing.authStatus;
      if (params.password) own.password = params.password;
    }
    return mainRecord(existing);
  }
  if (state.subs.has(name)) throw new SimError(CODE.USER_EXISTS, name);
  const main: MainAccount = {
    appUsername: name,
    username: `pm${state.token(10)}`,
    password: params.password ?? state.token(12),
    status: params.status,
    authStatus: params.authType ?? 1,
    phone: params.phone ?? '',
    email: params.email ?? '',
    authName: params.authName ?? '',
    balances: new Map(),
  };
  state.mains.set(name, main);
  state.subs.set(name, newSub(ctx, name, main.password, main, params.status, 0, ''));
  return mainRecord(main);
}

function newSub(
  ctx: SimContext,
  appUsername: string,
  password: string,
  main: MainAccount,
  status: number,
  limitMb: number,
  remark: string,
): SubAccount {
  return {
    appUsername,
    username: `ps${ctx.state.token(10)}`,
    password,
    status,
    authStatus: main.authStatus,
    main: main.appUsername,
    remark,
    limitMb,
    limits: new Map(),
    used: new Map(),
  };
}

export function userAuth(ctx: SimContext, params: In<'UserAuth'>): unknown {
  const main = mainByEither(ctx, params.username, params.appUsername);
  main.authStatus = params.authType;
  if (params.authName !== undefined) main.authName = params.authName;
  const own = ctx.state.subs.get(main.appUsername);
  if (own) own.authStatus = params.authType;
  return { username: main.username, authStatus: main.authStatus };
}

export function createProxyUser(ctx: SimContext, params: In<'CreateProxyUser'>): unknown {
  const { state } = ctx;
  let main: MainAccount;
  try {
    main = mainByEither(ctx, params.mainUsername, params.appMainUsername);
  } catch {
    throw new SimError(CODE.SUB_CREATE_FAILED, 'main account does not exist');
  }
  if (main.status !== 1) throw new SimError(CODE.SUB_CREATE_FAILED, 'main account is disabled');
  const name = params.appUsername ?? `s${state.token(10)}`;
  if (state.subs.has(name) || state.mains.has(name)) throw new SimError(CODE.SUB_CREATE_FAILED, `${name} exists`);
  const sub = newSub(ctx, name, params.password ?? state.token(12), main, params.status, params.limitFlow, params.remark ?? '');
  state.subs.set(name, sub);
  return subRecord(sub);
}

/** A sub account's limit for a product in bytes; -1 = unlimited. */
export function subLimitBytes(sub: SubAccount, product: SimProduct): number {
  const set = sub.limits.get(product.productNo);
  if (set !== undefined) return set;
  return sub.limitMb > 0 ? sub.limitMb * bytesPerMb(product.flowConversionBase) : -1;
}

export function proxyInfo(ctx: SimContext, params: In<'ProxyInfo'>): unknown {
  const main = mainByEither(ctx, params.username, params.appUsername);
  const product = dynamicProduct(ctx, params.productNo, params.proxyType);
  const b = main.balances.get(product.productNo);
  const base = product.flowConversionBase;
  return {
    list: [
      {
        used: mbString(b?.usedBytes ?? 0, base),
        total: Math.round((b?.totalBytes ?? 0) / bytesPerMb(base)),
        balance: mbString(Math.max(0, (b?.totalBytes ?? 0) - (b?.usedBytes ?? 0)), base),
        productNo: product.productNo,
        ipWhiteList: [...(b?.whitelist ?? [])],
        ipUsed: b?.ipUsed ?? 0,
        ipTotal: b?.ipTotal ?? 0,
      },
    ],
  };
}

function subOf(ctx: SimContext, appUsername: string): SubAccount {
  const sub = ctx.state.subs.get(appUsername);
  if (!sub) throw new SimError(CODE.SUB_NOT_FOUND, appUsername);
  return sub;
}

export function getProxyUserInfo(ctx: SimContext, params: In<'GetProxyUserInfo'>): unknown {
  const sub = subOf(ctx, params.appUsername);
  const product = dynamicProduct(ctx, params.productNo);
  return {
    appUsername: sub.appUsername,
    productNo: product.productNo,
    username: sub.username,
    password: sub.password,
    status: sub.status,
    remark: sub.remark,
    limitFlow: subLimitBytes(sub, product),
    useFlow: sub.used.get(product.productNo) ?? 0,
  };
}

export function setProxyUserFlowLimit(ctx: SimContext, params: In<'SetProxyUserFlowLimit'>): null {
  const sub = subOf(ctx, params.appUsername);
  const product = dynamicProduct(ctx, params.productNo);
  if (product.proxyUserFlowLimit !== 1) throw new SimError(CODE.INVALID_PARAMS, 'the product has no sub-account limits');
  sub.limits.set(product.productNo, params.limitFlow);
  if (params.remark !== undefined) sub.remark = params.remark;
  return null;
}

const DAY_MS = 86_400_000;

export function proxyFlowUseLog(ctx: SimContext, params: In<'ProxyFlowUseLog'>): unknown {
  const main = mainByEither(ctx, undefined, params.appUsername);
  const product = dynamicProduct(ctx, params.productNo);
  if (product.flowUseLog !== 1) throw new SimError(CODE.INVALID_PARAMS, 'the product has no flow-use log');
  const now = ctx.clock.now();
  const start = params.startTime ? parseDateTime(params.startTime) : now - 7 * DAY_MS;
  const end = params.endTime ? parseDateTime(params.endTime) : Math.ceil((now + 1) / DAY_MS) * DAY_MS - 1000;
  if (!(start <= end)) throw new SimError(CODE.INVALID_PARAMS, 'startTime after endTime');
  const page = params.page ?? 1;
  const pageSize = params.pageSize ?? 10;
  const log = main.balances.get(product.productNo)?.log ?? [];
  const inRange = log.filter((e) => e.minute * 1000 >= start && e.minute * 1000 <= end).reverse();
  return {
    total: inRange.length,
    curPage: page,
    list: inRange.slice((page - 1) * pageSize, page * pageSize).map((e) => ({
      used: e.used,
      total: e.total,
      balance: e.balance,
      usedTime: e.minute,
      productNo: product.productNo,
    })),
  };
}

/** Refund = the remaining amount given back × the product price (per MB, or per package of ipCount IPs). */
export function dynamicProxyReturn(ctx: SimContext, params: In<'DynamicProxyReturn'>): unknown {
  const main = mainByEither(ctx, undefined, params.appUsername);
  const product = dynamicProduct(ctx, params.productNo, params.proxyType);
  const b = main.balances.get(product.productNo);
  let refund: number;
  if (product.ipCount > 0) {
    if (!params.ipNum) throw new SimError(CODE.INVALID_PARAMS, 'ipNum is required for this product');
    if (!b || b.ipTotal - b.ipUsed < params.ipNum) throw new SimError(CODE.RETURN_BALANCE);
    b.ipTotal -= params.ipNum;
    refund = (parseMoney(product.costPrice) * params.ipNum) / product.ipCount;
  } else {
    if (!params.flowNum) throw new SimError(CODE.INVALID_PARAMS, 'flowNum is required for this product');
    const bytes = params.flowNum * bytesPerMb(product.flowConversionBase);
    if (!b || b.totalBytes - b.usedBytes < bytes) throw new SimError(CODE.RETURN_BALANCE);
    b.totalBytes -= bytes;
    refund = parseMoney(product.costPrice) * params.flowNum;
  }
  ctx.state.charge(`return:${main.appUsername}`, 'DynamicProxyReturn', '', -refund, ctx.clock.now());
  return { returnAmount: Number(formatMoney(refund)) };
}

function whitelistTarget(ctx: SimContext, appUsername: string, productNo: string, proxyType: number | undefined, ip: string): Balance {
  const main = mainByEither(ctx, undefined, appUsername);
  const product = dynamicProduct(ctx, productNo, proxyType);
  if (product.ipWhiteList !== 1) throw new SimError(CODE.INVALID_PARAMS, 'the product has no IP whitelist');
  if (!isIP(ip)) throw new SimError(CODE.INVALID_PARAMS, 'ip is not an IP address');
  const b = ensureBalance(ctx, main.appUsername, product.productNo);
  if (!b) throw new SimError(CODE.USER_NOT_FOUND);
  return b;
}

export function addIpWhiteList(ctx: SimContext, params: In<'AddIpWhiteList'>): unknown {
  const b = whitelistTarget(ctx, params.appUsername, params.productNo, params.proxyType, params.ip);
  if (!b.whitelist.includes(params.ip)) b.whitelist.push(params.ip);
  return { ipWhiteList: [...b.whitelist] };
}

export function delIpWhiteList(ctx: SimContext, params: In<'DelIpWhiteList'>): unknown {
  const b = whitelistTarget(ctx, params.appUsername, params.productNo, params.proxyType, params.ip);
  b.whitelist = b.whitelist.filter((ip) => ip !== params.ip);
  return { ipWhiteList: [...b.whitelist] };
}
