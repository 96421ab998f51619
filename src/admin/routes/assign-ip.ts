// GET /v1/assign-ip/:ip: can this IP be bought (GetAssignIpInfo).
import { isIP } from 'node:net';
import { z } from 'zod';
import { zs } from '../validation.ts';
import { doc, type RegisterRoutes } from './common.ts';

export const assignIpRoutes: RegisterRoutes = (app, deps) => {
  app.get<{ Params: { ip: string } }>(
    '/assign-ip/:ip',
    {
      schema: {
        operationId: 'checkAssignIp',
        params: zs(z.strictObject({ ip: z.string().refine((s) => isIP(s) !== 0, 'expected an IPv4 or IPv6 address') })),
        ...doc('orders', 'can this IP be bought (GetAssignIpInfo)', {
          200: {
            type: 'object',
            required: ['ip', 'canBuyStatus'],
            properties: { ip: { type: 'string' }, canBuyStatus: { type: 'boolean' } },
          },
        }),
      },
    },
    async (req) => deps.orders.checkAssignIp(req.params.ip),
  );
};
