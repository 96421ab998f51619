// The operation table: one entry per operation of seed part 4 — interface name, path, request and response
// schemas. It is data: the client, the simulator, `rotor call`, the admin escape hatch and the docs all read
// it. Request schemas carry the limits of seed part 8, so a request that breaks one is refused with the
// field's name before anything is sent. Keys are spelled exactly as the seed spells them.
import { z } from 'zod';
import * as r from './schemas.ts';

const MERCHANT_NO = z.string().min(1).max(32);
const CHANGE_NO = z.string().min(1).max(64);
const DATE_TIME = z.string().regex(/^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$/, 'expected YYYY-MM-DD HH:MM:SS');
const DYNAMIC_TYPE = z.union([z.literal(104), z.literal(105)]);
const ACCOUNT_STATUS = z.union([z.literal(1), z.literal(2)]);
const AUTH_TYPE = z.union([z.literal(1), z.literal(2), z.literal(3)]);
const PAGE = z.number().int().min(1);
const PAGE_SIZE = z.number().int().min(1).max(100);
const INT = z.number().int();

function unique<T>(key: (item: T) => string) {
  return (items: T[], ctx: z.RefinementCtx) => {
    const seen = new Set<string>();
    items.forEach((item, i) => {
      const k = key(item);
      if (seen.has(k)) ctx.addIssue({ code: 'custom', message: `duplicate ${k}`, path: [i] });
      seen.add(k);
    });
  };
}
const instanceNos = (max?: number) => {
  const base = z.array(z.string().min(1)).min(1);
  return (max ? base.max(max) : base).superRefine(unique((s: string) => s));
};

const codesRequest = z.strictObject({ codes: z.array(z.string()).nullable().optional() });

const openItem = z.strictObject({
  productNo: z.string().min(1).optional(),
  proxyType: INT.optional(),
  countryCode: z.string().optional(),
  cityCode: z.string().optional(),
  supplierCode: z.string().nullable().optional(),
  unit: z.union([z.literal(1), z.literal(2), z.literal(3), z.literal(4), z.literal(10)]).optional(),
  ispType: INT.optional(),
  duration: INT.min(0).optional(),
  productType: z.union([z.literal(1), z.literal(2)]).optional(),
  // Seed part 8 states two caps (100 per item; 20 per call). Rotor checks the per-item cap and lets the
  // platform judge the per-call total, so neither reading makes Rotor refuse an order the platform takes.
  count: INT.min(1).max(100).optional(),
  cycleTimes: INT.min(1).optional(),
  renew: z.boolean().optional(),
  extBandWidth: INT.min(0).optional(),
  appUsername: z.string().min(1).optional(),
  flow: INT.min(1).optional(),
  useBridge: z.union([z.literal(0), z.literal(1), z.literal(2)]).optional(),
  projectId: z.string().min(1).optional(),
  cidrBlocks: z.array(z.strictObject({ cidr: z.string().min(1), count: INT.min(1) })).optional(),
});

// sessTime: the seed gives 0-90 in the field description and 1-120 in the error table; 0 or -1 mean change
// on every use. Rotor accepts the union, -1..120, and sends it as a string as the provider's SDK does.
export const SESS_TIME_MIN = -1;
export const SESS_TIME_MAX = 120;
const sessTime = z
  .union([
    z.number().int(),
    z
      .string()
      .regex(/^-?\d+$/, 'expected whole minutes')
      .transform(Number),
  ])
  .pipe(z.number().int().min(SESS_TIME_MIN).max(SESS_TIME_MAX))
  .transform(String);

export const operations = {
  GetAppInfo: {
    path: '/api/open/app/info/v2',
    summary: 'merchant app info',
    request: z.strictObject({}),
    response: r.appInfo,
  },
  GetArea: { path: '/api/open/app/area/v2', summary: 'region tree', request: codesRequest, response: z.array(r.areaNode), lookup: true },
  GetCityList: { path: '/api/open/app/city/list/v2', summary: 'cities', request: codesRequest, response: z.array(r.city), lookup: true },
  GetProjectList: {
    path: '/api/open/app/project/list/v2',
    summary: 'projects',
    request: codesRequest,
    response: z.array(r.project),
    lookup: true,
  },
  GetProductStock: {
    lookup: true,
    path: '/api/open/app/product/query/v2',
    summary: 'authorized products with stock',
    request: z.strictObject({
      proxyType: z.array(INT).min(1),
      productNo: z.string().optional(),
      countryCode: z.string().optional(),
      cityCode: z.string().optional(),
      supplierCode: z.string().optional(),
      unit: INT.optional(),
      ispType: INT.optional(),
      duration: INT.optional(),
    }),
    response: z.array(r.product),
  },
  GetProductInfo: {
    lookup: true,
    path: '/api/open/app/product/info/v2',
    summary: 'one product, real time',
    request: z.strictObject({ productNo: z.string().min(1) }),
    // The seed shows neither side: one record (the provider SDK), or an array of it as the product query
    // answers (src/platform/product-reader.ts reads both, and falls back to the product query).
    response: z.union([r.product, z.array(r.product)]),
  },
  ProductAreaList: {
    lookup: true,
    path: '/api/open/app/product/area/v2',
    summary: 'regions of a dynamic product',
    request: z.strictObject({ productNo: z.string().min(1), proxyType: DYNAMIC_TYPE }),
    response: z.array(r.productArea),
  },
  InstanceOpen: {
    path: '/api/open/app/instance/open/v2',
    summary: 'open an order (static or dynamic)',
    merchantNo: 'appOrderNo',
    orderType: 1,
    request: z.strictObject({ appOrderNo: MERCHANT_NO, params: z.array(openItem).min(1).max(100) }),
    response: r.orderAccepted,
  },
  GetOrder: {
    lookup: true,
    path: '/api/open/app/order/v2',
    summary: 'one order with paged instances',
    request: z
      .strictObject({
        orderNo: z.string().min(1).max(32).optional(),
        appOrderNo: CHANGE_NO.optional(),
        page: PAGE.optional(),
        pageSize: PAGE_SIZE.optional(),
      })
      .refine((v) => v.orderNo !== undefined || v.appOrderNo !== undefined, {
        message: 'orderNo or appOrderNo is required',
        path: ['orderNo'],
      }),
    response: r.order,
  },
  GetInstance: {
    lookup: true,
    path: '/api/open/app/instance/v2',
    summary: 'instances by number',
    request: z.strictObject({ instances: instanceNos() }),
    response: z.array(r.instance),
  },
  ChangeProxy: {
    path: '/api/open/app/instance/change/v2',
    summary: 'change the proxy behind an instance',
    merchantNo: 'appOrderNo',
    orderType: 5,
    request: z.strictObject({
      instanceNo: z.string().min(1),
      appOrderNo: CHANGE_NO,
      targetProductNo: z.string().optional(),
      targetCidrBlocks: z.array(z.strictObject({ cidr: z.string().min(1), count: INT.min(1) })).optional(),
      reason: z.string().max(64).optional(),
    }),
    response: z.looseObject({
      orderNo: z.string(),
      appOrderNo: z.string().optional().nullable(),
      instanceNo: z.string().optional().nullable(),
      status: r.optNumeric,
    }),
  },
  InstanceRenew: {
    path: '/api/open/app/instance/renew/v2',
    summary: 'renew static instances',
    merchantNo: 'appOrderNo',
    orderType: 2,
    request: z.strictObject({
      appOrderNo: MERCHANT_NO,
      instances: z
        .array(z.strictObject({ instanceNo: z.string().min(1), duration: INT.min(1).optional(), cycleTimes: INT.min(1).optional() }))
        .min(1)
        .max(100)
        .superRefine(unique((i: { instanceNo: string }) => i.instanceNo)),
    }),
    response: r.orderAccepted,
  },
  InstanceRelease: {
    path: '/api/open/app/instance/release/v2',
    summary: 'release static instances',
    merchantNo: 'orderNo',
    orderType: 3,
    request: z.strictObject({ orderNo: MERCHANT_NO, instances: instanceNos(100) }),
    response: r.orderAccepted,
  },
  InstanceAfterSale: {
    path: '/api/open/app/instance/aftersale/v2',
    summary: 'after-sale release',
    merchantNo: 'orderNo',
    orderType: 3,
    request: z.strictObject({
      orderNo: MERCHANT_NO,
      instances: instanceNos(100),
      reason: z.string().optional(),
      remark: z.string().max(255).optional(),
    }),
    response: r.orderAccepted,
  },
  GetAssignIpInfo: {
    path: '/api/open/app/assign/ip/info/v2',
    summary: 'can this IP be bought',
    request: z.strictObject({ ip: z.string().min(1) }),
    response: z.looseObject({ ip: z.string(), canBuyStatus: r.boolish }),
  },
  InstanceOpenAssignIp: {
    path: '/api/open/app/instance/open/assign/ip/v2',
    summary: 'open a specified IP',
    merchantNo: 'appOrderNo',
    orderType: 1,
    request: z.strictObject({
      appOrderNo: MERCHANT_NO,
      productNo: z.string().min(1),
      cycleTimes: INT.min(1),
      assignIp: z.string().min(1),
      renew: z.boolean().optional(),
      extBandWidth: INT.min(0).optional(),
      useBridge: z.union([z.literal(1), z.literal(2)]).optional(),
    }),
    response: r.orderAccepted,
  },
  ResetProxyPassword: {
    path: '/api/open/app/instance/reset/password/v2',
    summary: 'reset instance passwords',
    merchantNo: 'resetNo',
    request: z.strictObject({
      resetNo: z
        .string()
        .min(1)
        .max(32)
        .regex(/^[A-Za-z0-9_]+$/, 'resetNo uses [A-Za-z0-9_]'),
      instanceNoList: instanceNos(),
    }),
    response: z.looseObject({
      resetNo: z.string().optional().nullable(),
      status: r.optNumeric,
      // The seed names `status` and `newPassword` without placing them: at the top here, per instance in `list`.
      newPassword: z.string().optional().nullable(),
      list: z
        .array(z.looseObject({ instanceNo: z.string(), newPassword: z.string().optional().nullable(), status: r.optNumeric }))
        .optional()
        .nullable(),
    }),
  },
  CreateUser: {
    path: '/api/open/app/user/v2',
    summary: 'create or modify a main account',
    request: z.strictObject({
      appUsername: z.string().min(1).optional(),
      password: z.string().min(1).optional(),
      phone: z.string().optional(),
      email: z.string().optional(),
      authType: AUTH_TYPE.optional(),
      authName: z.string().optional(),
      no: z.string().optional(),
      vsp: INT.min(0).max(255).optional(),
      status: ACCOUNT_STATUS,
    }),
    response: r.mainAccount,
  },
  UserAuth: {
    path: '/api/open/app/userAuth/v2',
    summary: 'sync account verification',
    request: z
      .strictObject({
        username: z.string().min(1).optional(),
        appUsername: z.string().min(1).optional(),
        authType: AUTH_TYPE,
        authName: z.string().optional(),
        no: z.string().optional(),
        vsp: z.string().optional(),
      })
      .refine((v) => v.username !== undefined || v.appUsername !== undefined, {
        message: 'username or appUsername is required',
        path: ['appUsername'],
      }),
    response: z.looseObject({ username: z.string().optional().nullable(), authStatus: r.optNumeric }),
  },
  CreateProxyUser: {
    path: '/api/open/app/proxy/user/v2',
    summary: 'create a sub account (limitFlow in MB)',
    request: z
      .strictObject({
        appUsername: z.string().min(1).max(32).optional(),
        password: z.string().min(1).optional(),
        limitFlow: INT.min(-1),
        mainUsername: z.string().min(1).optional(),
        appMainUsername: z.string().min(1).optional(),
        remark: z.string().max(255).optional(),
        status: ACCOUNT_STATUS,
      })
      .refine((v) => v.mainUsername !== undefined || v.appMainUsername !== undefined, {
        message: 'mainUsername or appMainUsername is required',
        path: ['appMainUsername'],
      }),
    response: r.mainAccount,
  },
  ProxyInfo: {
    path: '/api/open/app/proxy/info/v2',
    summary: 'dynamic balance (MB)',
    request: z
      .strictObject({
        username: z.string().min(1).optional(),
        appUsername: z.string().min(1).optional(),
        proxyType: DYNAMIC_TYPE,
        productNo: z.string().min(1),
      })
      .refine((v) => v.username !== undefined || v.appUsername !== undefined, {
        message: 'username or appUsername is required',
        path: ['appUsername'],
      }),
    response: z.looseObject({ list: z.array(r.balanceEntry).nullable().optional() }),
  },
  DrawByPwd: {
    path: '/api/open/app/proxy/draw/pwd/v2',
    summary: 'draw proxies by password',
    request: z.strictObject({
      appUsername: z.string().min(1),
      addressCode: z.string().optional(),
      sessTime: sessTime.optional(),
      num: INT.min(1).optional(),
      proxyType: DYNAMIC_TYPE.optional(),
      maxFlowLimit: INT.optional(),
      productNo: z.string().min(1),
    }),
    response: z.looseObject({
      list: z.array(z.looseObject({ proxyUrl: z.string().optional().nullable(), list: z.array(z.string()).optional().nullable() })),
    }),
  },
  DrawByApi: {
    path: '/api/open/app/proxy/draw/api/v2',
    summary: 'draw an extraction link',
    request: z.strictObject({
      appUsername: z.string().min(1),
      proxyType: DYNAMIC_TYPE,
      num: INT.min(1).optional(),
      addressCode: z.string().optional(),
      protocol: z.enum(['socks5', 'http']).optional(),
      returnType: z.enum(['txt', 'json']).optional(),
      delimiter: z.union([z.literal(1), z.literal(2), z.literal(3), z.literal(4), z.literal(5)]).optional(),
      maxFlowLimit: INT.optional(),
      productNo: z.string().min(1),
    }),
    response: z.looseObject({ list: z.array(z.looseObject({ proxyUrl: z.string() })) }),
  },
  AddIpWhiteList: {
    path: '/api/open/app/proxy/addIpWhiteList/v2',
    summary: 'add a whitelist IP',
    request: z.strictObject({
      appUsername: z.string().min(1),
      ip: z.string().min(1),
      proxyType: DYNAMIC_TYPE,
      productNo: z.string().min(1),
    }),
    response: z.looseObject({ ipWhiteList: z.array(z.string()).nullable().optional() }),
  },
  DelIpWhiteList: {
    path: '/api/open/app/proxy/delIpWhiteList/v2',
    summary: 'remove a whitelist IP',
    request: z.strictObject({
      appUsername: z.string().min(1),
      ip: z.string().min(1),
      proxyType: DYNAMIC_TYPE.optional(),
      productNo: z.string().min(1),
    }),
    response: z.looseObject({ ipWhiteList: z.array(z.string()).nullable().optional() }),
  },
  SetProxyUserFlowLimit: {
    path: '/api/open/app/proxy/user/flow/limit/v2',
    summary: 'set a sub-account limit (bytes)',
    request: z.strictObject({
      appUsername: z.string().min(1),
      productNo: z.string().min(1),
      limitFlow: INT.refine((n) => n === -1 || n >= 1_024_000, 'limitFlow must be -1 or at least 1024000 bytes'),
      remark: z.string().max(255).optional(),
    }),
    response: null,
  },
  GetProxyUserInfo: {
    path: '/api/open/app/proxy/user/info/v2',
    summary: 'sub-account info (bytes)',
    request: z.strictObject({ appUsername: z.string().min(1), productNo: z.string().min(1) }),
    response: r.subAccountInfo,
  },
  ProxyFlowUseLog: {
    path: '/api/open/app/proxy/flow/use/log/v2',
    summary: 'traffic-use log (bytes)',
    request: z.strictObject({
      appUsername: z.string().min(1),
      startTime: DATE_TIME.optional(),
      endTime: DATE_TIME.optional(),
      productNo: z.string().min(1),
      page: PAGE.optional(),
      pageSize: PAGE_SIZE.optional(),
    }),
    response: z.looseObject({
      total: r.optNumeric,
      curPage: r.optNumeric,
      list: z.array(r.flowLogEntry).nullable().optional(),
    }),
  },
  DynamicProxyReturn: {
    path: '/api/open/app/proxy/return/v2',
    summary: 'return dynamic traffic',
    request: z.strictObject({
      appUsername: z.string().min(1),
      proxyType: DYNAMIC_TYPE,
      productNo: z.string().min(1),
      ipNum: INT.min(1).optional(),
      flowNum: INT.min(1).optional(),
      remark: z.string().max(250).optional(),
    }),
    response: z.looseObject({ returnAmount: r.optNumeric }),
    // Money moved with no merchant number to make a second send harmless, and the seed does not say the
    // platform recognises a resent reqId: resent only when the first send never reached it.
    resend: 'unsent',
  },
} as const satisfies Record<string, OperationSpec>;

export interface OperationSpec {
  path: string;
  summary: string;
  request: z.ZodType;
  /** null: the operation answers with a code and no data (seed 4.18, set-limit). */
  response: z.ZodType | null;
  /** The request field that carries the merchant's idempotency number, for operations that place orders. */
  merchantNo?: string;
  /** The order type (seed 2.7) that the operation creates. */
  orderType?: number;
  /**
   * When the client may send the same request again (same reqId, same ciphertext) after a failed attempt:
   * absent = after any transient failure (isRetryable), because a second processing changes nothing — reads,
   * operations keyed by a merchant number the platform does not process twice (seed 2.7, part 7), creations
   * under a unique name (a second one is refused as existing), settings (limit, whitelist, auth) that come out
   * the same, and draws (traffic is billed on use, not per draw). 'unsent' = only when the request never
   * reached the platform (errors.ts neverReached): an operation that moves money each time it is processed
   * (DynamicProxyReturn), whose outcome the caller must then verify rather than resend.
   */
  resend?: 'unsent';
  /**
   * A dictionary, product, order or instance lookup, whose HTTP method the seed leaves open (part 4: "not
   * shown"). Sent as POST like everything else; a platform answering HTTP 405 gets it (and every later call of
   * it) as GET with the envelope's fields in the query string (client.ts).
   */
  lookup?: true;
}

export type OperationName = keyof typeof operations;
export const OPERATION_NAMES = Object.keys(operations) as OperationName[];

type Spec<N extends OperationName> = (typeof operations)[N];
export type OpRequest<N extends OperationName> = z.input<Spec<N>['request']>;
export type OpResponse<N extends OperationName> = Spec<N>['response'] extends z.ZodType ? z.output<Spec<N>['response']> : null;

export function isOperationName(name: string): name is OperationName {
  return Object.prototype.hasOwnProperty.call(operations, name);
}

export function operationByPath(path: string): OperationName | undefined {
  return OPERATION_NAMES.find((n) => operations[n].path === path);
}
