// GET /v1/sessions (sticky sessions) and DELETE /v1/sessions/:user/:id (forced rotation: the next
// connection of that session gets a new upstream).
import { z } from 'zod';
import { USER_NAME } from '../../config/schema.ts';
import { notFound } from '../errors.ts';
import { zs } from '../validation.ts';
import { doc, noQuery, type RegisterRoutes } from './common.ts';

const session = {
  type: 'object',
  properties: {
    user: { type: 'string' },
    sessionId: { type: 'string' },
    nodeId: { type: 'string' },
    startedAt: { type: 'integer' },
    expiresAt: { type: 'integer' },
  },
};
const ident = z.string().regex(USER_NAME, 'expected [A-Za-z0-9_.]+').max(128);

export const sessionRoutes: RegisterRoutes = (app, deps) => {
  app.get(
    '/sessions',
    {
      schema: {
        operationId: 'listSessions',
        querystring: noQuery,
        ...doc('sessions', 'live sticky sessions', { 200: { type: 'array', items: session } }),
      },
    },
    async () => deps.sessions.list(),
  );
  app.delete<{ Params: { user: string; id: string } }>(
    '/sessions/:user/:id',
    {
      schema: {
        operationId: 'rotateSession',
        params: zs(z.strictObject({ user: ident, id: ident })),
        ...doc('sessions', 'end a sticky session now (rotation reason manual)', {
          200: { type: 'object', properties: { user: { type: 'string' }, sessionId: { type: 'string' }, rotated: { type: 'boolean' } } },
        }),
      },
    },
    async (req) => {
      if (!deps.sessions.rotate(req.params.user, req.params.id, 'manual'))
        throw notFound(`session ${req.params.id} of user ${req.params.user}`);
      return { user: req.params.user, sessionId: req.params.id, rotated: true };
    },
  );
};
