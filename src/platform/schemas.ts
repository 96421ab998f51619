// Record schemas of seed part 2, used in responses. Responses are read leniently on purpose: identity
// fields are required, numbers may arrive as strings (the provider's SDK shows this for ProxyInfo), and
// fields the seed does not list are kept, so a platform that adds a field never breaks Rotor.
import { z } from 'zod';

/** A number that may arrive as a JSON number or a numeric string. */
export const numeric = z.union([
  z.number(),
  z
    .string()
    .trim()
    .regex(/^-?\d+(\.\d+)?$/, 'expected a number')
    .transform(Number),
]);
/** A string that may arrive as a number (prices, balances). */
export const stringish = z.union([z.string(), z.number().transform(String)]);
/** Booleans as the live platform might send them. */
export const boolish = z.union([z.boolean(), z.number().transform((n) => n === 1), z.string().transform((s) => s === 'true' || s === '1')]);

const opt = <T extends z.ZodType>(t: T) => t.optional().nullable();

export const appInfo = z.looseObject({
  appName: stringish,
  coin: stringish,
  credit: stringish,
  useBridge: opt(numeric),
  callbackUrl: opt(z.string()),
  status: opt(numeric),
});

export interface AreaNode {
  code: string;
  name?: string | null | undefined;
  cname?: string | null | undefined;
  children?: AreaNode[] | null | undefined;
}
export const areaNode: z.ZodType<AreaNode> = z.looseObject({
  code: z.string(),
  name: opt(z.string()),
  cname: opt(z.string()),
  get children() {
    return opt(z.array(areaNode));
  },
});

export const city = z.looseObject({
  cityCode: z.string(),
  cityName: opt(z.string()),
  cityEnName: opt(z.string()),
  stateCode: opt(z.string()),
  stateName: opt(z.string()),
  stateEnName: opt(z.string()),
  countryCode: opt(z.string()),
  countryName: opt(z.string()),
  countryEnName: opt(z.string()),
  areaCode: opt(z.string()),
  areaName: opt(z.string()),
  areaEnName: opt(z.string()),
  status: opt(numeric),
});

export const project = z.looseObject({ code: z.string(), name: opt(z.string()), status: opt(numeric) });

export const cidrBlock = z.looseObject({
  cidr: z.string(),
  count: opt(numeric),
  asn: opt(stringish),
  isp: opt(z.string()),
  projectList: opt(z.array(z.unknown())),
});

export const product = z.looseObject({
  productNo: z.string(),
  productName: opt(z.string()),
  proxyType: numeric,
  useType: opt(stringish),
  protocol: opt(stringish),
  useLimit: opt(numeric),
  sellLimit: opt(numeric),
  areaCode: opt(z.string()),
  countryCode: opt(z.string()),
  stateCode: opt(z.string()),
  cityCode: opt(z.string()),
  detail: opt(z.string()),
  costPrice: opt(stringish),
  inventory: opt(numeric),
  ipType: opt(numeric),
  ispType: opt(numeric),
  netType: opt(numeric),
  duration: opt(numeric),
  unit: opt(numeric),
  bandWidth: opt(numeric),
  bandWidthPrice: opt(stringish),
  maxBandWidth: opt(numeric),
  flow: opt(numeric),
  cpu: opt(numeric),
  memory: opt(numeric),
  enable: opt(numeric),
  supplierCode: opt(z.string()),
  ipCount: opt(numeric),
  ipDuration: opt(numeric),
  assignIp: opt(numeric),
  parentNo: opt(z.string()),
  cidrStatus: opt(numeric),
  oneDay: opt(numeric),
  cidrBlocks: opt(z.array(cidrBlock)),
  offlineCidrBlocks: opt(z.array(z.looseObject({ cidr: z.string(), offlineTime: opt(z.string()) }))),
  proxyEverytimeChange: opt(numeric),
  proxyGlobalRandom: opt(numeric),
  apiDrawGlobalRandom: opt(numeric),
  ipWhiteList: opt(numeric),
  pwdDrawProxyUser: opt(numeric),
  proxyUserFlowLimit: opt(numeric),
  flowUseLog: opt(numeric),
  pwdDrawSessionRange: opt(stringish),
  flowConversionBase: opt(numeric),
  changeProxy: opt(numeric),
  projectList: opt(z.array(z.looseObject({ code: z.string(), inventory: opt(numeric) }))),
  productType: opt(numeric),
});

export const productArea = z.looseObject({
  productNo: opt(z.string()),
  proxyType: opt(numeric),
  areaCode: opt(z.string()),
  countryCode: opt(z.string()),
  stateCode: opt(z.string()),
  cityCode: opt(z.string()),
  status: opt(numeric),
  region: opt(z.string()),
  supplierCode: opt(z.string()),
});

export const instance = z.looseObject({
  instanceNo: z.string(),
  proxyType: opt(numeric),
  asnType: opt(numeric),
  protocol: opt(stringish),
  ip: opt(z.string()),
  port: opt(numeric),
  regionId: opt(z.string()),
  countryCode: opt(z.string()),
  cityCode: opt(z.string()),
  useType: opt(stringish),
  username: opt(z.string()),
  pwd: opt(z.string()),
  orderNo: opt(z.string()),
  userExpired: opt(numeric),
  flowTotal: opt(numeric),
  flowBalance: opt(numeric),
  status: opt(numeric),
  renew: opt(numeric),
  bridges: opt(z.array(z.string())),
  openAt: opt(stringish),
  renewAt: opt(stringish),
  releaseAt: opt(stringish),
  productNo: opt(z.string()),
  extendIp: opt(z.string()),
  projectId: opt(z.string()),
});

export const order = z.looseObject({
  orderNo: z.string(),
  appOrderNo: opt(z.string()),
  type: numeric,
  status: opt(numeric),
  count: opt(numeric),
  amount: opt(stringish),
  refund: opt(numeric),
  page: opt(numeric),
  pageSize: opt(numeric),
  total: opt(numeric),
  instances: opt(z.array(instance)),
});

export const orderAccepted = z.looseObject({
  orderNo: z.string(),
  appOrderNo: opt(z.string()),
  amount: opt(stringish),
});

export const mainAccount = z.looseObject({
  appUsername: opt(z.string()),
  username: opt(z.string()),
  password: opt(z.string()),
  status: opt(numeric),
  authStatus: opt(numeric),
});

export const subAccountInfo = z.looseObject({
  appUsername: z.string(),
  productNo: opt(z.string()),
  username: opt(z.string()),
  password: opt(z.string()),
  status: opt(numeric),
  remark: opt(z.string()),
  limitFlow: opt(numeric),
  useFlow: opt(numeric),
});

export const balanceEntry = z.looseObject({
  used: opt(numeric),
  total: opt(numeric),
  balance: numeric,
  productNo: opt(z.string()),
  ipWhiteList: opt(z.array(z.string())),
  ipUsed: opt(numeric),
  ipTotal: opt(numeric),
});

export const flowLogEntry = z.looseObject({
  used: numeric,
  total: opt(numeric),
  balance: opt(numeric),
  usedTime: opt(numeric),
  productNo: opt(z.string()),
});

export type Product = z.output<typeof product>;
export type Instance = z.output<typeof instance>;
export type Order = z.output<typeof order>;
export type City = z.output<typeof city>;
export type Project = z.output<typeof project>;
