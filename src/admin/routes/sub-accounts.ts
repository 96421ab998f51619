// Dynamic sub accounts: POST /v1/sub-accounts (CreateProxyUser, limitFlow in MB), GET /v1/sub-accounts/:name
// (GetProxyUserInfo, bytes), PUT /v1/sub-accounts/:name/limit (SetProxyUserFlowLimit, limitFlow in bytes:
// -1 or at least 1024000). Passwords the platform returns are not passed on.
import { z } from 'zod';
import { operations } from '../../platform/operations.ts';
import { fromZod } from '../schemas.ts';
import { zs } from '../validation.ts';
import { doc, name, type RegisterRoutes } from './common.ts';

const subParams = zs(z.strictObject({ name }));
const limitBody = operations.SetProxyUserFlowLimit.request.omit({ appUsername: true });

export const subAccountRoutes: RegisterRoutes = (app, deps) => {
  app.post<{ Body: z.output<typeof operations.CreateProxyUser.request> }>(
    '/sub-accounts',
    {
      schema: {
        operationId: 'createSubAccount',
        body: zs(operations.CreateProxyUser.request),
        ...doc('sub-accounts', 'create a sub account (CreateProxyUser; limitFlow in MB)', {
          200: fromZod(operations.CreateProxyUser.response),
        }),
      },
    },
    async (req) => {
      const { password: _password, ...account } = await deps.platform.call('CreateProxyUser', req.body);
      return account;
    },
  );

  app.get<{ Params: { name: string }; Querystring: { productNo: string } }>(
    '/sub-accounts/:name',
    {
      schema: {
        operationId: 'getSubAccount',
        params: subParams,
        querystring: zs(z.strictObject({ productNo: name })),
        ...doc('sub-accounts', 'sub-account info, bytes (GetProxyUserInfo)', { 200: fromZod(operations.GetProxyUserInfo.response) }),
      },
    },
    async (req) => {
      const { password: _password, ...info } = await deps.platform.call('GetProxyUserInfo', {
        appUsername: req.params.name,
        productNo: req.query.productNo,
      });
      return info;
    },
  );

  app.put<{ Params: { name: string }; Body: z.output<typeof limitBody> }>(
    '/sub-accounts/:name/limit',
    {
      schema: {
        operationId: 'setSubAccountLimit',
        params: subParams,
        body: zs(limitBody),
        ...doc('sub-accounts', 'set the platform-side limit, bytes: -1 or >= 1024000 (SetProxyUserFlowLimit)', {
          200: { type: 'object', properties: { name: { type: 'string' }, productNo: { type: 'string' }, limitFlow: { type: 'integer' } } },
        }),
      },
    },
    async (req) => {
      await deps.platform.call('SetProxyUserFlowLimit', { ...req.body, appUsername: req.params.name });
      return { name: req.params.name, productNo: req.body.productNo, limitFlow: req.body.limitFlow };
    },
  );
};
