// Dynamic main accounts: POST /v1/accounts (CreateUser: create or modify), POST /v1/accounts/:name/auth
// (UserAuth), GET /v1/accounts/:name/balance (ProxyInfo, MB), GET /v1/accounts/:name/flow-log
// (ProxyFlowUseLog, bytes), POST /v1/accounts/:name/return (DynamicProxyReturn, MB or IPs).
// `proxyType` is accepted where the seed has it, and must be 104 or 105; Rotor takes the type from the
// product record itself, so a caller cannot pair a product with the wrong type.
import { z } from 'zod';
import { operations } from '../../platform/operations.ts';
import type { FlowLogQuery } from '../deps.ts';
import { fromZod, looseObject } from '../schemas.ts';
import { zs } from '../validation.ts';
import { doc, dynamicType, dynamicTypeQuery, name, type RegisterRoutes } from './common.ts';

const accountParams = zs(z.strictObject({ name }));
const authBody = z.strictObject({
  authType: z.union([z.literal(1), z.literal(2), z.literal(3)]),
  authName: z.string().optional(),
  no: z.string().optional(),
  vsp: z.string().optional(),
});
const returnBody = z.strictObject({
  productNo: name,
  proxyType: dynamicType.optional(),
  flowNum: z.number().int().min(1).optional(),
  ipNum: z.number().int().min(1).optional(),
  remark: z.string().max(250).optional(),
});
const dateTime = z.string().regex(/^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$/, 'expected YYYY-MM-DD HH:MM:SS');

const balanceAnswer = {
  type: 'object',
  properties: {
    account: { type: 'string' },
    productNo: { type: 'string' },
    proxyType: { type: 'integer' },
    balanceMb: { type: 'number' },
    balanceBytes: { type: 'integer' },
    usedMb: { type: 'number' },
    totalMb: { type: 'number' },
    ipUsed: { type: 'integer' },
    ipTotal: { type: 'integer' },
    whitelist: { type: 'array', items: { type: 'string' } },
    hasBalance: { type: 'boolean' },
    checkedAt: { type: 'integer' },
  },
};
const flowLogAnswer = {
  type: 'object',
  properties: {
    account: { type: 'string' },
    productNo: { type: 'string' },
    startTime: { type: 'string' },
    endTime: { type: 'string' },
    page: { type: 'integer' },
    pageSize: { type: 'integer' },
    total: { type: 'integer' },
    entries: {
      type: 'array',
      items: {
        type: 'object',
        properties: {
          usedBytes: { type: 'integer' },
          totalBytes: { type: 'integer' },
          balanceBytes: { type: 'integer' },
          time: { type: 'integer' },
          productNo: { type: 'string' },
        },
      },
    },
  },
};

export const accountRoutes: RegisterRoutes = (app, deps) => {
  app.post<{ Body: z.output<typeof operations.CreateUser.request> }>(
    '/accounts',
    {
      schema: {
        operationId: 'saveMainAccount',
        body: zs(operations.CreateUser.request),
        ...doc('accounts', 'create or modify a main account (CreateUser); the answer carries no password', {
          200: fromZod(operations.CreateUser.response),
        }),
      },
    },
    async (req) => {
      const { password: _password, ...account } = await deps.platform.call('CreateUser', req.body);
      return account;
    },
  );

  app.post<{ Params: { name: string }; Body: z.output<typeof authBody> }>(
    '/accounts/:name/auth',
    {
      schema: {
        operationId: 'verifyMainAccount',
        params: accountParams,
        body: zs(authBody),
        ...doc('accounts', 'sync account verification (UserAuth)', { 200: fromZod(operations.UserAuth.response) }),
      },
    },
    async (req) => deps.platform.call('UserAuth', { ...req.body, appUsername: req.params.name }),
  );

  app.get<{ Params: { name: string }; Querystring: { productNo: string; proxyType?: 104 | 105 } }>(
    '/accounts/:name/balance',
    {
      schema: {
        operationId: 'getAccountBalance',
        params: accountParams,
        querystring: zs(z.strictObject({ productNo: name, proxyType: dynamicTypeQuery.optional() })),
        ...doc('accounts', "dynamic balance (ProxyInfo; MB and bytes at the product's base)", { 200: balanceAnswer }),
      },
    },
    async (req) => deps.balances.fetch(req.params.name, req.query.productNo),
  );

  app.get<{ Params: { name: string }; Querystring: Omit<FlowLogQuery, 'account'> }>(
    '/accounts/:name/flow-log',
    {
      schema: {
        operationId: 'getAccountFlowLog',
        params: accountParams,
        querystring: zs(
          z.strictObject({
            productNo: name,
            startTime: dateTime.optional(),
            endTime: dateTime.optional(),
            page: z.coerce.number().int().min(1).optional(),
            pageSize: z.coerce.number().int().min(1).max(100).optional(),
          }),
        ),
        ...doc('accounts', 'traffic-use log, bytes (ProxyFlowUseLog); default range the last 7 days', { 200: flowLogAnswer }),
      },
    },
    async (req) => deps.traffic.flowLog({ ...req.query, account: req.params.name }),
  );

  app.post<{ Params: { name: string }; Body: z.output<typeof returnBody> }>(
    '/accounts/:name/return',
    {
      schema: {
        operationId: 'returnTraffic',
        params: accountParams,
        body: zs(returnBody),
        ...doc('accounts', 'return dynamic traffic (DynamicProxyReturn): flowNum in whole MB, or ipNum', { 200: looseObject }),
      },
    },
    async (req) => {
      const { proxyType: _type, ...rest } = req.body;
      return deps.traffic.returnTraffic({ ...rest, account: req.params.name });
    },
  );
};
