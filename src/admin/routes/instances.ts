// GET /v1/instances, /v1/instances/:instanceNo; POST /v1/instances/:instanceNo/change (ChangeProxy) and
// /v1/instances/reset-password (ResetProxyPassword), merchant numbers optional as for orders.
import { z } from 'zod';
import { operations } from '../../platform/operations.ts';
import { notFound } from '../errors.ts';
import { instanceSchema, looseObject, orderSchema } from '../schemas.ts';
import { zs } from '../validation.ts';
import { boolQuery, doc, intListQuery, name, type RegisterRoutes } from './common.ts';

const changeBody = operations.ChangeProxy.request.omit({ instanceNo: true }).extend({ appOrderNo: z.string().min(1).max(64).optional() });
const resetBody = operations.ResetProxyPassword.request.extend({ resetNo: operations.ResetProxyPassword.request.shape.resetNo.optional() });

interface ListQuery {
  orderNo?: string;
  productNo?: string;
  status?: number[];
  limit?: number;
  offset?: number;
}

export const instanceRoutes: RegisterRoutes = (app, deps) => {
  app.get<{ Querystring: ListQuery }>(
    '/instances',
    {
      schema: {
        operationId: 'listInstances',
        querystring: zs(
          z.strictObject({
            orderNo: name.optional(),
            productNo: name.optional(),
            status: intListQuery.optional(),
            limit: z.coerce.number().int().min(1).max(1000).optional(),
            offset: z.coerce.number().int().min(0).optional(),
          }),
        ),
        ...doc('instances', 'static instances (orderNo, productNo, status=3,6, limit, offset)', {
          200: { type: 'array', items: instanceSchema },
        }),
      },
    },
    async (req) => {
      const q = req.query;
      return deps.orders.listInstances({
        ...(q.orderNo !== undefined ? { orderNo: q.orderNo } : {}),
        ...(q.productNo !== undefined ? { productNo: q.productNo } : {}),
        ...(q.status?.length ? { statuses: q.status } : {}),
        ...(q.limit !== undefined ? { limit: q.limit } : {}),
        ...(q.offset !== undefined ? { offset: q.offset } : {}),
      });
    },
  );

  app.get<{ Params: { instanceNo: string }; Querystring: { refresh?: boolean } }>(
    '/instances/:instanceNo',
    {
      schema: {
        operationId: 'getInstance',
        params: zs(z.strictObject({ instanceNo: name })),
        querystring: zs(z.strictObject({ refresh: boolQuery.optional() })),
        ...doc('instances', 'one static instance; refresh=true reads it from the platform first', { 200: instanceSchema }),
      },
    },
    async (req) => {
      const instance = await deps.orders.getInstance(req.params.instanceNo, { refresh: req.query.refresh === true });
      if (!instance) throw notFound(`instance ${req.params.instanceNo}`);
      return instance;
    },
  );

  app.post<{ Params: { instanceNo: string }; Body: z.output<typeof changeBody> }>(
    '/instances/:instanceNo/change',
    {
      schema: {
        operationId: 'changeInstance',
        params: zs(z.strictObject({ instanceNo: name })),
        body: zs(changeBody.prefault({})),
        ...doc('instances', 'change the proxy behind an instance (ChangeProxy); 202 with the change order', { 202: orderSchema }),
      },
    },
    async (req, reply) => {
      const order = await deps.orders.change(req.params.instanceNo, req.body);
      return reply.status(202).send(order);
    },
  );

  app.post<{ Body: z.output<typeof resetBody> }>(
    '/instances/reset-password',
    {
      schema: {
        operationId: 'resetInstancePasswords',
        body: zs(resetBody),
        ...doc('instances', 'reset instance passwords (ResetProxyPassword); new passwords are stored on the instances', {
          202: looseObject,
        }),
      },
    },
    async (req, reply) => reply.status(202).send(await deps.orders.resetPassword(req.body)),
  );
};
