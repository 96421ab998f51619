// Dynamic sub accounts: POST /v1/sub-accounts (CreateProxyUser, limitFlow in MB), GET /v1/sub-accounts/:name
// (GetProxyUserInfo), PUT /v1/sub-accounts/:name/limit (SetProxyUserFlowLimit, limitFlow in bytes).
import { z } from 'zod';
import { operations } from '../../platform/operations.ts';
import type { SubLimitInput } from '../deps.ts';
import { fromZod } from '../schemas.ts';
import { zs } from '../validation.ts';
import { doc, name, type RegisterRoutes } from './common.ts';

const subParams = zs(z.strictObject({ name }));

export const subAccountRoutes: RegisterRoutes = (app, deps) => {
  app.post<{ Body: z.output<typeof operations.CreateProxyUser.request> }>(
    '/sub-accounts',
    {
      schema: {
        body: zs(operations.CreateProxyUser.request),
        ...doc('sub-accounts', 'create a sub account (CreateProxyUser; limitFlow in MB)', { 200: fromZod(operations.CreateProxyUser.response) }),
      },
    },
    async (req) => deps.accounts.createSubAccount(req.body),
  );

  app.get<{ Params: { name: string }; Querystring: { productNo: string } }>(
    '/sub-accounts/:name',
    {
      schema: {
        params: subParams,
        querystring: zs(z.strictObject({ productNo: name })),
        ...doc('sub-accounts', 'sub-account info, bytes (GetProxyUserInfo)', { 200: fromZod(operations.GetProxyUserInfo.response) }),
      },
    },
    async (req) => deps.accounts.getSubAccount(req.params.name, req.query.productNo),
  );

  app.put<{ Params: { name: string }; Body: SubLimitInput }>(
    '/sub-accounts/:name/limit',
    {
      schema: {
        params: subParams,
        body: zs(operations.SetProxyUserFlowLimit.request.omit({ appUsername: true })),
        ...doc('sub-accounts', 'set the platform-side limit, bytes: -1 or >= 1024000 (SetProxyUserFlowLimit)', {
          200: { type: 'object', properties: { name: { type: 'string' }, productNo: { type: 'string' }, limitFlow: { type: 'integer' } } },
        }),
      },
    },
    async (req) => {
      await deps.accounts.setSubAccountLimit(req.params.name, req.body);
      return { name: req.params.name, productNo: req.body.productNo, limitFlow: req.body.limitFlow };
    },
  );
};
