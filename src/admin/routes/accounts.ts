// Dynamic main accounts: POST /v1/accounts (CreateUser: create or modify), POST /v1/accounts/:name/auth
// (UserAuth), GET /v1/accounts/:name/balance (ProxyInfo, MB), GET /v1/accounts/:name/flow-log
// (ProxyFlowUseLog, bytes), POST /v1/accounts/:name/return (DynamicProxyReturn).
import { z } from 'zod';
import { operations } from '../../platform/operations.ts';
import type { AuthInput, FlowLogQuery, ReturnInput } from '../deps.ts';
import { fromZod } from '../schemas.ts';
import { zs } from '../validation.ts';
import { doc, dynamicTypeQuery, name, type RegisterRoutes } from './common.ts';

const accountParams = zs(z.strictObject({ name }));
const authBody = z.strictObject({
  authType: z.union([z.literal(1), z.literal(2), z.literal(3)]),
  authName: z.string().optional(),
  no: z.string().optional(),
  vsp: z.string().optional(),
});
const returnBody = operations.DynamicProxyReturn.request.omit({ appUsername: true });
const dateTime = z.string().regex(/^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$/, 'expected YYYY-MM-DD HH:MM:SS');

export const accountRoutes: RegisterRoutes = (app, deps) => {
  app.post<{ Body: z.output<typeof operations.CreateUser.request> }>(
    '/accounts',
    {
      schema: {
        body: zs(operations.CreateUser.request),
        ...doc('accounts', 'create or modify a main account (CreateUser)', { 200: fromZod(operations.CreateUser.response) }),
      },
    },
    async (req) => deps.accounts.createMainAccount(req.body),
  );

  app.post<{ Params: { name: string }; Body: AuthInput }>(
    '/accounts/:name/auth',
    {
      schema: { params: accountParams, body: zs(authBody), ...doc('accounts', 'sync account verification (UserAuth)', { 200: fromZod(operations.UserAuth.response) }) },
    },
    async (req) => deps.accounts.authMainAccount(req.params.name, req.body),
  );

  app.get<{ Params: { name: string }; Querystring: { productNo: string; proxyType: 104 | 105 } }>(
    '/accounts/:name/balance',
    {
      schema: {
        params: accountParams,
        querystring: zs(z.strictObject({ productNo: name, proxyType: dynamicTypeQuery })),
        ...doc('accounts', 'dynamic balance in MB (ProxyInfo)', { 200: fromZod(operations.ProxyInfo.response) }),
      },
    },
    async (req) => deps.accounts.balance(req.params.name, req.query),
  );

  app.get<{ Params: { name: string }; Querystring: FlowLogQuery }>(
    '/accounts/:name/flow-log',
    {
      schema: {
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
        ...doc('accounts', 'traffic-use log, bytes (ProxyFlowUseLog)', { 200: fromZod(operations.ProxyFlowUseLog.response) }),
      },
    },
    async (req) => deps.accounts.flowLog(req.params.name, req.query),
  );

  app.post<{ Params: { name: string }; Body: ReturnInput }>(
    '/accounts/:name/return',
    {
      schema: {
        params: accountParams,
        body: zs(returnBody),
        ...doc('accounts', 'return dynamic traffic (DynamicProxyReturn; flowNum in MB)', { 200: fromZod(operations.DynamicProxyReturn.response) }),
      },
    },
    async (req) => deps.accounts.returnTraffic(req.params.name, req.body),
  );
};
