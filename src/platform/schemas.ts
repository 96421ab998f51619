// Record schemas of seed part 2, used in responses. Responses are read leniently on purpose: identity
// fields are required, numbers may arrive as strings (the provider's SDK shows this for ProxyInfo), and
// fields the seed does not list are kept, so a platform that adds a field never breaks Rotor.
import { z } from 'zod';

/**
 * A decimal number as text: what Number() reads as a finite decimal, exponent included ("1e+06", the way Go's
 * %v / FormatFloat('g') writes 1,000,000; "1.048576e+06"; "+5"; ".5"). No hex, no "Infinity", no empty text.
 */
const NUMBER_TEXT = /^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/;

/** A number that may arrive as a JSON number or a numeric string. */
export const numeric = z.union([
  z.number(),
  z.string().trim().regex(NUMBER_TEXT, 'expected a number').transform(Number).refine(Number.isFinite, 'expected a finite number'),
]);
/**
 * An optional number: also absent when it arrives as "" or blank (a platform with nothing to say, e.g. ProxyInfo's
 * `used` before any use, writes Go's or Java's empty string rather than leaving the field out).
 */
export const optNumeric = z
  .union([
    numeric,
    z
      .string()
      .regex(/^\s*$/)
      .transform(() => undefined),
  ])
  .optional()
  .nullable();
/** A string that may arrive as a number (prices, balances). */
export const stringish = z.union([z.string(), z.number().transform(String)]);
/** Booleans as the live platform might send them. */
export const boolish = z.union([z.boolean(), z.number().transform((n) => n === 1), z.string().transform((s) => s === 'true' || s === '1')]);

const opt = <T extends z.ZodType>(t: T) => t.optional().nullable();

export const appInfo = z.looseObject({
  appName: stringish,
  coin: stringish,
  credit: stringish,
  useBridge: optNumeric,
  callbackUrl: opt(z.string()),
  status: optNumeric,
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
  status: optNumeric,
});

export const project = z.looseObject({ code: z.string(), name: opt(z.string()), status: optNumeric });

export const cidrBlock = z.looseObject({
  cidr: z.string(),
  count: optNumeric,
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
  useLimit: optNumeric,
  sellLimit: optNumeric,
  areaCode: opt(z.string()),
  countryCode: opt(z.string()),
  stateCode: opt(z.string()),
  cityCode: opt(z.string()),
  detail: opt(z.string()),
  costPrice: opt(stringish),
  inventory: optNumeric,
  ipType: optNumeric,
  ispType: optNumeric,
  netType: optNumeric,
  duration: optNumeric,
  unit: optNumeric,
  bandWidth: optNumeric,
  bandWidthPrice: opt(stringish),
  maxBandWidth: optNumeric,
  flow: optNumeric,
  cpu: optNumeric,
  memory: optNumeric,
  enable: optNumeric,
  supplierCode: opt(z.string()),
  ipCount: optNumeric,
  ipDuration: optNumeric,
  assignIp: optNumeric,
  parentNo: opt(z.string()),
  cidrStatus: optNumeric,
  oneDay: optNumeric,
  cidrBlocks: opt(z.array(cidrBlock)),
  offlineCidrBlocks: opt(z.array(z.looseObject({ cidr: z.string(), offlineTime: opt(z.string()) }))),
  proxyEverytimeChange: optNumeric,
  proxyGlobalRandom: optNumeric,
  apiDrawGlobalRandom: optNumeric,
  ipWhiteList: optNumeric,
  pwdDrawProxyUser: optNumeric,
  proxyUserFlowLimit: optNumeric,
  flowUseLog: optNumeric,
  pwdDrawSessionRange: opt(stringish),
  flowConversionBase: optNumeric,
  changeProxy: optNumeric,
  projectList: opt(z.array(z.looseObject({ code: z.string(), inventory: optNumeric }))),
  productType: optNumeric,
});

export const productArea = z.looseObject({
  productNo: opt(z.string()),
  proxyType: optNumeric,
  areaCode: opt(z.string()),
  countryCode: opt(z.string()),
  stateCode: opt(z.string()),
  cityCode: opt(z.string()),
  status: optNumeric,
  region: opt(z.string()),
  supplierCode: opt(z.string()),
});

export const instance = z.looseObject({
  instanceNo: z.string(),
  proxyType: optNumeric,
  asnType: optNumeric,
  protocol: opt(stringish),
  ip: opt(z.string()),
  port: optNumeric,
  regionId: opt(z.string()),
  countryCode: opt(z.string()),
  cityCode: opt(z.string()),
  useType: opt(stringish),
  username: opt(z.string()),
  pwd: opt(z.string()),
  orderNo: opt(z.string()),
  userExpired: optNumeric,
  flowTotal: optNumeric,
  flowBalance: optNumeric,
  status: optNumeric,
  renew: optNumeric,
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
  status: optNumeric,
  count: optNumeric,
  amount: opt(stringish),
  refund: optNumeric,
  page: optNumeric,
  pageSize: optNumeric,
  total: optNumeric,
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
  status: optNumeric,
  authStatus: optNumeric,
});

export const subAccountInfo = z.looseObject({
  appUsername: z.string(),
  productNo: opt(z.string()),
  username: opt(z.string()),
  password: opt(z.string()),
  status: optNumeric,
  remark: opt(z.string()),
  limitFlow: optNumeric,
  useFlow: optNumeric,
});

export const balanceEntry = z.looseObject({
  used: optNumeric,
  total: optNumeric,
  balance: numeric,
  productNo: opt(z.string()),
  ipWhiteList: opt(z.array(z.string())),
  ipUsed: optNumeric,
  ipTotal: optNumeric,
});

export const flowLogEntry = z.looseObject({
  used: numeric,
  total: optNumeric,
  balance: optNumeric,
  usedTime: optNumeric,
  productNo: opt(z.string()),
});

export type Product = z.output<typeof product>;
export type Instance = z.output<typeof instance>;
export type Order = z.output<typeof order>;
export type City = z.output<typeof city>;
export type Project = z.output<typeof project>;
