// GET /v1/app: merchant info (GetAppInfo).
import { appInfo } from '../../platform/schemas.ts';
import { fromZod } from '../schemas.ts';
import { doc, noQuery, type RegisterRoutes } from './common.ts';

export const appRoutes: RegisterRoutes = (app, deps) => {
  app.get(
    '/app',
    { schema: { operationId: 'getApp', querystring: noQuery, ...doc('app', 'merchant info (GetAppInfo)', { 200: fromZod(appInfo) }) } },
    async () => deps.platform.call('GetAppInfo', {}),
  );
};
