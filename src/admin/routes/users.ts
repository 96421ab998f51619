// Local proxy users: GET /v1/users (bytes used, limit, active connections), PUT /v1/users/:name/limit.
import { z } from 'zod';
import { zs } from '../validation.ts';
import { doc, name, noQuery, type RegisterRoutes } from './common.ts';

const userRow = {
  type: 'object',
  required: ['name', 'usedBytes', 'limitBytes', 'activeConnections'],
  properties: {
    name: { type: 'string' },
    usedBytes: { type: 'integer' },
    limitBytes: { type: 'integer', description: '-1 = unlimited' },
    activeConnections: { type: 'integer' },
  },
};

export const userRoutes: RegisterRoutes = (app, deps) => {
  app.get(
    '/users',
    { schema: { operationId: 'listUsers', querystring: noQuery, ...doc('users', 'local users: bytes used (both directions), limit, active connections', { 200: { type: 'array', items: userRow } }) } },
    async () =>
    deps.users.list(),
  );
  app.put<{ Params: { name: string }; Body: { limitBytes: number } }>(
    '/users/:name/limit',
    {
      schema: {
        operationId: 'setUserLimit',
        params: zs(z.strictObject({ name })),
        body: zs(z.strictObject({ limitBytes: z.number().int().min(-1).max(Number.MAX_SAFE_INTEGER) })),
        ...doc('users', 'set a local user\'s limit in bytes (-1 = unlimited); kept across restarts until the config changes it', { 200: userRow }),
      },
    },
    async (req) => deps.users.setLimit(req.params.name, req.body.limitBytes),
  );
};
