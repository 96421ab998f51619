// POST /v1/orders/open|renew|release|aftersale|assign-ip and GET /v1/orders, /v1/orders/:no. Bodies are the
// seed's requests (checked by the operation table's own schemas) with the merchant number optional: the
// Orders facade generates and journals one before anything is sent. Placing answers 202: the order is
// accepted, its outcome arrives later (callback or polling).
import { z } from 'zod';
import { operations } from '../../platform/operations.ts';
import type { AdminDeps } from '../deps.ts';
import { notFound } from '../errors.ts';
import { fromZod, orderSchema } from '../schemas.ts';
import { reraise, zs, zsWith } from '../validation.ts';
import { boolQuery, doc, intListQuery, name, type RegisterRoutes } from './common.ts';

const merchantNo = z.string().min(1).max(32);

const openFull = operations.InstanceOpen.request.extend({ appOrderNo: merchantNo.optional() });
const openItem = operations.InstanceOpen.request.shape.params.element;
const openSingle = openItem.extend({ appOrderNo: merchantNo.optional() });

/** `{"params":[…]}`, or one item's fields at the top level. */
const openBody = z.unknown().transform((v, ctx) => {
  if (typeof v === 'object' && v !== null && !Array.isArray(v) && 'params' in v) return reraise(openFull, v, ctx);
  const single = reraise(openSingle, v, ctx);
  if (single === z.NEVER || single === undefined) return z.NEVER;
  const { appOrderNo, ...item } = single;
  return appOrderNo === undefined ? { params: [item] } : { appOrderNo, params: [item] };
});

export const bodies = {
  open: zsWith({ anyOf: [fromZod(openFull), fromZod(openSingle)] }, openBody),
  renew: zs(operations.InstanceRenew.request.extend({ appOrderNo: merchantNo.optional() })),
  release: zs(operations.InstanceRelease.request.extend({ orderNo: merchantNo.optional() })),
  aftersale: zs(operations.InstanceAfterSale.request.extend({ orderNo: merchantNo.optional() })),
  assignIp: zs(operations.InstanceOpenAssignIp.request.extend({ appOrderNo: merchantNo.optional() })),
};

const accepted = { 202: { description: 'accepted: the order record', ...orderSchema } };

type Place = (deps: AdminDeps, body: never) => Promise<unknown>;
const PLACING: [path: string, operationId: string, schema: Record<string, unknown>, summary: string, place: Place][] = [
  [
    '/orders/open',
    'openOrder',
    bodies.open,
    'open an order (InstanceOpen); {"params":[…]} or one item at the top level',
    (d, b) => d.orders.open(b),
  ],
  ['/orders/renew', 'renewInstances', bodies.renew, 'renew static instances (InstanceRenew)', (d, b) => d.orders.renew(b)],
  ['/orders/release', 'releaseInstances', bodies.release, 'release static instances (InstanceRelease)', (d, b) => d.orders.release(b)],
  ['/orders/aftersale', 'afterSaleInstances', bodies.aftersale, 'after-sale release (InstanceAfterSale)', (d, b) => d.orders.afterSale(b)],
  ['/orders/assign-ip', 'openAssignedIp', bodies.assignIp, 'open a specified IP (InstanceOpenAssignIp)', (d, b) => d.orders.assignIp(b)],
];

interface ListQuery {
  type?: number;
  status?: number[];
  open?: boolean;
  limit?: number;
  offset?: number;
}

export const orderRoutes: RegisterRoutes = (app, deps) => {
  for (const [path, operationId, body, summary, place] of PLACING) {
    app.post(path, { schema: { operationId, body, ...doc('orders', summary, accepted) } }, async (req, reply) => {
      const order = await place(deps, req.body as never);
      return reply.status(202).send(order);
    });
  }

  app.get<{ Querystring: ListQuery }>(
    '/orders',
    {
      schema: {
        operationId: 'listOrders',
        querystring: zs(
          z.strictObject({
            type: z.coerce.number().int().optional(),
            status: intListQuery.optional(),
            open: boolQuery.optional(),
            limit: z.coerce.number().int().min(1).max(1000).optional(),
            offset: z.coerce.number().int().min(0).optional(),
          }),
        ),
        ...doc('orders', 'local order records (type, status=3,4, open=true, limit, offset)', {
          200: { type: 'array', items: orderSchema },
        }),
      },
    },
    async (req) => {
      const q = req.query;
      return deps.orders.listOrders({
        ...(q.type !== undefined ? { type: q.type } : {}),
        ...(q.status?.length ? { statuses: q.status } : {}),
        ...(q.open !== undefined ? { open: q.open } : {}),
        ...(q.limit !== undefined ? { limit: q.limit } : {}),
        ...(q.offset !== undefined ? { offset: q.offset } : {}),
      });
    },
  );

  app.get<{ Params: { no: string } }>(
    '/orders/:no',
    {
      schema: {
        operationId: 'getOrder',
        params: zs(z.strictObject({ no: name })),
        ...doc('orders', 'one order by platform or merchant number, refreshed from the platform', { 200: orderSchema }),
      },
    },
    async (req) => {
      const order = await deps.orders.getOrder(req.params.no);
      if (!order) throw notFound(`order ${req.params.no}`);
      return order;
    },
  );
};
